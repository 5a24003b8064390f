// `npm run bench:containers`: the container methods beside their floors
// and Mitogen's same methods (Debian's python3-mitogen), every figure
// measured in this run, tendril, Mitogen and the floors alternating so
// drift hits all alike (issue 22). On a private Podman store of the
// bench's own (PodmanBed, test/support/containers.ts), removed at the end
// with every container in it, also when the bench fails:
//
// - time to a context that answered one call: podman exec, buildah run,
//   sudo → podman (both started), podman via a held sudo context, and
//   podman run --rm of an image; beside the floor, the tool's own start of
//   `node -e 0` (start to exit, as the issue defines it) and the same
//   command to Node's first byte on stdout (the engine's exec without its
//   teardown), and beside Mitogen's method and its floor, `python3 -c 0`;
// - an empty call's round trip, tendril's and Mitogen's;
// - exec('true') x 100 in the container, beside Mitogen's
//   subprocess.check_call(['true']), the tool's own exec of `true`, and
//   Node's own execFile('true') run in the context (what spawning costs
//   the container's Node, under any protocol);
// - where the time goes: the child's age when it answers its first call
//   beside Node's age when it runs its first line (-e) in the same
//   container, a sudo context alone (the first hop of sudo → podman), the
//   bytes sent to a fresh via before it can start podman (tendril's
//   connection and containers bundles), the first stage and the core.
//
// The image: the test image with python3 added (bench/compare/python-image.ts),
// since Mitogen's children are Python. Mitogen's podman and buildah methods
// take a tool path but no global options, so they run a two-line wrapper
// that adds the store's options (an sh exec, about 1 ms); the Mitogen
// floors run that wrapper too.
//
//   node build/bench/containers.js [--smoke] [--json FILE]
import { spawn } from 'node:child_process';
import { chmodSync, readFileSync, writeFileSync } from 'node:fs';
import { cpus } from 'node:os';
import { join } from 'node:path';
import { type Context, Router } from 'tendril';
import { CONTAINER_LIMITS, PodmanBed } from '../test/support/containers.js';
import { commandLine } from './cli.js';
import { ensurePackages, MitogenServer, ROOT, run } from './compare/processes.js';
import { loadPythonImage } from './compare/python-image.js';
import { printTable, type Row, type Summary, summarise } from './compare/results.js';
import { commands, roundTrips } from './compare/tendril.js';
import { median, progress, shellQuote } from './flow-shared.js';

const { values: flags } = commandLine({
  script: 'node build/bench/containers.js',
  description: `The container methods (npm run bench:containers): time to a context, an empty call's
round trip and exec('true') x 100, for podman exec, buildah run, podman through a local
sudo context, and podman run --rm of an image, beside the tool's own exec of node -e 0
and Mitogen's same methods, on a private Podman store. Needs root and python3-mitogen.`,
  options: {
    smoke: { type: 'boolean', description: 'every measurement once, with few iterations (what the suite runs)' },
    json: { type: 'string', value: 'FILE', description: 'also write the results as JSON to FILE' },
  },
});
const SMOKE = flags.smoke === true;
const ROUNDS = SMOKE ? 1 : 10;
const FEW = SMOKE ? 1 : 3;
const CALLS = SMOKE ? 20 : 1000;
const COMMANDS = SMOKE ? 5 : 100;
/** The bar: a container context within this factor of the tool's own exec of `node -e 0`. */
const BAR = 1.2;

/** What Node's first line prints in the container: its age then, in ms. */
const NODE_AGE = 'process.stdout.write(String(process.uptime() * 1000))';

const GROUPS = {
  ready: 'Time to a context that answered one call, in a warm master',
  rtt: 'Empty call round trip',
  commands: `exec('true') x ${COMMANDS} in the container`,
  where: 'Where the time goes',
};

ensurePackages({ 'python3-mitogen': '/usr/lib/python3/dist-packages/mitogen/__init__.py' });
// Node reads NODE_EXTRA_CA_CERTS when it starts (tens of ms here); the
// local sudo context would pay it, the containers never see it.
delete process.env.NODE_EXTRA_CA_CERTS;

