// `npm run bench:fleet`: 100 local contexts, one call each, three ways,
// in alternating rounds:
//
// - router.fleet() over router.pool, concurrency 20 (the pool starts at
//   most its default maxConnecting, 10, at once);
// - the same over a pool with maxConnecting 20, so the fleet's own bound
//   is the only one;
// - Promise.all: router.local() x 100 at once, then one call each.
//
// Each round runs in a fresh master process (this file with `--round`), so
// one contender's heap never inflates another's RSS: it reports its wall
// time (first start to last answer), its peak RSS sampled every 20 ms from
// process.memoryUsage.rss(), and the kernel's high-water mark (VmHWM) as a
// cross-check, then shuts every context down and exits. Medians over the
// rounds (FLEET_ROUNDS, default 5, after one warm-up round of each).
//
// The `memory` part: the heap a finished fleet keeps per target, over
// 20000 targets that are all one held context (so no context is started).
import { execFile } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { ContextPool, type PoolTarget, Router } from 'tendril';
import { DEFAULT_MAX_CONNECTING } from '#dist/internal.js';
import { commandLine } from './cli.js';
import { type Contender, median, mib, partArgument, progress, runParts, runRounds, type Table } from './flow-shared.js';

const CONTEXTS = 100;
const CONCURRENCY = 20;
const SAMPLE_MS = 20;
const ROUNDS = Number(process.env.FLEET_ROUNDS ?? 5);

const WAYS = {
  fleet: `fleet, concurrency ${CONCURRENCY}`,
  'fleet-20': `fleet, + maxConnecting ${CONCURRENCY}`,
  all: `Promise.all`,
} as const;
type Way = keyof typeof WAYS;

/** What one round reports. */
interface Round {
  wallMs: number;
  /** Highest `process.memoryUsage.rss()` sampled during the round. */
  peakRss: number;
  /** The kernel's peak RSS of the process (VmHWM), its whole life. */
  hwm: number;
  /** RSS before the first start. */
  baseRss: number;
}

/** The calls each context answers: its pid, so the round can check 100 distinct processes answered. */
const pid = () => process.pid;

/** One round in this process: start, call, measure, shut down. */
async function round(way: Way): Promise<Round> {
  const router = new Router();
  try {
    const baseRss = process.memoryUsage.rss();
    let peakRss = baseRss;
    const sample = () => {
      peakRss = Math.max(peakRss, process.memoryUsage.rss());
    };
    const sampler = setInterval(sample, SAMPLE_MS);
    const started = performance.now();
    let pids: number[];
    if (way === 'all') {
      const contexts = await Promise.all(
        Array.from({ length: CONTEXTS }, (_, i) => router.local({ name: `bench-${i + 1}` })),
      );
      pids = await Promise.all(contexts.map((context) => context.call(pid)));
    } else {
      const targets: PoolTarget[] = Array.from({ length: CONTEXTS }, (_, i) => ({
        method: 'local',
        name: `bench-${i + 1}`,
      }));
      const pool = way === 'fleet' ? router.pool : new ContextPool(router, { maxConnecting: CONCURRENCY });
      const fleet = router.fleet(targets, (context) => context.call(pid), { concurrency: CONCURRENCY, pool });
      const summary = await fleet.summary();
      if (!summary.ok) throw new Error(`the fleet did not succeed everywhere:\n${summary.format()}`);
      pids = [];
      for await (const outcome of fleet) if (outcome.ok) pids.push(outcome.value);
    }
    const wallMs = performance.now() - started;
    clearInterval(sampler);
    sample();
    if (new Set(pids).size !== CONTEXTS)
      throw new Error(`${new Set(pids).size} distinct pids answered, not ${CONTEXTS}`);
    const hwm = Number(/^VmHWM:\s+(\d+) kB$/m.exec(readFileSync('/proc/self/status', 'utf8'))?.[1]) * 1024;
    return { wallMs, peakRss, hwm, baseRss };
  } finally {
    await router.shutdown();
  }
}

/** Runs one round in a fresh master process. */
function roundInChild(way: Way): Promise<Round> {
  return new Promise((resolve, reject) => {
    execFile(
      process.execPath,
      [fileURLToPath(import.meta.url), '--round', way],
      { timeout: 300_000, maxBuffer: 1024 * 1024 },
      (error, stdout, stderr) => {
        if (error) reject(new Error(`the ${way} round failed: ${error.message}\n${stderr}`));
        else resolve(JSON.parse(stdout.trim().split('\n').pop() as string) as Round);
      },
    );
  });
}

