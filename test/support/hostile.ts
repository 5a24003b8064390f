/**
 * A compromised child, for the tests of every service built on the core:
 * the attacker holds the child's own code and router (root on a host the
 * master deploys to), and answers the master's requests as it likes.
 *
 * `impersonate(context, service, attack)` makes `context` answer the
 * master's calls of one of tendril's service functions (an export of
 * `tendril:toolkit`: `'filesSend'`, `'filesReceive'`, `'filesFanOut'`,
 * `'exec'`...) with `attack` instead. `attack` is shipped as source, so it
 * must be self-contained like any shipped function; it receives the
 * call's decoded arguments (Channels and Senders bound to the child's
 * router, usable as the real service would use them) and, as `this`, the
 * child's router and core. What it returns or throws answers the call;
 * `this.never` (a promise that never settles) leaves the call unanswered
 * for as long as the child lives, its Channels open. Every other request
 * is served as before. `silence(context, handle)` makes it drop every
 * request to a standard handle (CONNECT, say) unanswered.
 */
import type { Context } from 'tendril';

/** What `attack` gets as `this`, in the child. */
export interface Attacker {
  /** The child's message switch (the core `Router`). */
  router: {
    id: number;
    name: string;
    send(message: unknown): void;
    addHandler(fn: (message: unknown, stream: unknown) => void, options?: object): number;
  };
  /** The child's core (`tendril:core`): `Message`, `encode`, the protocol specs... */
  core: Record<string, unknown>;
  /** The message the call arrived in. */
  message: { src: number; auth: number; replyTo: number; handle: number };
  /** A promise that never settles: return it to leave the call unanswered. */
  never: Promise<never>;
}

/**
 * Makes `context` answer calls of the service function `service` with
 * `attack` (see the file's comment). Calling it again for the same service
 * replaces the attack.
 */
export async function impersonate<A extends unknown[]>(
  context: Context,
  service: string,
  attack: (this: Attacker, ...args: A) => unknown,
): Promise<void> {
  await context.call(
    (name: string, source: string) => {
      const core = require('tendril:core') as Record<string, unknown> & {
        contextRuntime(): { router: never };
        CALL_FUNCTION: number;
        TOOLKIT_MODULE_ID: string;
        successReply(value: unknown, what: string): Uint8Array;
        failureReply(error: unknown): Uint8Array;
        Message: new (header: object, data: Uint8Array) => unknown;
        CALL_SETTLED: symbol;
      };
      const router = core.contextRuntime().router as unknown as {
        id: number;
        name: string;
        send(message: unknown): void;
        handlers: Map<number, { fn: (message: unknown, stream: unknown) => void }>;
        attacks?: Map<string, (...args: unknown[]) => unknown>;
      };
      // The attack arrives as text: it is compiled here, as the child's own code.
      const attack = new Function(`return (${source})`)() as (...args: unknown[]) => unknown;
      if (!router.attacks) {
        const attacks = new Map<string, (...args: unknown[]) => unknown>();
        router.attacks = attacks;
        const entry = router.handlers.get(core.CALL_FUNCTION);
        if (!entry) throw new Error('no CALL_FUNCTION handler to take over');
        const serveHonestly = entry.fn;
        const never = new Promise<never>(() => undefined);
        entry.fn = (message: unknown, stream: unknown) => {
          const m = message as { src: number; auth: number; replyTo: number; unpack(router: unknown): unknown };
          let payload: { m?: unknown; e?: unknown; a?: unknown[] } | undefined;
          try {
            payload = m.unpack(router) as typeof payload;
          } catch {
            payload = undefined;
          }
          const chosen = payload?.m === core.TOOLKIT_MODULE_ID ? attacks.get(String(payload.e)) : undefined;
          if (!chosen) return serveHonestly(message, stream);
          const answer = (data: Uint8Array) => {
            if (m.replyTo === 0) return;
            router.send(
              new core.Message(
                { dst: m.src, src: router.id, auth: router.id, handle: m.replyTo, replyTo: 0, flags: 0 },
                data,
              ),
            );
          };
          Promise.resolve()
            .then(() => chosen.apply({ router, core, message, never }, payload?.a ?? []))
            .then(
              (value) => answer(core.successReply(value, 'return value')),
              (error: unknown) => answer(core.failureReply(error)),
            );
        };
      }
      router.attacks.set(name, attack);
    },
    service,
    attack.toString(),
  );
}

