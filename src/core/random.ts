/**
 * The CSPRNG behind handles. Children get their own copy of this module
 * (bootstrap/child-random.cjs), which loads node:crypto on first use: on a
 * Node built without its startup snapshot (Debian's), loading it costs a
 * child about 5 ms of its start, before any handle is needed.
 */
import { randomFillSync } from 'node:crypto';

/** Fills `array` with cryptographically strong random values. */
export function fillRandom(array: Uint32Array): void {
  randomFillSync(array);
}
