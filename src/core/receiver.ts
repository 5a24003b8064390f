import { deadReason } from './dead-replies.js';
import { ChannelError, type TendrilError, TimeoutError, withoutStack } from './errors.js';
import type { Message } from './message.js';
import { optionsObject } from './options.js';
import { ReceiveWindow } from './receive-window.js';
import { SENDER_CLOSED } from './send-window.js';
import { type LeaseHolder, Sender } from './sender.js';
import type { Stream } from './stream.js';
import { type MessageSwitch, type Policy, type SwitchLike, switchOf } from './switch.js';
import { LOCAL_RECEIVER, ROUTER_SWITCH } from './symbols.js';
import { admitsDeadAbout } from './trust.js';
import { type HighWaterMark, highWaterMark } from './window.js';

/** The options a receiver takes (`ReceiverOptions`). */
const RECEIVER_OPTIONS = new Set(['handle', 'policy', 'contextId', 'highWaterMark']);

/** Options of a receiver. */
export interface ReceiverOptions {
  /** Listen on this handle instead of allocating one. */
  handle?: number;
  /**
   * Admission check for incoming messages, on top of `contextId`'s.
   * Default: admit all (or, with `contextId`, all from that context).
   */
  policy?: Policy;
  /**
   * The context values are expected from: only messages from it are
   * admitted (and a dead message only from the way to it), and the receiver
   * closes when it disconnects.
   */
  contextId?: number;
  /**
   * How much may wait here unread from each sending context: the Senders of
   * one context aimed at this receiver keep at most this many messages and
   * bytes in flight, all together, however many there are (they share one
   * window, see `Sender`), and a context that runs past it has the excess
   * refused (that Sender's sends reject with `ChannelError`). A receiver
   * holds at most one window per sending context, and what the contexts
   * behind one child queue here counts toward that child's
   * `maxHeldBytes` (Router option): past it their values are refused the
   * same way, naming `maxHeldBytes`. Default 1024 messages and 8 MiB.
   */
  highWaterMark?: Partial<HighWaterMark>;
}

/**
 * Gives back what a receiver that ended with values unread still had
 * charged to other contexts' accounts, once it has been collected: nobody
 * can read them any more. Where the runtime has no FinalizationRegistry
 * (Node before 14.6), that charge stays until the child's stream closes.
 */
const collected =
  typeof FinalizationRegistry === 'function'
    ? new FinalizationRegistry<ReceiveWindow>((window) => window.releaseAll())
    : undefined;

interface Waiter {
  resolve: (message: Message) => void;
  reject: (error: Error) => void;
  timer: ReturnType<typeof setTimeout> | undefined;
}

/**
 * The receiving end of a one-way channel: a handle in this context whose
 * messages queue up until read with `get()` or `for await`, under flow
 * control (see `highWaterMark`: its Senders wait rather than fill it; it
 * holds at most one window per sending context, and what the contexts
 * behind one child queue here is bounded by that child's `maxHeldBytes`).
 *
 * It closes when `close()` is called; when the context given as
 * `contextId` disconnects; and when its Sender closes it. A Sender of this
 * receiver passed to calls is closed by each call as it settles, and the
 * receiver then closes once every such call's Sender has (values sent
 * before are read first): one receiver can gather values from many calls.
 * A context holding such a Sender, or that has sent values and not closed,
 * that disconnects ends the receiver with a `ChannelError` naming the
 * context and why, once the others have closed; so does such a Sender
 * whose values the receiver refused (past the window, or past its child's
 * `maxHeldBytes`), the error saying so.
 */