/** Makes `context` drop every message to standard handle `handle` unanswered, as a hung or hostile context would. */
export async function silence(context: Context, handle: number): Promise<void> {
  await context.call((h: number) => {
    const router = (require('tendril:core') as { contextRuntime(): { router: unknown } }).contextRuntime().router as {
      handlers: Map<number, { fn: () => void }>;
    };
    const entry = router.handlers.get(h);
    if (!entry) throw new Error(`no handler for handle ${h}`);
    entry.fn = () => undefined;
  }, handle);
}

/**
 * Makes `context` answer every CONNECT it serves as if the new context had
 * ID `forged`: an intermediate claiming another context (a sibling, its
 * own) is the one it started.
 */
export async function forgeConnectReplies(context: Context, forged: number): Promise<void> {
  await context.call((id: number) => {
    const core = require('tendril:core') as {
      MessageSwitch: { prototype: { send(message: unknown): void } };
      Message: new (header: object, data: Uint8Array) => unknown;
      decode(bytes: Uint8Array): unknown;
      encode(value: unknown): Uint8Array;
    };
    const send = core.MessageSwitch.prototype.send;
    core.MessageSwitch.prototype.send = function (this: unknown, message: unknown) {
      const m = message as { dst: number; handle: number; data: Uint8Array; flags: number };
      if (m.dst === 0 && m.handle >= 1000 && m.flags === 0) {
        try {
          const value = core.decode(m.data) as [number, { pid?: unknown; id: number }];
          if (Array.isArray(value) && value[0] === 0 && typeof value[1]?.pid === 'number') {
            value[1].id = id;
            return send.call(this, new core.Message({ ...m }, core.encode(value)));
          }
        } catch {}
      }
      return send.call(this, message);
    };
  }, forged);
}

/**
 * Shipped to a child (self-contained): asks the master for `count` context
 * IDs (1000 at a time) and announces each to its parent as a child of its
 * own (ADD_ROUTE), as an intermediate starting that many children would.
 * Returns the IDs, routed once it returns.
 */
export async function claimIds(count: number): Promise<number[]> {
  const core = require('tendril:core') as {
    contextRuntime(): {
      router: {
        id: number;
        parentId: number;
        request(dst: number, handle: number, payload: Uint8Array): Promise<{ data: Uint8Array }>;
        send(message: unknown): void;
      };
    };
    encode(value: unknown): Uint8Array;
    decode(bytes: Uint8Array): unknown;
    Message: new (header: object, data: Uint8Array) => unknown;
    ALLOCATE_ID: number;
    ADD_ROUTE: number;
  };
  const router = core.contextRuntime().router;
  const ids: number[] = [];
  while (ids.length < count) {
    const reply = await router.request(0, core.ALLOCATE_ID, core.encode(Math.min(1000, count - ids.length)));
    const [status, block] = core.decode(reply.data) as [number, [number, number]];
    if (status !== 0) throw new Error(`ALLOCATE_ID failed: ${JSON.stringify(block)}`);
    for (let id = block[0]; id < block[1]; id++) {
      ids.push(id);
      router.send(
        new core.Message(
          { dst: router.parentId, src: router.id, auth: router.id, handle: core.ADD_ROUTE, replyTo: 0, flags: 0 },
          core.encode([id, `fake-${id}`, router.id]),
        ),
      );
    }
  }
  // A round trip to the master behind them: the routes are in place once it is answered.
  await router.request(0, core.ALLOCATE_ID, core.encode(1));
  return ids;
}
