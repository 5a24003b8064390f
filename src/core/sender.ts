import { encode, type ReceiverReference, setSenderFactory } from './codec.js';
import { MessageTooLargeError, type TendrilError } from './errors.js';
import { FLAG_RAW } from './message.js';
import { checkOperationOptions, type OperationOptions } from './options.js';
import { SendWindow } from './send-window.js';
import { type MessageSwitch, type SwitchLike, switchOf } from './switch.js';
import { ABANDON, CALL_SETTLED, LOCAL_RECEIVER, ROUTER_SWITCH, SEND_BYTES, SENDER_REFERENCE } from './symbols.js';
import { DEFAULT_HIGH_WATER_MARK, type HighWaterMark, highWaterMark } from './window.js';

// Importers outside the core still name these here; symbols.ts defines them.
export { ABANDON, CALL_SETTLED, LOCAL_RECEIVER } from './symbols.js';

/** What a call tells the receiver of a Sender it carries (implemented by `Receiver`). */
export interface LeaseHolder {
  /** A call to `contextId` carries a Sender of this receiver: expect that context to close it. */
  lease(contextId: number): void;
  /** That call never reached `contextId`: do not wait for it. */
  unlease(contextId: number): void;
}

/** Options of a Sender. */
export interface SenderOptions {
  /**
   * The auth ID of the message this Sender arrived in, when it was decoded
   * from one. A Sender handed over by a descendant (or any context that is
   * not this one or an ancestor) keeps that context's authority, so a child
   * cannot borrow its parent's by having the parent send for it; from this
   * context or an ancestor it takes this context's own ID, as the router
   * could not prove an ancestor's authority on the wire, and so does a
   * Sender aimed back at the context it came from. Default: this
   * context's own ID.
   */
  authority?: number | undefined;
  /**
   * The receiver's window: how much this context may have in flight to
   * the receiver, all its Senders of it together, before `send()` waits.
   * Must match the receiver's `highWaterMark` (a receiver refuses a
   * context that runs past it); `Receiver.toSender()` fills it in.
   * Default 1024 messages and 8 MiB, the receivers' default.
   */
  highWaterMark?: Partial<HighWaterMark> | undefined;
}

/**
 * The sending end of a one-way channel: delivers values to a handle in a
 * context (a `Receiver` there), under flow control. The Senders of one
 * context aimed at one receiver share a credit window: `send()` resolves
 * at once while fewer than the receiver's `highWaterMark` messages (and
 * bytes) are in flight from this context to that receiver, and otherwise
 * when the receiver's owner has read enough of them, so a slow reader
 * slows its producers, across any number of hops, instead of filling
 * memory between them. Each Sender keeps its own order; those waiting for
 * room take turns, a value each.
 *
 * A Sender may itself be sent — as a call argument, say — and arrives bound
 * to the receiving context's router, so remote code can stream values back
 * (only a Sender aimed at a receiver travels: one aimed at a standard handle
 * such as SHUTDOWN is refused when decoded, with `DecodeError`). A Sender
 * that arrives as a call argument is closed when that call returns or
 * throws, so the receiver's `for await` always ends:
 *
 * ```ts
 * const progress = new Receiver<number>(router);
 * const done = child.call(async (out: Sender<number>) => {
 *   for (let i = 1; i <= 3; i++) await out.send(i);
 * }, progress.toSender());
 * for await (const step of progress) console.log(step);
 * await done;
 * ```
 */
export class Sender<T = unknown> {
  /** The message switch of the context sending: internal, reached with `switchOf()`. */
  readonly [ROUTER_SWITCH]: MessageSwitch;
  /** The context the receiver lives in. */
  readonly contextId: number;
  /** The receiver's handle in that context. */
  readonly handle: number;
  /**
   * The context under whose authority its messages act (their auth ID):
   * this context for a Sender made here, or the less trusted context a
   * decoded Sender came from (see `SenderOptions.authority`).
   */
  readonly authority: number;
  /** The receiver's window this Sender keeps to, with the other Senders of this context aimed at that receiver. */
  readonly highWaterMark: Readonly<HighWaterMark>;
  /** Set by `Receiver.toSender()`: the receiver in this context it feeds. */
  [LOCAL_RECEIVER]: LeaseHolder | undefined;
  private sendWindow: SendWindow | undefined;