async function benchFleet(table: Table): Promise<void> {
  const results = new Map<Way, Round[]>();
  const contenders: Contender[] = (Object.keys(WAYS) as Way[]).map((way) => {
    results.set(way, []);
    const contender: Contender = {
      label: WAYS[way],
      rates: [],
      // runRounds records what run() resolves with (the wall time); the whole round is kept beside it.
      run: async () => {
        const result = await roundInChild(way);
        results.get(way)?.push(result);
        return result.wallMs;
      },
    };
    return contender;
  });
  await runRounds(contenders, ROUNDS, `fleet (${CONTEXTS} local contexts)`, () => {
    for (const list of results.values()) list.length = 0; // the warm-up rounds are not counted
  });
  const failed = contenders.filter((c) => c.failed);
  if (failed.length > 0) throw new Error(failed.map((c) => `${c.label}: ${c.failed}`).join('\n'));

  const of = (way: Way, pick: (round: Round) => number) => median((results.get(way) ?? []).map(pick));
  const base = { wall: of('all', (r) => r.wallMs), rss: of('all', (r) => r.peakRss), hwm: of('all', (r) => r.hwm) };
  table.heading(
    [
      `${CONTEXTS} local contexts, one call each; medians of ${ROUNDS} rounds, each in a fresh master (RSS before starting: ${mib(of('all', (r) => r.baseRss))})`,
      `  fleet: router.fleet() over router.pool (maxConnecting ${DEFAULT_MAX_CONNECTING}); + maxConnecting ${CONCURRENCY}: over a pool that starts ${CONCURRENCY} at once`,
      `  Promise.all: router.local() x ${CONTEXTS} at once, then a call each`,
    ].join('\n'),
  );
  for (const way of Object.keys(WAYS) as Way[]) {
    const wall = of(way, (r) => r.wallMs);
    const rss = of(way, (r) => r.peakRss);
    const hwm = of(way, (r) => r.hwm);
    const compared =
      way === 'all'
        ? 'the baseline'
        : `${(wall / base.wall).toFixed(2)}x the time, ${(rss / base.rss).toFixed(2)}x the peak RSS of Promise.all`;
    table.add(`${WAYS[way]}: wall time`, `${wall.toFixed(0)} ms`, compared);
    table.add(`${WAYS[way]}: master peak RSS`, mib(rss), `sampled every ${SAMPLE_MS} ms; VmHWM ${mib(hwm)}`);
  }
}

/** Targets of the memory part: all the same held context, so only the fleet's own bookkeeping grows. */
const RETAINED_TARGETS = 20_000;

/** In a process run with --expose-gc: heap bytes a finished fleet keeps per target (entry, outcome, summary line). */
async function retained(): Promise<number> {
  const gc = (globalThis as { gc?: () => void }).gc;
  if (!gc) throw new Error('run with --expose-gc');
  const router = new Router();
  try {
    const held = await router.local({ name: 'held' });
    const targets = Array(RETAINED_TARGETS).fill(held);
    gc();
    const before = process.memoryUsage().heapUsed;
    const fleet = router.fleet(targets, () => 0, { concurrency: 100 });
    const summary = await fleet.summary();
    gc();
    const bytes = (process.memoryUsage().heapUsed - before) / RETAINED_TARGETS;
    if (summary.succeeded.length !== RETAINED_TARGETS) throw new Error(summary.format());
    return bytes;
  } finally {
    await router.shutdown();
  }
}

async function benchRetained(table: Table): Promise<void> {
  const perTarget = await new Promise<number>((resolve, reject) => {
    execFile(
      process.execPath,
      ['--expose-gc', fileURLToPath(import.meta.url), '--retained'],
      { timeout: 300_000 },
      (error, stdout, stderr) => {
        if (error) reject(new Error(`the memory part failed: ${error.message}\n${stderr}`));
        else resolve(Number(stdout.trim().split('\n').pop()));
      },
    );
  });
  table.heading(`what a finished fleet keeps, ${RETAINED_TARGETS} targets (one held context), value 0`);
  table.add('heap retained per target', `${perTarget.toFixed(0)} B`, 'its entry, outcome and summary line, after gc');
}

const PARTS = { fleet: benchFleet, memory: benchRetained };
const { values, positionals } = commandLine({
  script: 'node build/bench/fleet.js',
  description: `Fleets (npm run bench:fleet): ${CONTEXTS} local contexts, one call each, three ways
(router.fleet() over the pool, the same with maxConnecting ${CONCURRENCY}, Promise.all
of router.local()), each round in a fresh master; and the heap a finished fleet keeps
per target. Needs no root.`,
  options: {
    round: {
      type: 'string',
      value: 'WAY',
      description: `internal: run one round as WAY (${Object.keys(WAYS).join(', ')}) and print it as JSON`,
    },
    retained: { type: 'boolean', description: 'internal: measure the memory part in this process (needs --expose-gc)' },
  },
  arguments: [partArgument(PARTS)],
  environment: { FLEET_ROUNDS: 'rounds, after one warm-up round of each way (default 5)' },
});
if (values.retained) {
  console.log(await retained());
} else if (values.round !== undefined) {
  const way = values.round as Way;
  if (!(way in WAYS)) throw new Error(`unknown round ${way}; one of ${Object.keys(WAYS).join(', ')}`);
  console.log(JSON.stringify(await round(way)));
} else {
  progress(`${CONTEXTS} local contexts, ${ROUNDS} rounds of ${Object.keys(WAYS).length} ways`);
  await runParts('fleet', PARTS, positionals);
}
