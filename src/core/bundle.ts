/**
 * Entry of the core bundle shipped to children (see bootstrap/build.mjs):
 * the `boot` the first stage calls, and the core's namespace. `boot` is
 * here, not in index.ts, because it hands that very namespace to the
 * modules a child loads later (`tendril:core`), and no module of the
 * namespace can import it without an import cycle.
 */
import type * as net from 'node:net';
import { boot as bootWith } from './child.js';
import * as core from './index.js';

export { core };

/**
 * Starts the core in a child (see child.ts), with the core's namespace as
 * what tendril modules loaded later receive for `tendril:core`.
 */
export function boot(input: net.Socket, coreBundle: Uint8Array, requireFn: (id: string) => unknown): void {
  bootWith(input, coreBundle, requireFn, core);
}