export class Receiver<T = unknown> implements AsyncIterable<T>, LeaseHolder {
  /** The handle this receiver listens on. */
  readonly handle: number;
  /** The message switch of the context it is registered with: internal, reached with `switchOf()`. */
  readonly [ROUTER_SWITCH]: MessageSwitch;
  /** The window each sending context keeps to, with all its Senders of this receiver together. */
  readonly highWaterMark: Readonly<HighWaterMark>;
  private readonly queue: Message[] = [];
  private readonly waiters: Waiter[] = [];
  private readonly watchers = new Set<() => void>();
  private readonly window: ReceiveWindow;
  /** Calls in flight to each context carrying a Sender of this receiver. */
  private readonly leases = new Map<number, number>();
  private leaseCount = 0;
  /** Why a context that should have closed its Sender went away instead. */
  private lost: ChannelError | undefined;
  private watchingDisconnects = false;
  private closedWith: TendrilError | undefined;
  private closedByUser = false;
  private closeWatchers: ((error: TendrilError) => void)[] = [];

  /**
   * Registers a handle on `router` (allocated unless `options.handle` names one).
   * @param router the router of this context, or the master's `Router`.
   * @throws Error when `options.handle` is already registered.
   * @throws InvalidOptionError when `options.highWaterMark` is malformed.
   */
  constructor(router: SwitchLike, options: ReceiverOptions = {}) {
    const core = switchOf(router);
    this[ROUTER_SWITCH] = core;
    optionsObject(options, 'new Receiver()', RECEIVER_OPTIONS);
    this.highWaterMark = highWaterMark(options.highWaterMark, 'new Receiver()');
    const { contextId, policy } = options;
    const fromPeer: Policy | undefined =
      contextId === undefined
        ? undefined
        : (message, stream) =>
            message.isDead ? admitsDeadAbout(core, message, stream, contextId) : message.src === contextId;
    const admit: Policy | undefined =
      fromPeer && policy
        ? (message, stream) => fromPeer(message, stream) && policy(message, stream)
        : (fromPeer ?? policy);
    this.handle = core.addHandler((message, stream) => this.onMessage(message, stream), {
      ...(options.handle !== undefined && { handle: options.handle }),
      ...(admit && { policy: admit }),
      ...(contextId !== undefined && { contextId }),
      onClose: (error) => this.finish(error),
    });
    this.window = new ReceiveWindow(core, this.handle, this.highWaterMark);
    collected?.register(this, this.window);
  }

  /** True once closed; values queued before its Senders closed can still be read (`close()` drops them). */
  get closed(): boolean {
    return this.closedWith !== undefined;
  }

  /** Number of messages received and not yet read. */
  get queued(): number {
    return this.queue.length;
  }

  /** True when `get()` would resolve or reject without waiting. */
  get ready(): boolean {
    return this.queue.length > 0 || this.closedWith !== undefined;
  }

  /**
   * A sender in this context that delivers to this receiver, with its
   * window. Pass it to calls (it travels), or send with it here.
   */
  toSender(): Sender<T> {
    const sender = new Sender<T>(this[ROUTER_SWITCH], this[ROUTER_SWITCH].id, this.handle, {
      highWaterMark: this.highWaterMark,
    });
    sender[LOCAL_RECEIVER] = this;
    return sender;
  }

  /**
   * A call to `contextId` carries a Sender of this receiver: the receiver
   * stays open until that context closes it (the call settling does), or
   * goes away. Called by `Context`.
   */
  lease(contextId: number): void {
    if (this.closedWith) return;
    this.leases.set(contextId, (this.leases.get(contextId) ?? 0) + 1);
    this.leaseCount++;
    this.watchDisconnects();
  }

  /**
   * The call counted by `lease` never reached `contextId`: nothing there
   * will close its Sender. The receiver ends with a `ChannelError` saying
   * so once no other call holds it. Called by `Context`.
   */
  unlease(contextId: number): void {
    if (!this.release(contextId)) return;
    this.lost ??= new ChannelError(
      this[ROUTER_SWITCH].nameOf(contextId),
      contextId,
      'a call carrying a Sender of this receiver did not reach it',
    );
    if (this.leaseCount === 0) this.end(this.lost);
  }

