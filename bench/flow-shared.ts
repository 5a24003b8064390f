// What the flow-control and file-transfer benchmarks (bench/flow.ts,
// bench/files.ts) share: the producer shipped to contexts, RSS readers,
// timing helpers, the result table and the runner of named parts.
import { execFile } from 'node:child_process';
import { readFileSync } from 'node:fs';
import type { Context, Receiver, Router, Sender } from 'tendril';
import type { BenchArgument } from './cli.js';
import { row } from './report.js';

export const MIB = 1024 * 1024;

/**
 * Shipped to a context: sends `count` random values of `size` bytes to
 * `out`, for at most `forMs` milliseconds, as fast as `send()` lets it, then
 * closes `out`. Returns how many it sent.
 *
 * The same source runs against both APIs. Where `send()` returns a promise
 * (the credit window) it is awaited and is the only pacing. Where it returns
 * nothing (the code before issue 9), awaiting it would never leave the
 * microtask queue: the stream would never be written and the producer would
 * grow until it died. So there the loop yields to the event loop once per
 * value (`setImmediate`), which is the fastest a producer can go and still
 * let its stream write.
 */
export async function produce(out: Sender<Buffer>, count: number, forMs: number, size: number): Promise<number> {
  const value: Buffer = require('node:crypto').randomBytes(size);
  const until = Date.now() + forMs;
  let sent = 0;
  while (sent < count && Date.now() < until) {
    const pending = out.send(value) as unknown as PromiseLike<void> | undefined;
    if (pending && typeof pending.then === 'function') await pending;
    else await new Promise<void>((resolve) => setImmediate(resolve));
    sent++;
  }
  out.close();
  return sent;
}

/** Resident set size of a process on this host, in bytes (from /proc); NaN once it is gone. */
export function rssOf(pid: number): number {
  try {
    const match = /^VmRSS:\s+(\d+) kB$/m.exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
    return match ? Number(match[1]) * 1024 : Number.NaN;
  } catch {
    return Number.NaN;
  }
}

export const sleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));

/** Median of a list (the upper one of an even count); NaN for none. */
export function median(values: number[]): number {
  if (values.length === 0) return Number.NaN;
  return [...values].sort((a, b) => a - b)[values.length >> 1] as number;
}

/** The `q` quantile of a list (nearest rank); NaN for none. */
export function quantile(values: number[], q: number): number {
  if (values.length === 0) return Number.NaN;
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))] as number;
}

export const mean = (values: number[]): number => values.reduce((sum, x) => sum + x, 0) / values.length;

export const mib = (bytes: number): string => `${(bytes / MIB).toFixed(0)} MiB`;
export const mbps = (rate: number): string => `${rate.toFixed(0)} MB/s`;
export const percent = (ratio: number): string => `${(ratio * 100).toFixed(0)}%`;
export const micros = (ms: number): string => `${(ms * 1000).toFixed(1)} µs`;

/** Progress on stderr, so stdout carries only the table. */
export function progress(text: string): void {
  process.stderr.write(`[bench ${new Date().toISOString().slice(11, 19)}] ${text}\n`);
}

/** Runs a shell command line and resolves with its wall time in milliseconds; rejects when it fails. */
export function timeShell(command: string): Promise<number> {
  return new Promise((resolve, reject) => {
    const started = performance.now();
    execFile('sh', ['-c', command], { maxBuffer: 16 * MIB }, (error, _stdout, stderr) => {
      if (error) reject(new Error(`${command} failed: ${stderr || error.message}`));
      else resolve(performance.now() - started);
    });
  });
}

