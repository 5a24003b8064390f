// What the flow-control benchmarks (bench/flow.ts) share: the producer
// shipped to contexts, RSS readers, timing helpers and the result table.
import { execFile } from 'node:child_process';
import { readFileSync } from 'node:fs';
import type { Context, Router, Sender } from 'tendril';
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

export const mib = (bytes: number): string => `${(bytes / MIB).toFixed(0)} MiB`;
export const mbps = (rate: number): string => `${rate.toFixed(0)} MB/s`;
export const percent = (ratio: number): string => `${(ratio * 100).toFixed(0)}%`;
export const micros = (ms: number): string => `${(ms * 1000).toFixed(1)} µs`;

/** Progress on stderr, so stdout carries only the table. */
export function progress(text: string): void {
  process.stderr.write(`[flow ${new Date().toISOString().slice(11, 19)}] ${text}\n`);
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

/**
 * Streams `count` values of 1 MiB from `context` to a new receiver in the
 * master, read as fast as the master can, and resolves with MB/s (10^6
 * bytes per second), from the call to the last value.
 */
export async function streamRate(router: Router, context: Context, count: number): Promise<number> {
  const receiver = router.receiver<Buffer>({ contextId: context.id });
  const started = performance.now();
  const call = context.call(produce, receiver.toSender(), count, 600_000, MIB);
  // Seen by the loop below as a closed receiver; the reason is the call's.
  call.catch(() => {});
  let bytes = 0;
  let values = 0;
  try {
    for await (const value of receiver) {
      bytes += value.length;
      values++;
    }
  } catch (error) {
    throw new Error(`stream from ${context.name} broke after ${values} values: ${(error as Error).message}`);
  }
  const seconds = (performance.now() - started) / 1000;
  await call;
  if (values !== count) throw new Error(`stream from ${context.name} ended after ${values} of ${count} values`);
  return bytes / 1e6 / seconds;
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