/** A way into the container: how tendril starts it, Mitogen's kind for it, and its floors. */
interface Way {
  label: string;
  /** Starts the context (and any via), pushing each onto `held`, the one to call last. */
  start: (router: Router, held: Context[]) => Promise<Context>;
  /** Floors besides the tool's own `node -e 0`: label → argv, timed from start to exit. */
  moreFloors?: Record<string, string[]>;
  /** The kind bench/peers/mitogen_bench.py serves, when Mitogen has this method. */
  mitogen?: string;
  /** The tool's own start of a program in the container: argv before the program. */
  tool: string[];
  /** The same for Mitogen (through its store wrapper). */
  mitogenTool?: string[];
  /** The tool's own run of `true`, for the commands row; shared between ways that run the same. */
  commandsFloor?: string;
}

const rows: Row[] = [];
const bed = PodmanBed.start();
const router = new Router();
let server: MitogenServer | undefined;
try {
  progress('loading the image with python3 (built and cached in .cache/images on first use)');
  const image = loadPythonImage(bed);
  const container = 'bench';
  const work = 'bench-work';
  bed.podman(['run', '--detach', '--name', container, ...CONTAINER_LIMITS, image, 'sleep', 'infinity']);
  bed.podman(['run', '--rm', ...CONTAINER_LIMITS, image, 'true']); // the image's layers, read once before timing
  await run('buildah', [...bed.buildahArgs, 'from', '--quiet', '--name', work, image]);

  // Mitogen's podman_path and buildah_path are one program each: these add the store's options.
  const podman = wrapper('podman', bed.args);
  const buildah = wrapper('buildah', bed.buildahArgs);
  const env = {
    ...process.env,
    BENCH_CONTAINERS: JSON.stringify({ podman, buildah, container, work }),
    ...(SMOKE && { BENCH_SMOKE: '1' }),
  };
  server = new MitogenServer(env);

  const podmanExec = ['podman', ...bed.args, 'exec', '--interactive', container];
  const sudoPodmanExec = ['sudo', ...podmanExec];
  let heldSudo: Context | undefined;
  const ways: Way[] = [
    {
      label: 'podman exec',
      start: async (r, held) => keep(held, await r.podman({ container, podmanArgs: bed.args })),
      mitogen: 'podman',
      tool: podmanExec,
      mitogenTool: [podman, 'exec', '--interactive', container],
      commandsFloor: 'podman exec C true',
    },
    {
      label: 'buildah run',
      start: async (r, held) => keep(held, await r.buildah({ container: work, buildahArgs: bed.buildahArgs })),
      mitogen: 'buildah',
      tool: ['buildah', ...bed.buildahArgs, 'run', work],
      mitogenTool: [buildah, 'run', work],
      commandsFloor: 'buildah run C true',
    },
    {
      label: 'sudo → podman exec, both started',
      start: async (r, held) => {
        const sudo = keep(held, await r.sudo());
        return keep(held, await r.podman({ container, podmanArgs: bed.args, via: sudo }));
      },
      mitogen: 'sudo-podman',
      tool: sudoPodmanExec,
      moreFloors: {
        // The processes the chain needs at least: a Node under sudo, which runs podman exec.
        'floor: sudo node, running podman exec C node -e 0': [
          'sudo',
          process.execPath,
          '-e',
          `require('child_process').execFileSync(${JSON.stringify(podmanExec[0])}, ${JSON.stringify([...podmanExec.slice(1), 'node', '-e', '0'])})`,
        ],
      },
      mitogenTool: ['sudo', podman, 'exec', '--interactive', container],
      commandsFloor: 'podman exec C true',
    },
    {
      label: 'podman exec via a held sudo context',
      start: async (r, held) => {
        heldSudo ??= await r.sudo({ name: 'held-sudo' });
        return keep(held, await r.podman({ container, podmanArgs: bed.args, via: heldSudo }));
      },
      mitogen: 'held-sudo-podman',
      tool: podmanExec,
      mitogenTool: [podman, 'exec', '--interactive', container],
      commandsFloor: 'podman exec C true',
    },
    {
      label: 'podman run --rm IMAGE',
      start: async (r, held) => keep(held, await r.podman({ image, runArgs: CONTAINER_LIMITS, podmanArgs: bed.args })),
      tool: ['podman', ...bed.args, 'run', '--interactive', '--rm', ...CONTAINER_LIMITS, image],
    },
  ];

  await timeToContext(ways, server);
  await sudoAlone();
  await callsAndCommands(
    ways.filter((way) => way.commandsFloor !== undefined),
    server,
    {
      'podman exec C true': [...podmanExec, 'true'],
      'buildah run C true': ['buildah', ...bed.buildahArgs, 'run', work, 'true'],
    },
  );
} finally {
  try {
    // Mitogen's driver may have died already (its error is what the bench reports): no wait for an exit that came.
    await Promise.race([server?.close(), new Promise((resolve) => setTimeout(resolve, 5000).unref())]);
    await router.shutdown();
  } finally {
    bed.stop();
  }
}

