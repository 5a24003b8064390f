// tendril's side of the in-process measurements, with a warm master (one
// Router that has started each kind of context once).
import { spawn } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { Channel, type Context, Router, type SshOptions } from 'tendril';
import { switchOf } from '../../test/support/internals.js';
import { MIB, rssOf, streamRate } from '../flow-shared.js';
import { ROOT } from './processes.js';

/** Sizes of the call round trips, in bytes (0: no argument). */
export const SIZES = [0, 1024, 64 * 1024, MIB] as const;

/** Calls of each size: fewer of the large ones. */
export function callsOf(size: number, calls: number): number {
  return Math.max(5, Math.floor(calls / (size >= MIB ? 50 : size >= 64 * 1024 ? 10 : 1)));
}

/**
 * Round trips of each size made before any is timed, by tendril, Mitogen
 * and the echo alike: V8 optimizes a function once it has run some
 * thousands of times, and tendril's calls cost both sides three to five
 * times more until then (see `coldCalls`). Fewer of the large ones, whose
 * cost is copying, not JavaScript.
 */
export function warmCallsOf(size: number): number {
  return size >= MIB ? 200 : size >= 64 * 1024 ? 3000 : 5000;
}

/** Samples of a run of empty calls: each call's wall time, and each side's CPU per call. */
export interface CallSamples {
  /** Wall time of each call, in ms. */
  samples: number[];
  /** The master's user + system time per call, in µs. */
  master: number;
  /** The context's, in µs. */
  child: number;
}

/**
 * `count` empty calls (`echo(null)`, as Mitogen's driver makes them) to
 * `context`, one after another: each one timed, and each side's CPU over
 * all of them.
 */
export async function emptyCalls(context: Context, count: number): Promise<CallSamples> {
  // Runs here and, shipped, in the child.
  const cpu = () => {
    const usage = process.cpuUsage();
    return usage.user + usage.system;
  };
  const child0 = await context.call(cpu);
  const master0 = cpu();
  const samples: number[] = [];
  for (let i = 0; i < count; i++) {
    const started = performance.now();
    await context.call(echo, null);
    samples.push(performance.now() - started);
  }
  const master = cpu() - master0;
  const child = (await context.call(cpu)) - child0;
  return { samples, master: master / count, child: child / count };
}

/**
 * A new local context's first `count` empty calls, in this (warm) master:
 * what a context that makes a few hundred calls pays, before V8 has
 * optimized the core's code in it. Mitogen's driver does the same (op `cold`).
 */
export async function coldCalls(router: Router, count: number): Promise<CallSamples> {
  const context = await router.local({ name: 'cold' });
  try {
    return await emptyCalls(context, count);
  } finally {
    await context.shutdown();
  }
}

/** How each kind of context starts. */
export type Kind = 'local' | 'ssh' | 'sshsudo';

export interface Targets {
  login: SshOptions;
  sudoTo: string;
}

/** Starts a context of `kind`; `held` collects what to shut down after. */
export async function start(router: Router, kind: Kind, targets: Targets, held: Context[]): Promise<Context> {
  if (kind === 'local') return keep(held, await router.local());
  const ssh = keep(held, await router.ssh(targets.login));
  return kind === 'ssh' ? ssh : keep(held, await router.sudo({ via: ssh, username: targets.sudoTo }));
}

function keep(held: Context[], context: Context): Context {
  held.push(context);
  return context;
}

/** Time to a ready context that has answered one call, in ms. */
export async function readyOnce(router: Router, kind: Kind, targets: Targets): Promise<number> {
  const held: Context[] = [];
  const started = performance.now();
  const context = await start(router, kind, targets, held);
  await context.call(() => process.pid);
  const took = performance.now() - started;
  await Promise.all(held.reverse().map((c) => c.shutdown()));
  return took;
}

const echo = (value: unknown) => value;

/** Round trips of `echo` with a `size`-byte argument, in ms each. */
export async function roundTrips(context: Context, size: number, count: number): Promise<number[]> {
  const value = size === 0 ? null : Buffer.alloc(size, 7);
  const samples: number[] = [];
  for (let i = 0; i < count; i++) {
    const started = performance.now();
    await context.call(echo, value);
    samples.push(performance.now() - started);
  }
  return samples;
}

/**
 * The floor for a call: two Node processes and a pipe each way, the other
 * echoing length-prefixed messages back (echo-child.ts).
 */
export class EchoFloor {
  private readonly child = spawn(process.execPath, [join(ROOT, 'build', 'bench', 'compare', 'echo-child.js')], {
    stdio: ['pipe', 'pipe', 'inherit'],
  });
  private wanted = 0;
  private got = 0;
  private done = () => {};

  constructor() {
    this.child.stdout.on('data', (chunk: Buffer) => {
      this.got += chunk.length;
      if (this.got >= this.wanted) this.done();
    });
  }