/** `text` quoted for sh. */
export const shellQuote = (text: string): string => `'${text.replaceAll("'", `'\\''`)}'`;

/** How long a stream may go without a value before it counts as stalled. */
const STALL_MS = 30_000;

/** `promise`, or a rejection naming `what` once `ms` pass: nothing here waits forever. */
export function within<T>(promise: Promise<T>, ms: number, what: string): Promise<T> {
  let timer: ReturnType<typeof setTimeout> | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`${what}: no answer in ${ms / 1000} s`)), ms);
  });
  return Promise.race([promise, timeout]).finally(() => clearTimeout(timer));
}

/**
 * Reads `receiver` to its end as fast as the master can; calls `onValue`
 * with each value's size. Rejects when the stream breaks, and when no value
 * comes for STALL_MS (then the receiver is closed).
 */
export async function drain(receiver: Receiver<Buffer>, onValue: (bytes: number) => void): Promise<void> {
  let stalled = false;
  let timer: ReturnType<typeof setTimeout> | undefined;
  const arm = () => {
    clearTimeout(timer);
    timer = setTimeout(() => {
      stalled = true;
      receiver.close();
    }, STALL_MS);
  };
  arm();
  try {
    for await (const value of receiver) {
      arm();
      onValue(value.length);
    }
  } finally {
    clearTimeout(timer);
  }
  if (stalled) throw new Error(`no value came for ${STALL_MS / 1000} s`);
}

/**
 * Streams `count` values of 1 MiB from `context` to a new receiver in the
 * master, read as fast as the master can, and resolves with MB/s (10^6
 * bytes per second), from the call to the last value.
 */
export async function streamRate(router: Router, context: Context, count: number): Promise<number> {
  const receiver = router.receiver<Buffer>({ contextId: context.id });
  const started = performance.now();
  const call = context.call(produce, receiver.toSender(), count, 600_000, MIB);
  // Seen by drain() as a broken stream; the reason is the call's.
  call.catch(() => {});
  let bytes = 0;
  let values = 0;
  try {
    await drain(receiver, (size) => {
      bytes += size;
      values++;
    });
  } catch (error) {
    throw new Error(`stream from ${context.name} broke after ${values} values: ${(error as Error).message}`);
  }
  const seconds = (performance.now() - started) / 1000;
  await within(call, STALL_MS, `the producer call in ${context.name}`);
  if (values !== count) throw new Error(`stream from ${context.name} ended after ${values} of ${count} values`);
  return bytes / 1e6 / seconds;
}

const cleanups = new Set<() => unknown>();

/**
 * Registers `cleanup` to run when the bench is interrupted (SIGINT,
 * SIGTERM), so no sshd or context outlives it; returns its removal.
 */
export function atAbort(cleanup: () => unknown): () => void {
  cleanups.add(cleanup);
  return () => cleanups.delete(cleanup);
}

/** Runs every registered cleanup; for the signal handlers in flow.ts. */
export async function abort(): Promise<void> {
  for (const cleanup of [...cleanups].reverse()) {
    try {
      await within(Promise.resolve(cleanup()), 10_000, 'cleanup');
    } catch {
      // Interrupted anyway: carry on with the others.
    }
  }
}

/** The result table, printed once at the end. */
export class Table {
  private readonly lines: ({ heading: string } | { label: string; value: string; note: string })[] = [];

  heading(text: string): void {
    this.lines.push({ heading: text });
  }

  add(label: string, value: string, note = ''): void {
    this.lines.push({ label, value, note });
  }

  print(): void {
    for (const line of this.lines) {
      if ('heading' in line) console.log(`\n${line.heading}`);
      else row(line.label, line.value, line.note);
    }
  }
}

/** The command-line argument naming parts of a bench to run (see runParts). */
export function partArgument(parts: Record<string, unknown>): BenchArgument {
  return {
    name: 'part',
    description: 'a part to run (default: every part)',
    choices: Object.keys(parts),
    repeated: true,
  };
}

/**
 * Runs the parts named in `picked` (see partArgument) (all when none is), each adding
 * to one table printed at the end; a part that throws is reported in the
 * table and makes the exit code 1. SIGINT and SIGTERM run the `atAbort`
 * cleanups, so no sshd or context outlives an interrupted run.
 */
export async function runParts(
  title: string,
  parts: Record<string, (table: Table) => Promise<void>>,
  picked: string[],
): Promise<void> {
  for (const signal of ['SIGINT', 'SIGTERM'] as const) {
    process.once(signal, () => {
      console.error(`${title} bench: ${signal}: shutting down contexts and the test bed`);
      void abort().finally(() => process.exit(130));
    });
  }
  const table = new Table();
  let failed = false;
  for (const [name, part] of Object.entries(parts)) {
    if (picked.length > 0 && !picked.includes(name)) continue;
    try {
      await part(table);
    } catch (error) {
      failed = true;
      table.heading(`${name}: FAILED`);
      table.add(name, 'failed', (error as Error).stack ?? String(error));
    }
  }
  console.log(`tendril ${title} bench on node ${process.version}, ${new Date().toISOString()}`);
  table.print();
  if (failed) process.exitCode = 1;
}

/** One thing a bench times in rounds: `run` does it once and resolves with its rate. */
export interface Contender {
  label: string;
  /** One run: MB/s (10^6 bytes per second). */
  run: () => Promise<number>;
  rates: number[];
  /** Why it stopped being run, once a run failed. */
  failed?: string;
}

/**
 * Runs every contender once to warm up, calls `afterWarmUp`, then runs them
 * in `rounds` rounds, each starting one further along so none always runs
 * first (drift on the machine hits all alike). A contender whose run fails
 * is not run again; its `failed` says why.
 */
export async function runRounds(
  contenders: Contender[],
  rounds: number,
  label: string,
  afterWarmUp: () => void = () => {},
): Promise<void> {
  const attempt = async (contender: Contender, record: boolean) => {
    try {
      const rate = await contender.run();
      if (record) contender.rates.push(rate);
    } catch (error) {
      contender.failed = (error as Error).message;
    }
  };
  progress(`${label}: warming up (${contenders.length} contenders)`);
  for (const contender of contenders) await attempt(contender, false);
  afterWarmUp();
  for (let round = 0; round < rounds; round++) {
    for (let k = 0; k < contenders.length; k++) {
      const contender = contenders[(round + k) % contenders.length] as Contender;
      if (contender.failed) continue;
      progress(`${label} round ${round + 1}/${rounds}: ${contender.label}`);
      await attempt(contender, true);
    }
  }
}
