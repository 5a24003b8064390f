/**
 * The parent's side of NODE_RUNTIME (runtime-protocol.ts): served by the
 * master and by every context that has started a child, each from its own
 * source, so a request climbs the tree only as far as the first context
 * that has the runtime. A requester gets one transfer at a time; its
 * Sender is closed when the request settles, whatever the outcome.
 *
 * The master serves only what it offered (once `restrictRuntimeRequests`
 * is called on its router): a request is answered only while a start the
 * master asked a via context V to make is in progress, one that may ship
 * a runtime (no `nodePath`, `shipNode` not `'never'`), and only when it
 * comes from V or one of V's ancestors (the contexts whose caches the
 * runtime climbs through on its way to V). Each such start admits one
 * architecture (the first asked for), one description and one transfer.
 * Anything else is refused with a warning: no other child, nor any child
 * between starts, can make the master fetch (`npm pack`), read or send a
 * runtime. An intermediate serves its own children from its own cache;
 * what it asks of its parent climbs to the master, which decides.
 */
import type { Message } from '../core/message.js';
import { serve } from '../core/protocol/serve.js';
import type { MessageSwitch } from '../core/switch.js';
import { NODE_RUNTIME_SPEC, type RuntimeReply, type RuntimeRequest } from './runtime-protocol.js';
import { countShipping, PROGRESS_STEP, type ShipProgress } from './runtime-shipping.js';
import type { RuntimeArch, RuntimeSource } from './runtime-types.js';

const served = new WeakSet<object>();

/** What one start in progress lets its via context and their ancestors ask for. */
interface Admission {
  /** The via context's ID and those of its ancestors below the master. */
  readonly from: ReadonlySet<number>;
  /** The architecture, once the first request named it. */
  arch?: RuntimeArch;
  /** Whether its description, and its transfer, were asked for. */
  described: boolean;
  transferred: boolean;
}

/** The routers that serve only admitted requests (the master), and the starts in progress on each. */
const admissions = new WeakMap<object, Set<Admission>>();

/**
 * Makes `router` serve NODE_RUNTIME only to the starts it admits with
 * `admitRuntimeRequests` (see the module's comment). The master calls it
 * once, as it starts serving.
 */
export function restrictRuntimeRequests(router: object): void {
  if (!admissions.has(router)) admissions.set(router, new Set());
}

/**
 * Lets the starts of a child of `from[0]` (the via context) get a runtime
 * from `router` through NODE_RUNTIME, until the returned function is
 * called: call it when the start settles, whatever the outcome.
 * @param from the via context's ID, then those of its ancestors below the master (their order does not matter).
 * @param options the start's options: a start with `nodePath`, or with `shipNode: 'never'`, admits nothing.
 * @returns ends the admission (calling it again does nothing).
 */
export function admitRuntimeRequests(
  router: object,
  from: readonly number[],
  options: { nodePath?: unknown; shipNode?: unknown },
): () => void {
  const open = admissions.get(router);
  if (!open || options.nodePath !== undefined || options.shipNode === 'never') return () => {};
  const admission: Admission = { from: new Set(from), described: false, transferred: false };
  open.add(admission);
  return () => open.delete(admission);
}

/**
 * Takes `request` from `message.src` out of an admission of `router`'s, or
 * says why none admits it; undefined for a router that is not restricted.
 */
function refusal(router: MessageSwitch, request: RuntimeRequest, message: Message): string | undefined {
  const open = admissions.get(router);
  if (!open) return undefined;
  const transfer = request.chunks !== undefined;
  for (const admission of open) {
    if (!admission.from.has(message.src)) continue;
    if (admission.arch !== undefined && admission.arch !== request.arch) continue;
    if (transfer ? admission.transferred : admission.described) continue;
    admission.arch = request.arch;
    if (transfer) admission.transferred = true;
    else admission.described = true;
    return undefined;
  }
  return `context ${router.nameOf(message.src)} asked for a Node runtime for ${request.arch} that no start in progress through it was offered (a start through it that may ship one admits one description and one transfer, of one architecture)`;
}

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
      const refused = refusal(router, request, message);
      if (refused !== undefined) {
        router.warn('policy', `${router.name}: refused NODE_RUNTIME: ${refused}`);
        throw new Error(`refused: ${refused}`);
      }
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
