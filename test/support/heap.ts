/**
 * What the test process holds, measured after a full garbage collection:
 * for tests that a child cannot make the master hold more than it should.
 * Node is not started with `--expose-gc`; the flag is set at run time.
 */
import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';

export const MiB = 1024 * 1024;

let collect: (() => void) | undefined;

/** Forces a full garbage collection (twice: what the first frees may free more). */
export function fullGc(): void {
  if (!collect) {
    setFlagsFromString('--expose-gc');
    collect = runInNewContext('gc') as () => void;
  }
  collect();
  collect();
}

/**
 * Bytes held after a full collection: the JavaScript heap and the bytes of
 * the ArrayBuffers (Buffers) it references, which live outside it.
 */
export function heldAfterGc(): number {
  fullGc();
  const { heapUsed, arrayBuffers } = process.memoryUsage();
  return heapUsed + arrayBuffers;
}

/** The JavaScript heap used after a full collection, in bytes (Buffers' bytes outside it not counted). */
export function heapAfterGc(): number {
  fullGc();
  return process.memoryUsage().heapUsed;
}

/** The process's resident set after a full collection. */
export function rssAfterGc(): number {
  fullGc();
  return process.memoryUsage().rss;
}

/** `bytes` in MiB, for messages. */
export function mib(bytes: number): string {
  return `${(bytes / MiB).toFixed(1)} MiB`;
}
