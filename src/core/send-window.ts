import { decode, encode } from './codec.js';
import { deadReason } from './dead-replies.js';
import { ChannelError, type TendrilError, TimeoutError } from './errors.js';
import { FLAG_DEAD, Message } from './message.js';
import type { MessageSwitch } from './switch.js';
import { admitsDeadAbout } from './trust.js';
import { fits, type HighWaterMark } from './window.js';

/** Reason a receiver sees when its sender closed it on purpose. */
export const SENDER_CLOSED = 'closed by sender';

interface Pending {
  data: Uint8Array;
  /** `FLAG_RAW` for bytes sent as they are, else 0. */
  flags: number;
  onCredited: (() => void) | undefined;
  resolve: () => void;
  reject: (error: Error) => void;
  /** Clears the send's timeout and abort listener, if it has them. */
  settled?: () => void;
}

/** How long a send may wait for credit (`Sender.send`'s options), and what it is for errors. */
export interface SendStop {
  /** Milliseconds; undefined: no limit. */
  timeout?: number | undefined;
  /** Aborts the wait. */
  signal?: AbortSignal | undefined;
}

const RESOLVED = Promise.resolve();

/**
 * What the Senders of one context aimed at one receiver have in flight
 * together. The receiver admits from a context one window, however many
 * Senders (credit handles) it uses, so they share it: each counts what it
 * sends here before it leaves, credit returned to any of them makes room
 * for all, and the ones waiting go in turn, a message each, so none
 * starves. Whatever leaves the receiver's count for a Sender (its close,
 * its refusal) leaves this one too.
 */
class SharedWindow {
  /** Messages and bytes sent by all members and not yet credited. */
  messages = 0;
  bytes = 0;
  /** Members that have not closed or failed. */
  members = 0;
  /** Members with sends waiting for room, in turn. */
  readonly waiting: SendWindow[] = [];
  private pumping = false;

  constructor(
    private readonly registry: Map<string, SharedWindow>,
    private readonly key: string,
  ) {}

  /** True when a member may send `size` bytes now, with its `window`: nobody waits before it, and it fits. */
  hasRoom(window: Readonly<HighWaterMark>, size: number): boolean {
    return this.waiting.length === 0 && fits(window, this.messages, this.bytes, size);
  }

  /** Sends what fits of what the members wait with, one message per member in turn. */
  pump(): void {
    // Credit for a receiver in this context can come back while a message is handed over.
    if (this.pumping) return;
    this.pumping = true;
    try {
      for (;;) {
        const member = this.waiting[0];
        if (!member?.sendNext(this)) return;
        // A member that closed or failed as it sent has left the line already.
        if (this.waiting[0] !== member) continue;
        this.waiting.shift();
        if (member.isWaiting) this.waiting.push(member);
      }
    } finally {
      this.pumping = false;
    }
  }

  /** A member closed or failed: it takes its count along, and frees its room for the others. */
  leave(member: SendWindow, messages: number, bytes: number): void {
    this.messages -= messages;
    this.bytes -= bytes;
    const index = this.waiting.indexOf(member);
    if (index !== -1) this.waiting.splice(index, 1);
    if (--this.members === 0) this.registry.delete(this.key);
    else this.pump();
  }
}

/** The shared windows of each router, by receiver (`'<context>/<handle>'`). */
const sharedWindows = new WeakMap<MessageSwitch, Map<string, SharedWindow>>();

function join(router: MessageSwitch, dst: number, handle: number): SharedWindow {
  let registry = sharedWindows.get(router);
  if (!registry) {
    registry = new Map();
    sharedWindows.set(router, registry);
  }
  const key = `${dst}/${handle}`;
  let shared = registry.get(key);
  if (!shared) {
    shared = new SharedWindow(registry, key);
    registry.set(key, shared);
  }
  shared.members++;
  return shared;
}

/**
 * The sending half of a Sender→Receiver credit window. Messages go out
 * while fewer than the receiver's high-water mark are in flight from this
 * context to that receiver (all its Senders of it together, see
 * `SharedWindow`); past it they wait here, in order, until the receiver's
 * owner reads some and the receiver returns credit to a credit handle
 * (each Sender has its own, named in its messages' reply-to field). A dead
 * message on that handle, or the receiver's context going away, closes the
 * window with `ChannelError`.
 */
export class SendWindow {
  /** Messages and bytes this Sender sent and that were not yet credited. */
  private messages = 0;
  private bytes = 0;
  private creditHandle = 0;
  private readonly pending: Pending[] = [];
  private readonly shared: SharedWindow;
  private closing = false;
  private closeSent = false;
  private left = false;
  private failure: TendrilError | undefined;
  private holding = false;
  /** Messages transmitted since this Sender was made, and of them credited (the receiver reads in order). */
  private transmitted = 0;
  private credited = 0;
  /** What to call once message number `until` is credited (see `send`), in order. */
  private readonly creditWaiters: { until: number; callback: () => void }[] = [];

