import { existsSync, readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { setTimeout as sleepFor } from 'node:timers/promises';
import { fileURLToPath } from 'node:url';

/** The repository root (tests run from build/test). */
export const ROOT = join(dirname(fileURLToPath(import.meta.url)), '..', '..', '..');

/** True while `pid` exists and is not a zombie. */
export function isAlive(pid: number): boolean {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'latin1');
    return stat.split(') ')[1]?.[0] !== 'Z';
  } catch {
    return false;
  }
}

/** Waits until none of `pids` is alive; resolves with the milliseconds it took, or rejects after `limitMs`. */
export async function waitGone(pids: number[], limitMs: number): Promise<number> {
  const start = Date.now();
  for (;;) {
    const alive = pids.filter(isAlive);
    if (alive.length === 0) return Date.now() - start;
    if (Date.now() - start > limitMs) throw new Error(`processes ${alive.join(', ')} still alive after ${limitMs} ms`);
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
}

/** Path of a file in test/support (the sources, not the build). */
export function supportFile(name: string): string {
  const path = join(ROOT, 'test', 'support', name);
  if (!existsSync(path)) throw new Error(`test support file ${path} is missing`);
  return path;
}

/** Resolves after `ms` milliseconds. */
export function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

/** Polls `condition` every 10 ms; rejects if it is still false after `ms` milliseconds. */
export async function waitFor(condition: () => boolean, ms = 3000): Promise<void> {
  const deadline = Date.now() + ms;
  while (!condition()) {
    if (Date.now() > deadline) throw new Error(`condition not met within ${ms} ms`);
    await sleep(10);
  }
}

/** `promise`, or a rejection if it is still pending after `ms` (so a hang fails the test instead of stalling it). */
export function withLimit<T>(promise: PromiseLike<T>, ms: number): Promise<T> {
  let timer: ReturnType<typeof setTimeout> | undefined;
  const limit = new Promise<never>((_resolve, reject) => {
    timer = setTimeout(() => reject(new Error(`still pending after ${ms} ms`)), ms);
  });
  return Promise.race([Promise.resolve(promise), limit]).finally(() => clearTimeout(timer));
}

/**
 * `promise`'s outcome, or `'pending'` when it has not settled within `ms`:
 * for tests that an operation settles, where a hang would be for ever.
 */
export async function settledWithin<T>(
  promise: PromiseLike<T>,
  ms: number,
): Promise<{ value: T } | { error: unknown } | 'pending'> {
  const stop = new AbortController();
  const timer = sleepFor(ms, 'pending' as const, { signal: stop.signal }).catch(() => 'pending' as const);
  try {
    return await Promise.race([
      Promise.resolve(promise).then(
        (value) => ({ value }),
        (error: unknown) => ({ error }),
      ),
      timer,
    ]);
  } finally {
    stop.abort();
  }
}

/**
 * How `operation` settled, and after how many ms; `'pending'` when it had
 * not after `hang` ms (far longer than any bound under test: it never
 * would have).
 */
export async function settlement(
  operation: Promise<unknown>,
  hang: number,
): Promise<{ outcome: 'resolved' | 'rejected' | 'pending'; error?: unknown; ms: number }> {
  const started = Date.now();
  const settled = await settledWithin(operation, hang);
  const ms = Date.now() - started;
  if (settled === 'pending') return { outcome: 'pending', ms };
  return 'error' in settled ? { outcome: 'rejected', error: settled.error, ms } : { outcome: 'resolved', ms };
}
