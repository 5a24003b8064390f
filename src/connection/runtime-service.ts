/**
 * The parent's side of NODE_RUNTIME (runtime-protocol.ts): served by the
 * master and by every context that has started a child, each from its own
 * source, so a request climbs the tree only as far as the first context
 * that has the runtime. A requester gets one transfer at a time; its
 * Sender is closed when the request settles, whatever the outcome.
 */
import { serve } from '../core/protocol/serve.js';
import type { MessageSwitch } from '../core/switch.js';
import { NODE_RUNTIME_SPEC, type RuntimeReply } from './runtime-protocol.js';
import { countShipping, PROGRESS_STEP, type ShipProgress } from './runtime-shipping.js';
import type { RuntimeSource } from './runtime-types.js';

const served = new WeakSet<object>();

/**
 * Serves NODE_RUNTIME on `router` (once; later calls do nothing).
 * @param source where this context gets runtimes (asked when a request comes).
 * @param onProgress told of each transfer's progress, every `PROGRESS_STEP` bytes.
 */
export function serveNodeRuntime(
  router: MessageSwitch,
  source: () => RuntimeSource,
  onProgress?: (progress: ShipProgress) => void,
): void {
  if (served.has(router)) return;
  served.add(router);
  const busy = new Set<number>();
  serve(router, NODE_RUNTIME_SPEC, async (request, message): Promise<RuntimeReply> => {
    const { chunks } = request;
    let mine = false;
    try {
      if (chunks && busy.has(message.src)) {
        throw new Error(`context ${router.nameOf(message.src)} is being sent a Node runtime already`);
      }
      if (chunks) {
        busy.add(message.src);
        mine = true;
      }
      const runtime = await source().get(request.arch, []);
      const reply: RuntimeReply = {
        entry: runtime.entry,
        version: runtime.version,
        arch: runtime.arch,
        bytes: runtime.bytes,
        sha512: runtime.sha512,
      };
      if (!chunks) return reply;
      const progress = (bytes: number) =>
        onProgress?.({
          contextName: router.nameOf(message.src),
          where: `cache of ${router.nameOf(message.src)}`,
          version: runtime.version,
          arch: runtime.arch,
          bytes,
          total: runtime.bytes,
        });
      progress(0);
      let sent = 0;
      let reported = 0;
      for await (const chunk of runtime.open()) {
        await chunks.send(chunk);
        sent += chunk.length;
        if (sent - reported >= PROGRESS_STEP) {
          reported = sent;
          progress(sent);
        }
      }
      progress(sent);
      countShipping(router, message.src, 1, sent, 0);
      return reply;
    } finally {
      if (mine) busy.delete(message.src);
      chunks?.close();
    }
  });
}