  /**
   * @param router the router of the sending context.
   * @param dst the receiver's context.
   * @param handle the receiver's handle there.
   * @param auth the auth ID messages carry.
   * @param window the receiver's high-water mark.
   */
  constructor(
    private readonly router: MessageSwitch,
    private readonly dst: number,
    private readonly handle: number,
    private readonly auth: number,
    private readonly window: Readonly<HighWaterMark>,
  ) {
    this.shared = join(router, dst, handle);
  }

  /** True once closed by `close()` or by the receiver going away. */
  get closed(): boolean {
    return this.closing || this.failure !== undefined;
  }

  /** True while sends wait here for room. */
  get isWaiting(): boolean {
    return this.pending.length > 0 && this.failure === undefined;
  }

  /**
   * Sends an encoded value (or, flagged `FLAG_RAW`, bytes as they are) now
   * if the window has room, else once it has. The promise resolves when the message has been handed to the router,
   * and rejects with `ChannelError` if the window closes first. Marked
   * handled, so a caller that does not await it cannot crash the process.
   * @param onCredited called once the receiver has read the message (its
   *   credit came back), so this context no longer holds its bytes; never
   *   when the receiver is in this context (the reader may still hold
   *   them), nor when the window closes or fails first.
   */
  send(data: Uint8Array, flags = 0, onCredited?: () => void, stop?: SendStop): Promise<void> {
    if (this.failure) return rejected(this.failure);
    if (stop?.signal?.aborted) return rejected(stop.signal.reason);
    if (this.closing) {
      return rejected(
        new ChannelError(this.router.nameOf(this.dst), this.dst, 'the sender was closed before this send'),
      );
    }
    if (this.pending.length === 0 && this.shared.hasRoom(this.window, data.length)) {
      this.transmit(data, flags, onCredited);
      return this.failure ? rejected(this.failure) : RESOLVED;
    }
    const promise = new Promise<void>((resolve, reject) => {
      const entry: Pending = { data, flags, onCredited, resolve, reject };
      if (stop?.timeout !== undefined || stop?.signal !== undefined) this.bound(entry, stop);
      this.pending.push(entry);
    });
    if (this.pending.length === 1) this.shared.waiting.push(this);
    this.hold(true);
    return handled(promise);
  }

  /**
   * Tells the receiver no more values will come, once those waiting here
   * have gone. Does nothing when already closed.
   */
  close(): void {
    if (this.closed) return;
    this.closing = true;
    if (this.pending.length === 0) this.sendClose();
  }

  /**
   * Gives up on the receiver, which has stopped taking values (a stalled
   * or hostile context, or one whose operation was abandoned): values
   * waiting here for credit are dropped and their sends reject with
   * `error`, as later sends do, and the receiver is told this sender
   * closed. Unlike `close()`, it does not wait for credit that may never come.
   */
  abandon(error: TendrilError): void {
    if (this.failure) return;
    this.closing = true;
    // The close goes before the room it frees is given to this context's other Senders.
    this.sendClose();
    this.fail(error);
  }

  /**
   * Ends `entry`'s wait for credit when `stop`'s timeout passes or its
   * signal aborts: that send rejects (`TimeoutError`, or the signal's
   * reason), and the Sender gives the receiver up (`abandon`): the values
   * after it cannot be delivered in order without it.
   */
  private bound(entry: Pending, stop: SendStop): void {
    const give = (error: Error) => {
      entry.settled?.();
      const at = this.pending.indexOf(entry);
      if (at === -1) return;
      this.pending.splice(at, 1);
      entry.reject(error);
      this.abandon(
        new ChannelError(
          this.router.nameOf(this.dst),
          this.dst,
          'a send that waited for the receiver to read was stopped (its timeout or signal), and the sender gave the receiver up',
        ),
      );
    };
    const onAbort = () => give(stop.signal?.reason);
    const timer =
      stop.timeout === undefined
        ? undefined
        : setTimeout(
            () =>
              give(
                new TimeoutError(
                  'a send waiting for the receiver to read',
                  this.router.nameOf(this.dst),
                  stop.timeout as number,
                  'the sender gave the receiver up',
                ),
              ),
            stop.timeout,
          );
    stop.signal?.addEventListener('abort', onAbort, { once: true });
    entry.settled = () => {
      if (timer) clearTimeout(timer);
      stop.signal?.removeEventListener('abort', onAbort);
    };
  }