  /** Round trips of a `size`-byte message, in ms each. */
  async trips(size: number, count: number): Promise<number[]> {
    const message = Buffer.alloc(4 + Math.max(size, 1), 7);
    message.writeUInt32BE(message.length - 4, 0);
    const samples: number[] = [];
    for (let i = 0; i < count; i++) {
      const started = performance.now();
      await new Promise<void>((resolve) => {
        this.got = 0;
        this.wanted = message.length;
        this.done = resolve;
        this.child.stdin.write(message);
      });
      samples.push(performance.now() - started);
    }
    return samples;
  }

  close(): void {
    this.child.kill();
  }
}

/** 100 (or `count`) trivial commands, one after the other: the wall time in ms. */
export async function commands(context: Context, count: number): Promise<number> {
  const started = performance.now();
  for (let i = 0; i < count; i++) await context.exec('true');
  return performance.now() - started;
}

/** Samples of `isolatedCalls`, in ms each. */
export interface IsolationSamples {
  /** An empty call. */
  normal: number[];
  /** An empty isolated call, its spare started beforehand. */
  warm: number[];
  /** Empty isolated calls one after another: each waits for its interpreter to start. */
  backToBack: number[];
  /** `node -e 0` run by the context on its own host, timed there. */
  nodeE0: number[];
}

/**
 * An empty isolated call beside an empty call and `node -e 0`, all on
 * `context`'s host, alternating: the isolated call with its spare started
 * (300 ms after the previous one), and back to back.
 */
export async function isolatedCalls(context: Context, count: number): Promise<IsolationSamples> {
  const samples: IsolationSamples = { normal: [], warm: [], backToBack: [], nodeE0: [] };
  const time = async (fn: () => Promise<unknown>) => {
    const started = performance.now();
    await fn();
    return performance.now() - started;
  };
  // The first isolated call starts the first spare.
  await context.callWith({ isolate: true }, () => null);
  for (let i = 0; i < count; i++) {
    samples.normal.push(await time(() => context.call(() => null)));
    await new Promise((resolve) => setTimeout(resolve, 300));
    samples.warm.push(await time(() => context.callWith({ isolate: true }, () => null)));
    samples.backToBack.push(await time(() => context.callWith({ isolate: true }, () => null)));
    samples.nodeE0.push(
      await context.call(() => {
        const started = process.hrtime();
        (require('node:child_process') as typeof import('node:child_process')).execFileSync(process.execPath, [
          '-e',
          '0',
        ]);
        const [s, ns] = process.hrtime(started);
        return s * 1000 + ns / 1e6;
      }),
    );
  }
  return samples;
}

/** CPU time of master and child per 10,000 empty calls, in ms. */
export async function cpuPer10k(context: Context, count: number): Promise<{ master: number; child: number }> {
  const { master, child } = await emptyCalls(context, count);
  // µs per call to ms per 10,000 calls.
  return { master: master * 10, child: child * 10 };
}

/** RSS of an idle local child, in bytes. */
export async function idleChildRss(router: Router): Promise<number> {
  const idle = await router.local({ name: 'idle' });
  await new Promise((resolve) => setTimeout(resolve, 500));
  const rss = rssOf(idle.info.pid);
  await idle.shutdown();
  return rss;
}

/** Bytes: the first stage, the wire to a ready context, a via hop, a first call importing a package graph. */
export async function bytes(): Promise<Record<string, number>> {
  const sizes = JSON.parse(readFileSync(join(ROOT, 'dist', 'bootstrap', 'sizes.json'), 'utf8'));
  const router = new Router({ base: join(ROOT, 'bench') });
  try {
    const child = await router.local({ name: 'bytes' });
    const stream = switchOf(router).routeOf(child.id);
    // The stream counts messages; before them went the core's length prefix and the deflated core.
    const ready =
      4 + sizes.coreDeflated + (stream?.stats.bytesIn ?? Number.NaN) + (stream?.stats.bytesOut ?? Number.NaN);
    await router.local({ name: 'bytes-leaf', via: child });
    const hop = router.moduleStats().byContext[child.id]?.bytesSent ?? Number.NaN;
    const before = router.moduleStats().bytesSent;
    // A real package graph on a target that lacks it: chalk 4 and its five dependencies.
    await child.call(() => (require('chalk') as { red(text: string): string }).red('x'));
    const graph = router.moduleStats().bytesSent - before;
    return { firstStage: sizes.firstStage, ready, hop, graph };
  } finally {
    await router.shutdown();
  }
}

/** Sender streams, MB/s: 1 MiB values from the context to the master, and from the master to the context. */
export async function senderRates(
  router: Router,
  context: Context,
  count: number,
): Promise<{ up: number; down: number }> {
  const up = await streamRate(router, context, count);
  const channel = new Channel<Buffer, number>(router);
  const value = Buffer.alloc(MIB, 7);
  const started = performance.now();
  const done = context.call(async (peer: Channel<number, Buffer>) => {
    let total = 0;
    for await (const chunk of peer) total += chunk.length;
    return total;
  }, channel.otherEnd());
  for (let i = 0; i < count; i++) await channel.send(value);
  channel.close();
  const received = await done;
  const down = received / 1e6 / ((performance.now() - started) / 1000);
  return { up, down };
}