  /** Drops one lease of `contextId`; false when it had none. */
  private release(contextId: number): boolean {
    const count = this.leases.get(contextId);
    if (count === undefined) return false;
    if (count > 1) this.leases.set(contextId, count - 1);
    else this.leases.delete(contextId);
    this.leaseCount--;
    return true;
  }

  /**
   * The next message, raw.
   * @param timeout milliseconds to wait; default: no limit.
   * @throws ChannelError once the receiver is closed and drained.
   * @throws TimeoutError when `timeout` passes.
   */
  getMessage(timeout?: number): Promise<Message> {
    const queued = this.queue.shift();
    if (queued) {
      this.window.consumed(queued);
      return Promise.resolve(queued);
    }
    if (this.closedWith) return Promise.reject(this.closedWith);
    this[ROUTER_SWITCH].hold();
    return new Promise<Message>((resolve, reject) => {
      const waiter: Waiter = { resolve, reject, timer: undefined };
      if (timeout !== undefined) {
        waiter.timer = setTimeout(() => {
          this.waiters.splice(this.waiters.indexOf(waiter), 1);
          this[ROUTER_SWITCH].release();
          reject(new TimeoutError(`receive on handle ${this.handle}`, this[ROUTER_SWITCH].name, timeout));
        }, timeout);
      }
      this.waiters.push(waiter);
    });
  }

  /**
   * The next value, decoded.
   * @throws as `getMessage`.
   */
  async get(timeout?: number): Promise<T> {
    return (await this.getMessage(timeout)).unpack(this[ROUTER_SWITCH]) as T;
  }

  /**
   * Calls `callback` once, when `ready` becomes true (at once, in a
   * microtask, if it already is). Returns a function that cancels it.
   * Used by `Select`.
   */
  onReady(callback: () => void): () => void {
    const watcher = () => {
      this.watchers.delete(watcher);
      callback();
    };
    if (this.ready) queueMicrotask(() => this.watchers.has(watcher) && watcher());
    this.watchers.add(watcher);
    return () => this.watchers.delete(watcher);
  }

  /** Calls `callback` once, when the receiver closes (at once if it has). */
  onClosed(callback: (error: TendrilError) => void): void {
    if (this.closedWith) callback(this.closedWith);
    else this.closeWatchers.push(callback);
  }

  /**
   * Stops receiving and drops the values still queued; pending and later
   * `get()` calls reject with `ChannelError`. The Senders still feeding it
   * are told, so their pending and later sends reject with `ChannelError`
   * too, also one waiting for credit.
   */
  close(): void {
    this.stopReceiving(true);
  }

  /**
   * Stops receiving as `close()` does, but the values already queued are
   * still read before the iteration ends (and stay charged until they
   * are): what a Channel whose call has settled does with its input.
   * @internal
   */
  closeInput(): void {
    this.stopReceiving(false);
  }

  private stopReceiving(dropQueued: boolean): void {
    this.closedByUser = true;
    this[ROUTER_SWITCH].removeHandler(this.handle);
    if (dropQueued) this.queue.length = 0;
    this.window.closeAll(
      `receiver on handle ${this.handle} in context '${this[ROUTER_SWITCH].name}' was closed`,
      dropQueued,
    );
    if (this.closedWith) return;
    this.finish(
      new ChannelError(
        this[ROUTER_SWITCH].name,
        this[ROUTER_SWITCH].id,
        `receiver on handle ${this.handle} was closed`,
      ),
    );
  }

  /** Yields values until the receiver is closed by its sender or by `close()`. */
  async *[Symbol.asyncIterator](): AsyncIterator<T> {
    for (;;) {
      let message: Message;
      try {
        message = await this.getMessage();
      } catch (error) {
        if (error instanceof ChannelError && (error.reason === SENDER_CLOSED || this.closedByUser)) return;
        throw error;
      }
      yield message.unpack(this[ROUTER_SWITCH]) as T;
    }
  }