  /**
   * @param router the router of the context sending (the master's `Router`, or a context's own).
   * @param contextId the context the receiver lives in.
   * @param handle the receiver's handle in that context.
   * @param options authority and window (see `SenderOptions`).
   * @throws InvalidOptionError when `options.highWaterMark` is malformed.
   */
  constructor(router: SwitchLike, contextId: number, handle: number, options: SenderOptions = {}) {
    const core = switchOf(router);
    this[ROUTER_SWITCH] = core;
    this.contextId = contextId;
    this.handle = handle;
    const { authority } = options;
    // A Sender aimed back at the context it came from borrows nothing by
    // acting as this one, and must: a descendant's authority on a message
    // going down to it is refused by the contexts in between.
    this.authority =
      authority === undefined ||
      authority === core.id ||
      authority === contextId ||
      core.parentIds.indexOf(authority) >= 0
        ? core.id
        : authority;
    this.highWaterMark =
      options.highWaterMark === undefined ? DEFAULT_HIGH_WATER_MARK : highWaterMark(options.highWaterMark, 'Sender');
  }

  /** True once closed: by `close()`, by its call settling, or because the receiver went away. */
  get closed(): boolean {
    return this.sendWindow?.closed ?? false;
  }

  /**
   * Sends one value: at once while the window has room, otherwise once the
   * receiver's owner has read enough. Values arrive in the order sent,
   * awaited or not.
   * @returns a promise that resolves when the value has left this Sender
   *   (not when it was read), and rejects with `ChannelError` when the
   *   Sender is closed or the receiver is gone (closed, or its context
   *   disconnected) or refused it (this context ran past the receiver's
   *   window, or past its account there: the reason names `maxHeldBytes`).
   *   Not awaiting it is safe: the rejection is then ignored.
   * @param options `timeout` (ms) and `signal` for the wait for room: past
   *   either, this send rejects (`TimeoutError`, or the signal's reason)
   *   and the Sender gives the receiver up, as `close()` would without
   *   waiting (values still waiting reject with `ChannelError`: they could
   *   not arrive in order). Default: no limit.
   * @throws UnsupportedValueError when the value cannot be sent (synchronously).
   * @throws MessageTooLargeError when it exceeds `maxMessageSize` (synchronously).
   * @throws InvalidOptionError when `options` is malformed (synchronously).
   */
  send(value: T, options?: OperationOptions): Promise<void> {
    const stop = options === undefined ? undefined : checkOperationOptions(options, 'sender.send()');
    const data = encode(value);
    this.checkSize(data);
    return this.window().send(data, 0, undefined, stop);
  }

  /**
   * Sends `bytes` as they are, without copying them (see `SEND_BYTES`): the
   * receiver reads a `Uint8Array`. Otherwise as `send`.
   * @param onCredited called once the receiver (in another context) has
   *   read them: this context no longer holds them, and the caller may
   *   reuse the buffer. Never called if the Sender closes or fails first.
   * @throws MessageTooLargeError when they exceed `maxMessageSize` (synchronously).
   */
  [SEND_BYTES](bytes: Uint8Array, onCredited?: () => void): Promise<void> {
    this.checkSize(bytes);
    return this.window().send(bytes, FLAG_RAW, onCredited);
  }

  /**
   * Tells the receiver no more values will come, after those still waiting
   * for the window; its iteration ends. Does nothing when already closed.
   */
  close(): void {
    this.window().close();
  }

  /** The call this Sender arrived in has settled: close it. */
  [CALL_SETTLED](): void {
    this.close();
  }

  /** Gives up on the receiver (see `ABANDON`): waiting and later sends reject with `error`. */
  [ABANDON](error: TendrilError): void {
    this.window().abandon(error);
  }

  /** How the codec carries a Sender: the receiver's context, handle and window. */
  get [SENDER_REFERENCE](): number[] {
    return [this.contextId, this.handle, this.highWaterMark.bytes, this.highWaterMark.messages];
  }

  /** `'Sender(<context id>, <handle>)'`. */
  toString(): string {
    return `Sender(${this.contextId}, ${this.handle})`;
  }

  private checkSize(data: Uint8Array): void {
    if (data.length > this[ROUTER_SWITCH].maxMessageSize) {
      throw new MessageTooLargeError(
        data.length,
        this[ROUTER_SWITCH].maxMessageSize,
        `a value sent to handle ${this.handle} of context '${this[ROUTER_SWITCH].nameOf(this.contextId)}'`,
      );
    }
  }

  private window(): SendWindow {
    if (!this.sendWindow) {
      this.sendWindow = new SendWindow(
        this[ROUTER_SWITCH],
        this.contextId,
        this.handle,
        this.authority,
        this.highWaterMark,
      );
    }
    return this.sendWindow;
  }
}

setSenderFactory(
  (router, reference: ReceiverReference, authority) =>
    new Sender(router as MessageSwitch, reference.contextId, reference.handle, {
      authority,
      ...(reference.window && { highWaterMark: reference.window }),
    }),
);
