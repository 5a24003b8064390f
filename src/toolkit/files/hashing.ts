/**
 * Hashing file data without holding up the event loop: a chunk is hashed
 * in slices, with a turn of the event loop between them, so that the
 * stream carrying the transfer keeps being written and read meanwhile.
 * Without it, a 1 MiB chunk kept the loop for about half a millisecond,
 * long enough for the few hundred KiB a socket buffers between two
 * processes to run dry (or fill up), and the other side waited.
 */
import type { Hash } from 'node:crypto';

/** Bytes hashed between two turns of the event loop: about 70 µs of SHA-256 with the CPU's SHA extensions. */
export const HASH_SLICE = 128 * 1024;

const nextTurn = (): Promise<void> => new Promise((resolve) => setImmediate(resolve));

/** Adds `data` to `hash`, a slice per turn of the event loop. */
export async function hashInSlices(hash: Hash, data: Uint8Array): Promise<void> {
  for (let offset = 0; offset < data.length; offset += HASH_SLICE) {
    if (offset > 0) await nextTurn();
    hash.update(data.subarray(offset, offset + HASH_SLICE));
  }
}