const order: string[] = Object.values(GROUPS);
const summaries = rows.sort((a, b) => order.indexOf(a.group) - order.indexOf(b.group)).map(summarise);
console.log(`\ntendril containers ${SMOKE ? 'smoke run' : 'benchmark'}: ${machine()}`);
printTable(summaries);
printBar(summaries);
if (flags.json) {
  // The store is named so the suite can check it is gone.
  writeFileSync(flags.json, `${JSON.stringify({ machine: machine(), store: bed.dir, summaries }, null, 2)}\n`);
}

function keep(held: Context[], context: Context): Context {
  held.push(context);
  return context;
}

/** An executable in the bed's directory that runs `tool` with `args` first; returns its path. */
function wrapper(tool: string, args: string[]): string {
  const path = join(bed.dir, `bench-${tool}`);
  writeFileSync(path, `#!/bin/sh\nexec ${[tool, ...args].map(shellQuote).join(' ')} "$@"\n`);
  chmodSync(path, 0o755);
  return path;
}

/** Appends `value` to the samples under `key`. */
function collect(samples: Record<string, number[]>, key: string, value: number): void {
  samples[key] ??= [];
  samples[key].push(value);
}

/**
 * Time to a context that answered one call, in ms, and the context's age
 * (its process.uptime()) when it answered, in ms; then shuts it (and what
 * it was started through) down. `viaBytes`: what the master sent the first
 * of them in module responses, when it was a via.
 */
async function readyOnce(way: Way): Promise<{ ms: number; age: number; viaBytes?: number }> {
  const held: Context[] = [];
  const started = performance.now();
  const context = await way.start(router, held);
  const age = await context.call(() => process.uptime() * 1000);
  const ms = performance.now() - started;
  const via = held.length > 1 ? held[0] : undefined;
  const viaBytes = via && router.moduleStats().byContext[via.id]?.bytesSent;
  for (const c of held.reverse()) await c.shutdown();
  return { ms, age, ...(viaBytes !== undefined && { viaBytes }) };
}

/**
 * A program's wall time, in ms, from its start to the first byte it writes
 * on stdout, and all it wrote; waits for its exit.
 */
function toFirstByte(argv: string[]): Promise<{ ms: number; stdout: string }> {
  return new Promise((resolve, reject) => {
    const started = performance.now();
    let first: number | undefined;
    let stdout = '';
    const child = spawn(argv[0] as string, argv.slice(1), { stdio: ['ignore', 'pipe', 'pipe'] });
    let stderr = '';
    child.stdout.on('data', (chunk: Buffer) => {
      first ??= performance.now() - started;
      stdout += chunk;
    });
    child.stderr.on('data', (chunk: Buffer) => {
      stderr += chunk;
    });
    child.on('error', reject);
    child.on('close', (code) => {
      if (code === 0 && first !== undefined) resolve({ ms: first, stdout });
      else reject(new Error(`${argv.join(' ')} exited with ${code} (output: ${first !== undefined}): ${stderr}`));
    });
  });
}