  /**
   * Sends the next waiting message if it fits `shared`; false when it does
   * not (it waits for credit). Called by the shared window, in turn.
   */
  sendNext(shared: SharedWindow): boolean {
    const next = this.pending[0];
    if (!next || this.failure) return true;
    if (!fits(this.window, shared.messages, shared.bytes, next.data.length)) return false;
    this.pending.shift();
    next.settled?.();
    this.transmit(next.data, next.flags, next.onCredited);
    if (this.failure) next.reject(this.failure);
    else next.resolve();
    if (this.pending.length === 0) {
      this.hold(false);
      if (this.closing && this.failure === undefined) this.sendClose();
    }
    return true;
  }

  private transmit(data: Uint8Array, flags: number, onCredited: (() => void) | undefined): void {
    if (this.creditHandle === 0) {
      const dst = this.dst;
      this.creditHandle = this.router.addHandler((message) => this.onCredit(message), {
        contextId: dst,
        // Credit comes from the receiver's context; a dead message from the
        // receiver's context or a router on the way to it.
        policy: (message, stream) =>
          message.isDead ? admitsDeadAbout(this.router, message, stream, dst) : message.src === dst,
        onClose: (error) => this.fail(error),
      });
    }
    // Counted before it leaves: the receiver's count never exceeds this one.
    this.messages++;
    this.bytes += data.length;
    this.shared.messages++;
    this.shared.bytes += data.length;
    this.transmitted++;
    if (onCredited && this.dst !== this.router.id)
      this.creditWaiters.push({ until: this.transmitted, callback: onCredited });
    this.deliver(flags, data);
  }

  /** Sends to the receiver, naming the credit handle. */
  private deliver(flags: number, data: Uint8Array): void {
    const header = { dst: this.dst, src: this.router.id, auth: this.auth, handle: this.handle };
    this.router.send(new Message({ ...header, replyTo: this.creditHandle, flags }, data));
  }

  private sendClose(): void {
    if (this.closeSent) return;
    this.closeSent = true;
    if (this.creditHandle !== 0) this.router.removeHandler(this.creditHandle);
    // The close goes first: the room it frees is used by messages that arrive after it.
    this.deliver(FLAG_DEAD, encode(SENDER_CLOSED));
    this.leave();
  }

  private onCredit(message: Message): void {
    if (message.isDead) {
      this.fail(new ChannelError(this.router.nameOf(this.dst), this.dst, deadReason(message)));
      return;
    }
    let credit: unknown;
    try {
      credit = decode(message.data);
    } catch {
      credit = undefined;
    }
    if (!Array.isArray(credit) || credit.length !== 2 || !credit.every(isCount)) {
      this.router.warn(
        'handler',
        `${this.router.name}: dropped malformed credit from context ${message.src} for handle ${this.handle}`,
      );
      return;
    }
    // More credit than is in flight is the receiver's mistake, or a lie that
    // would only let this side send into a queue that is not there.
    const messages = Math.min(credit[0] as number, this.messages);
    const bytes = Math.min(credit[1] as number, this.bytes);
    this.messages -= messages;
    this.bytes -= bytes;
    this.shared.messages -= messages;
    this.shared.bytes -= bytes;
    this.credited += messages;
    while ((this.creditWaiters[0]?.until ?? Number.POSITIVE_INFINITY) <= this.credited) {
      (this.creditWaiters.shift() as { callback: () => void }).callback();
    }
    this.shared.pump();
  }

  private fail(error: TendrilError): void {
    if (this.failure) return;
    this.failure = error;
    if (this.creditHandle !== 0) this.router.removeHandler(this.creditHandle);
    for (const waiting of this.pending.splice(0)) {
      waiting.settled?.();
      waiting.reject(error);
    }
    this.hold(false);
    this.leave();
  }

  /** Takes this Sender's count out of the shared window (the receiver does the same on its close or refusal). */
  private leave(): void {
    if (this.left) return;
    this.left = true;
    // No credit comes any more: what is in flight is never known to have been read.
    this.creditWaiters.length = 0;
    const { messages, bytes } = this;
    this.messages = 0;
    this.bytes = 0;
    this.shared.leave(this, messages, bytes);
  }

  /** Keeps the event loop alive while sends wait for credit. */
  private hold(on: boolean): void {
    if (on === this.holding) return;
    this.holding = on;
    if (on) this.router.hold();
    else this.router.release();
  }
}

function isCount(value: unknown): boolean {
  return typeof value === 'number' && Number.isInteger(value) && value >= 0;
}

/** `promise`, marked handled: a caller that does not await it cannot crash the process. */
export function handled<T>(promise: Promise<T>): Promise<T> {
  promise.catch(() => {});
  return promise;
}

/** A promise rejected with `error`, marked handled. */
export function rejected(error: Error): Promise<never> {
  return handled(Promise.reject(error));
}
