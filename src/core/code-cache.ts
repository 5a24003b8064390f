import * as vm from 'node:vm';
import { inflateRawSync } from 'node:zlib';

/**
 * V8 code cache for the core, sent after the core to children that run the
 * very same Node binary (local children started with the default
 * `nodePath`), so they skip compiling it: about 3 ms of a ~15 ms bootstrap
 * on the machine this was measured on. V8 verifies the cache and ignores
 * it on any mismatch, so a wrong guess costs bytes, never correctness.
 *
 * The core is compiled and its module initialisation run here, in an
 * isolated instance that is then dropped, and the codec is exercised on a
 * message like BOOT, so functions V8 compiles lazily during start-up are in
 * the cache too.
 */
export function createCodeCache(deflatedCore: Uint8Array, requireFn: (id: string) => unknown): Uint8Array | undefined {
  try {
    const script = new vm.Script(inflateRawSync(deflatedCore).toString(), { filename: 'tendril:core' });
    const core = (script.runInThisContext() as (req: typeof requireFn) => typeof import('./index.js'))(requireFn);
    const sample = { id: 1, name: 'x', parentIds: [0], block: [1, 2], flag: true, debug: '', big: 1n, map: new Map() };
    const frame = core.encodeFrame(core.Message.encoded({ dst: 1, src: 0, auth: 0, handle: 8, replyTo: 1000 }, sample));
    new core.FrameDecoder(1 << 20).push(Buffer.concat(frame), (message) => message.unpack());
    return script.createCachedData();
  } catch {
    return undefined;
  }
}
