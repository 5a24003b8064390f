/**
 * Entry of the core bundle shipped to children (see bootstrap/build.mjs):
 * the `boot` the first stage calls, and the core's namespace. `boot` is
 * here, not in index.ts, because it hands that very namespace to the
 * modules a child loads later (`tendril:core`), and no module of the
 * namespace can import it without an import cycle.
 */
import type * as net from 'node:net';
import type * as vm from 'node:vm';
import { boot as bootWith } from './child.js';
import { CoreSource } from './core-source.js';
import * as core from './index.js';

export { core };

/**
 * Starts the core in a child (see child.ts), with the core's namespace as
 * what tendril modules loaded later receive for `tendril:core`. Called by
 * the first stage with the stream's two sockets, the core's bytes as they
 * arrived, 1 when those are deflated (0 when they are the source), and,
 * when the core's code cache on the target is to be written, the core's
 * script and the cache's path.
 */
export function boot(
  input: net.Socket,
  output: net.Socket,
  coreBytes: Uint8Array,
  deflated: number,
  requireFn: (id: string) => unknown,
  script?: vm.Script,
  codeCachePath?: string,
): void {
  const source = deflated ? CoreSource.fromDeflated(coreBytes) : CoreSource.fromSource(coreBytes);
  const cache = script && codeCachePath ? { script, path: codeCachePath } : undefined;
  bootWith(input, output, source, requireFn, core, cache);
}
