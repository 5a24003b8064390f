import * as vm from 'node:vm';
import type { CoreSource } from './core-source.js';

/**
 * The code cache for children of this context, as `Runtime.codeCache`
 * wants it: none for the first child, then one made once and kept.
 *
 * Making it costs this context about 20 ms of compiling, and sending it
 * 120 KB, more than two pipe buffers, which the child waits for while this
 * context is busy; it saves each child about 6 ms. A script that starts
 * one child would lose, so the cache is made when a second one starts,
 * while that child's interpreter is still starting.
 */
export function codeCacheForChildren(
  core: CoreSource,
  requireFn: (id: string) => unknown,
): () => Uint8Array | undefined {
  let asked = 0;
  let cache: { data: Uint8Array | undefined } | undefined;
  return () => {
    if (++asked === 1) return undefined;
    cache ??= { data: createCodeCache(core, requireFn) };
    return cache.data;
  };
}

/**
 * V8 code cache for the core, sent after the core to children that run the
 * very same Node binary (local children started with the default
 * `nodePath`), so they skip compiling it. V8 verifies the cache and
 * ignores it on any mismatch, so a wrong guess costs bytes, never
 * correctness.
 *
 * The core is compiled and its module initialisation run here, in an
 * isolated instance that is then dropped, and the codec is exercised on a
 * message like BOOT, so functions V8 compiles lazily during start-up are in
 * the cache too.
 */
export function createCodeCache(source: CoreSource, requireFn: (id: string) => unknown): Uint8Array | undefined {
  try {
    const script = new vm.Script(Buffer.from(source.source).toString(), { filename: 'tendril:core' });
    const { core } = (script.runInThisContext() as (req: typeof requireFn) => { core: typeof import('./index.js') })(
      requireFn,
    );
    const sample = { id: 1, name: 'x', parentIds: [0], block: [1, 2], flag: true, debug: '', big: 1n, map: new Map() };
    const frame = core.encodeFrame(core.Message.encoded({ dst: 1, src: 0, auth: 0, handle: 8, replyTo: 1000 }, sample));
    new core.FrameDecoder(1 << 20).push(Buffer.concat(frame), (message) => message.unpack());
    return script.createCachedData();
  } catch {
    return undefined;
  }
}