/** Each way started ROUNDS times by tendril, by Mitogen and as its floors, alternating (round -1 warms all up). */
async function timeToContext(ways: Way[], mitogen: MitogenServer): Promise<void> {
  const samples: Record<string, number[]> = {};
  for (let round = -1; round < ROUNDS; round++) {
    progress(`time to a context: round ${round + 1}/${ROUNDS}${round < 0 ? ' (warm-up)' : ''}`);
    for (const way of ways) {
      const mine = await readyOnce(way);
      const first = await toFirstByte([...way.tool, 'node', '-e', NODE_AGE]);
      const measured: [string, number][] = [
        ['tendril', mine.ms],
        ['age', mine.age],
        ['node', (await run(way.tool[0] as string, [...way.tool.slice(1), 'node', '-e', '0'])).ms],
        ['first-byte', first.ms],
        ['node-age', Number(first.stdout)],
      ];
      if (mine.viaBytes !== undefined) measured.push(['via-bytes', mine.viaBytes]);
      for (const [label, argv] of Object.entries(way.moreFloors ?? {})) {
        measured.push([label, (await run(argv[0] as string, argv.slice(1))).ms]);
      }
      if (way.mitogen) measured.push(['mitogen', await mitogen.request<number>({ op: 'ready', kind: way.mitogen })]);
      if (way.mitogenTool) {
        const [tool, ...args] = way.mitogenTool;
        measured.push(['python', (await run(tool as string, [...args, 'python3', '-c', '0'])).ms]);
      }
      if (round < 0) continue;
      for (const [key, ms] of measured) collect(samples, `${way.label}/${key}`, ms);
    }
  }
  for (const way of ways) {
    const of = (key: string) => median(samples[`${way.label}/${key}`] ?? []);
    const peers: Record<string, number> = {
      'floor: node -e 0': of('node'),
      "floor: to node's first byte": of('first-byte'),
    };
    for (const label of Object.keys(way.moreFloors ?? {})) peers[label] = of(label);
    if (way.mitogen) peers.Mitogen = of('mitogen');
    if (way.mitogenTool) peers["Mitogen's floor: python3 -c 0"] = of('python');
    rows.push({
      group: GROUPS.ready,
      metric: way.label,
      unit: 'ms',
      tendril: samples[`${way.label}/tendril`] ?? [],
      peers,
    });
    rows.push({
      group: GROUPS.where,
      metric: `${way.label}: the child's age at its first answer`,
      unit: 'ms',
      tendril: samples[`${way.label}/age`] ?? [],
      peers: { "Node's age at its first line (-e)": of('node-age') },
    });
    if (samples[`${way.label}/via-bytes`]) {
      rows.push({
        group: GROUPS.where,
        metric: `${way.label}: module bytes sent to the fresh via`,
        unit: 'bytes',
        tendril: samples[`${way.label}/via-bytes`] ?? [],
        peers: {},
      });
    }
  }
  const sizes = JSON.parse(readFileSync(join(ROOT, 'dist', 'bootstrap', 'sizes.json'), 'utf8'));
  rows.push({
    group: GROUPS.where,
    metric: 'first stage (command line)',
    unit: 'bytes',
    tendril: [sizes.firstStage],
    peers: {},
  });
  rows.push({ group: GROUPS.where, metric: 'core, deflated', unit: 'bytes', tendril: [sizes.coreDeflated], peers: {} });
}

/** The first hop of sudo → podman alone: a local sudo context, beside `sudo node -e 0`. */
async function sudoAlone(): Promise<void> {
  const mine: number[] = [];
  const floor: number[] = [];
  for (let round = -1; round < ROUNDS; round++) {
    const started = performance.now();
    const sudo = await router.sudo();
    await sudo.call(() => process.pid);
    const ms = performance.now() - started;
    await sudo.shutdown();
    const theirs = (await run('sudo', [process.execPath, '-e', '0'])).ms;
    if (round < 0) continue;
    mine.push(ms);
    floor.push(theirs);
  }
  rows.push({
    group: GROUPS.where,
    metric: 'a local sudo context alone (the first hop)',
    unit: 'ms',
    tendril: mine,
    peers: { 'floor: sudo node -e 0': median(floor) },
  });
}

