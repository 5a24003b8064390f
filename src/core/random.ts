/**
 * The CSPRNG behind handles. In children node:crypto is loaded when the
 * first handle is drawn (bootstrap/build.mjs, LAZY_IN_CHILDREN): on a Node
 * built without its startup snapshot (Debian's), loading it costs a child
 * about 5 ms of its start, before any handle is needed.
 */
import { randomFillSync } from 'node:crypto';

/** Fills `array` with cryptographically strong random values. */
export function fillRandom(array: Uint32Array): void {
  randomFillSync(array);
}
