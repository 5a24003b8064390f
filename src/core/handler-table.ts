import { randomFillSync } from 'node:crypto';
import type { TendrilError } from './errors.js';
import { MAX_ID, type Message } from './message.js';
import type { Policy } from './policy.js';
import { FIRST_DYNAMIC_HANDLE } from './protocol/handles.js';
import type { Stream } from './stream.js';

/** Options of `MessageSwitch.addHandler`. */
export interface HandlerOptions {
  /** Use this handle number instead of allocating one (standard handles). */
  handle?: number;
  /** Admission check; a refused message gets a dead reply. Default: admit all. */
  policy?: Policy;
  /** Keep the handler after its first message. Default true. */
  persist?: boolean;
  /**
   * The context a reply is awaited from. When it disconnects, `onClose` is
   * called with a `ContextDisconnectedError` and the handler is removed.
   */
  contextId?: number;
  /** Called once if the handler is closed without a message (disconnect, shutdown). */
  onClose?: (error: TendrilError) => void;
}

/** A registered handler, as the switch delivers to it. */
export interface HandlerEntry {
  /** Called with each message it admits. */
  fn: (message: Message, stream: Stream | undefined) => void;
  /** Its admission check, if any. */
  policy: Policy | undefined;
  /** False when it goes after its first message. */
  persist: boolean;
  /** The context whose disconnection closes it, if any. */
  contextId: number | undefined;
  /** Called once if it is closed without a message. */
  onClose: ((error: TendrilError) => void) | undefined;
}

/** The handlers of one context, by handle, and the handles awaiting each context. */
export class HandlerTable {
  private readonly handlers = new Map<number, HandlerEntry>();
  private readonly handlesByContext = new Map<number, Set<number>>();

  /** @param owner the context's name, for errors. */
  constructor(private readonly owner: string) {}

  /** How many handlers are registered (tests watch it for leaks). */
  get size(): number {
    return this.handlers.size;
  }

  /** The handler registered on `handle`, if any. */
  get(handle: number): HandlerEntry | undefined {
    return this.handlers.get(handle);
  }

  /**
   * Registers a handler and returns its handle number.
   * @throws Error when `options.handle` is already registered.
   */
  add(fn: (message: Message, stream: Stream | undefined) => void, options: HandlerOptions = {}): number {
    let handle = options.handle;
    if (handle === undefined) handle = this.allocateHandle();
    else if (this.handlers.has(handle)) throw new Error(`handle ${handle} is already registered in ${this.owner}`);
    this.handlers.set(handle, {
      fn,
      policy: options.policy,
      persist: options.persist ?? true,
      contextId: options.contextId,
      onClose: options.onClose,
    });
    if (options.contextId !== undefined) {
      let set = this.handlesByContext.get(options.contextId);
      if (!set) {
        set = new Set();
        this.handlesByContext.set(options.contextId, set);
      }
      set.add(handle);
    }
    return handle;
  }

  /** Removes a handler without calling its `onClose`. */
  remove(handle: number): void {
    const entry = this.handlers.get(handle);
    if (!entry) return;
    this.handlers.delete(handle);
    if (entry.contextId !== undefined) this.handlesByContext.get(entry.contextId)?.delete(handle);
  }

  /** Closes, with `error`, every handler awaiting `contextId`. */
  closeAwaiting(contextId: number, error: () => TendrilError): void {
    const handles = this.handlesByContext.get(contextId);
    if (!handles) return;
    this.handlesByContext.delete(contextId);
    const reason = error();
    for (const handle of handles) {
      const entry = this.handlers.get(handle);
      if (!entry) continue;
      this.handlers.delete(handle);
      entry.onClose?.(reason);
    }
  }

  /** Closes every handler that is still waiting, rejecting it with `error`. */
  closeAll(error: TendrilError): void {
    for (const [handle, entry] of [...this.handlers]) {
      if (!entry.onClose) continue;
      this.remove(handle);
      entry.onClose(error);
    }
  }

  /**
   * A free handle, drawn at random from the dynamic range: a handle is
   * then as good as a capability, since no context can guess another's
   * reply handles or receivers to sweep them with forged replies.
   */
  private allocateHandle(): number {
    for (;;) {
      const handle = FIRST_DYNAMIC_HANDLE + (randomUint32() % (MAX_ID - FIRST_DYNAMIC_HANDLE));
      if (!this.handlers.has(handle)) return handle;
    }
  }
}

const randomPool = new Uint32Array(256);
let randomLeft = 0;
/**
 * A random 32-bit integer, from a pool refilled by the CSPRNG. In children
 * node:crypto loads when the first handle is drawn (LAZY_IN_CHILDREN in
 * bootstrap/build.mjs): on a Node without its startup snapshot it costs
 * about 5 ms, which no child should pay while it starts.
 */
function randomUint32(): number {
  if (randomLeft === 0) {
    randomFillSync(randomPool);
    randomLeft = randomPool.length;
  }
  return randomPool[--randomLeft] as number;
}