/** Round trips and commands in one held context per way, tendril and Mitogen alternating. */
async function callsAndCommands(
  ways: Way[],
  mitogen: MitogenServer,
  commandFloors: Record<string, string[]>,
): Promise<void> {
  const held: Context[] = [];
  const contexts = new Map<Way, Context>();
  for (const way of ways) contexts.set(way, await way.start(router, held));
  const chunks = SMOKE ? 1 : 5;
  const count = Math.max(1, Math.floor(CALLS / chunks));
  for (const way of ways) {
    progress(`round trips: ${way.label}`);
    const context = contexts.get(way) as Context;
    const mine: number[] = [];
    const theirs: number[] = [];
    for (let chunk = -1; chunk < chunks; chunk++) {
      const a = await roundTrips(context, 0, count);
      const b = await mitogen.request<number[]>({ op: 'rtt', kind: way.mitogen, size: 0, count });
      // Chunk -1 warms both up.
      if (chunk < 0) continue;
      mine.push(...a);
      theirs.push(...b);
    }
    rows.push({ group: GROUPS.rtt, metric: way.label, unit: 'ms', tendril: mine, peers: { Mitogen: median(theirs) } });
  }

  const samples: Record<string, number[]> = {};
  for (let round = -1; round < FEW; round++) {
    progress(`exec('true') x ${COMMANDS}: round ${round + 1}/${FEW}${round < 0 ? ' (warm-up)' : ''}`);
    for (const way of ways) {
      const context = contexts.get(way) as Context;
      const mine = await commands(context, COMMANDS);
      const theirs = await mitogen.request<number>({ op: 'commands', kind: way.mitogen, count: COMMANDS });
      const node = await context.call(nodeExecFile, COMMANDS);
      if (round < 0) continue;
      collect(samples, `${way.label}/tendril`, mine);
      collect(samples, `${way.label}/mitogen`, theirs);
      collect(samples, `${way.label}/node`, node);
    }
    for (const [name, argv] of Object.entries(commandFloors)) {
      const started = performance.now();
      for (let i = 0; i < COMMANDS; i++) await run(argv[0] as string, argv.slice(1));
      if (round >= 0) collect(samples, name, performance.now() - started);
    }
  }
  for (const way of ways) {
    const floor = way.commandsFloor as string;
    rows.push({
      group: GROUPS.commands,
      metric: way.label,
      unit: 'ms',
      tendril: samples[`${way.label}/tendril`] ?? [],
      peers: {
        Mitogen: median(samples[`${way.label}/mitogen`] ?? []),
        [`Node's execFile('true') x ${COMMANDS}, in the context`]: median(samples[`${way.label}/node`] ?? []),
        [`${floor} x ${COMMANDS}`]: median(samples[floor] ?? []),
      },
    });
  }
}

/** Runs in the context: `count` sequential execFile('true') of Node's own, the wall time in ms. */
async function nodeExecFile(count: number): Promise<number> {
  const { execFile } = require('node:child_process') as typeof import('node:child_process');
  const started = performance.now();
  for (let i = 0; i < count; i++) {
    await new Promise<void>((resolve, reject) => execFile('true', (error) => (error ? reject(error) : resolve())));
  }
  return performance.now() - started;
}

/** The bar for each way: tendril's time to a context within BAR x the tool's own `node -e 0`. */
function printBar(summaries: Summary[]): void {
  const find = (group: string, metric: string) => summaries.find((s) => s.group === group && s.metric === metric);
  const times = (n: number | undefined, of: number | undefined) => ((n ?? Number.NaN) / (of ?? Number.NaN)).toFixed(2);
  console.log(`\nThe bar: a container context within ${BAR}x of the tool's own exec of node -e 0 (start to exit).`);
  for (const s of summaries.filter((summary) => summary.group === GROUPS.ready)) {
    const factor = s.median / (s.peers['floor: node -e 0']?.median ?? Number.NaN);
    const notes = [`${times(s.median, s.peers["floor: to node's first byte"]?.median)}x to node's first byte`];
    for (const [name, peer] of Object.entries(s.peers)) {
      if (name.startsWith('floor: sudo node')) notes.push(`${times(s.median, peer.median)}x ${name.slice(7)}`);
    }
    if (s.peers.Mitogen) {
      notes.push(
        `Mitogen ${times(s.peers.Mitogen.median, s.peers["Mitogen's floor: python3 -c 0"]?.median)}x its floor`,
      );
    }
    const age = find(GROUPS.where, `${s.metric}: the child's age at its first answer`);
    if (age) {
      const node = age.peers["Node's age at its first line (-e)"]?.median ?? Number.NaN;
      notes.push(`the child answers at ${age.median.toFixed(0)} ms of its life, Node runs -e at ${node.toFixed(0)} ms`);
    }
    console.log(
      `  ${s.metric}: ${factor.toFixed(2)}x the floor, ${factor <= BAR ? 'met' : 'NOT met'} (${notes.join('; ')})`,
    );
  }
  const chain = find(GROUPS.ready, 'sudo → podman exec, both started');
  const sudo = find(GROUPS.where, 'a local sudo context alone (the first hop)');
  const held = find(GROUPS.ready, 'podman exec via a held sudo context');
  if (chain && sudo && held) {
    console.log(
      `  sudo → podman: ${chain.median.toFixed(0)} ms = a sudo context ${sudo.median.toFixed(0)} ms + podman via it ${held.median.toFixed(0)} ms + ${(chain.median - sudo.median - held.median).toFixed(0)} ms (loading the bundles into the new via, and noise)`,
    );
  }
}

function machine(): string {
  return `${cpus().length} × ${cpus()[0]?.model ?? 'unknown CPU'}, ${new Date().toISOString().slice(0, 10)}`;
}