  private onMessage(message: Message, stream: Stream | undefined): void {
    if (message.isDead) {
      this.onSenderClosed(message);
      return;
    }
    const refused = this.window.admit(message);
    if (refused) {
      this[ROUTER_SWITCH].deadReply(message, refused.reason, stream);
      if (refused.senderRefused) this.onSenderRefused(message.src, refused.reason);
      return;
    }
    if (message.src !== this[ROUTER_SWITCH].id) this.watchDisconnects();
    const waiter = this.waiters.shift();
    if (waiter) {
      if (waiter.timer) clearTimeout(waiter.timer);
      this[ROUTER_SWITCH].release();
      this.window.consumed(message);
      waiter.resolve(message);
    } else {
      // Kept until read: it holds its own bytes, which is what it was charged for, not the read it came in.
      message.ownPayload();
      this.queue.push(message);
      this.notify();
    }
  }

  /**
   * A Sender closed. With calls in flight that carry this receiver's
   * Senders, it ends when the last of those has closed; otherwise at once.
   */
  private onSenderClosed(message: Message): void {
    if (!this.window.closed(message)) return;
    if (this.leaseCount > 0) {
      if (!this.release(message.src) || this.leaseCount > 0) return;
    }
    // The usual end of a receiver: made only when it is the one the receiver ends with, and
    // without a stack, which would show only the message handling and is most of an error's cost.
    this.end(
      this.lost ??
        withoutStack(() => new ChannelError(this[ROUTER_SWITCH].nameOf(message.src), message.src, deadReason(message))),
    );
  }

  /**
   * A Sender of `src` was refused for good (its dead reply fails it, so it
   * will not close): when a call to `src` carried a Sender of this
   * receiver, that is its end, and the reader learns, once the receiver
   * ends, that values were refused. A Sender nobody said would come just
   * has its values dropped.
   */
  private onSenderRefused(src: number, reason: string): void {
    if (!this.release(src)) return;
    this.lost ??= new ChannelError(this[ROUTER_SWITCH].nameOf(src), src, `values it sent were refused: ${reason}`);
    if (this.leaseCount === 0) this.end(this.lost);
  }

  /** A context went away: if it owed this receiver a close, the receiver ends with why, once the others are done. */
  private readonly onDisconnect = (contextId: number, reason: string): void => {
    const leased = this.leases.get(contextId) ?? 0;
    const sending = this.window.forgetContext(contextId);
    if (leased === 0 && !sending) return;
    this.lost ??= new ChannelError(
      this[ROUTER_SWITCH].nameOf(contextId),
      contextId,
      `it went away before closing its Sender: ${reason}`,
    );
    if (leased > 0) {
      this.leases.delete(contextId);
      this.leaseCount -= leased;
    }
    if (this.leaseCount === 0 && !this.window.hasRemoteSources()) this.end(this.lost);
  };

  private watchDisconnects(): void {
    if (this.watchingDisconnects || this.closedWith) return;
    this.watchingDisconnects = true;
    this[ROUTER_SWITCH].on('disconnect', this.onDisconnect);
  }

  private end(error: TendrilError): void {
    this[ROUTER_SWITCH].removeHandler(this.handle);
    this.window.forgetAll();
    this.finish(error);
  }

  private finish(error: TendrilError): void {
    if (this.closedWith) return;
    this.closedWith = error;
    if (this.watchingDisconnects) this[ROUTER_SWITCH].off('disconnect', this.onDisconnect);
    for (const watcher of this.closeWatchers.splice(0)) watcher(error);
    for (const waiter of this.waiters.splice(0)) {
      if (waiter.timer) clearTimeout(waiter.timer);
      this[ROUTER_SWITCH].release();
      waiter.reject(error);
    }
    this.notify();
  }

  private notify(): void {
    for (const watcher of [...this.watchers]) watcher();
  }
}
