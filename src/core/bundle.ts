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
import * as namespace from './index.js';
import { bootJob as bootJobWith } from './job-process.js';

export { namespace as core };

/**
 * Starts the core in a child (see child.ts), with the core's namespace as
 * what tendril modules loaded later receive for `tendril:core`. Called by
 * the first stage with the stream's two sockets, the core (its bytes as they
 * arrived when deflated, else its source text), 1 when it came deflated (0
 * when as source), the core's script, and the options it was compiled
 * with: the code cache it was given, and the cache file on the target the
 * first stage looked for (`cacheFile`, only with the Router's
 * targetCodeCache).
 */
export function boot(
  input: net.Socket,
  output: net.Socket,
  core: Uint8Array | string,
  deflated: number,
  requireFn: (id: string) => unknown,
  script?: vm.Script,
  compiled?: { cachedData?: Uint8Array; cacheFile?: string },
): void {
  const source = deflated ? CoreSource.fromDeflated(own(core as Uint8Array)) : CoreSource.fromText(core as string);
  // A cache to write once the core is up: the first stage looked on the target and found none, or V8 turned it down.
  const cacheFile = compiled?.cacheFile;
  const stale = script && cacheFile && (compiled?.cachedData === undefined || script.cachedDataRejected === true);
  bootWith(input, output, source, requireFn, namespace, stale ? { script, path: cacheFile } : undefined);
}

/** `bytes` in memory of their own: the first stage's slice may share it with the code cache or the stream's next bytes. */
function own(bytes: Uint8Array): Uint8Array {
  return bytes.byteLength === bytes.buffer.byteLength ? bytes : Buffer.from(bytes);
}

/**
 * Starts one of a job's processes (see job-process.ts). Called by the job
 * stage with the core's source, as it read it from fd 3, and its `require`.
 */
export function bootJob(coreSource: Uint8Array, requireFn: NodeJS.Require): void {
  bootJobWith(coreSource, requireFn, namespace);
}
