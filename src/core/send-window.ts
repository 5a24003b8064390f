import { decode, encode } from './codec.js';
import { ChannelError, type TendrilError } from './errors.js';
import { FLAG_DEAD, Message } from './message.js';
import { deadReason, type Router } from './router.js';
import { fits, type HighWaterMark } from './window.js';

/** Reason a receiver sees when its sender closed it on purpose. */
export const SENDER_CLOSED = 'closed by sender';

interface Pending {
  data: Uint8Array;
  resolve: () => void;
  reject: (error: Error) => void;
}

const RESOLVED = Promise.resolve();

/**
 * The sending half of a Sender→Receiver credit window. Messages go out
 * while fewer than the receiver's high-water mark are in flight; past it
 * they wait here, in order, until the receiver's owner reads some and the
 * receiver returns credit to this window's credit handle (named in each
 * message's reply-to field). A dead message on that handle, or the
 * receiver's context going away, closes the window with `ChannelError`.
 */
export class SendWindow {
  /** Messages and bytes sent and not yet credited. */
  private messages = 0;
  private bytes = 0;
  private creditHandle = 0;
  private readonly pending: Pending[] = [];
  private closing = false;
  private closeSent = false;
  private failure: TendrilError | undefined;
  private holding = false;

  /**
   * @param router the router of the sending context.
   * @param dst the receiver's context.
   * @param handle the receiver's handle there.
   * @param auth the auth ID messages carry.
   * @param window the receiver's high-water mark.
   */
  constructor(
    private readonly router: Router,
    private readonly dst: number,
    private readonly handle: number,
    private readonly auth: number,
    private readonly window: Readonly<HighWaterMark>,
  ) {}

  /** True once closed by `close()` or by the receiver going away. */
  get closed(): boolean {
    return this.closing || this.failure !== undefined;
  }

  /**
   * Sends an encoded value now if the window has room, else once it has.
   * The promise resolves when the message has been handed to the router,
   * and rejects with `ChannelError` if the window closes first. Marked
   * handled, so a caller that does not await it cannot crash the process.
   */
  send(data: Uint8Array): Promise<void> {
    if (this.failure) return rejected(this.failure);
    if (this.closing) {
      return rejected(
        new ChannelError(this.router.nameOf(this.dst), this.dst, 'the sender was closed before this send'),
      );
    }
    if (this.pending.length === 0 && fits(this.window, this.messages, this.bytes, data.length)) {
      this.transmit(data);
      return this.failure ? rejected(this.failure) : RESOLVED;
    }
    const promise = new Promise<void>((resolve, reject) => this.pending.push({ data, resolve, reject }));
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
    this.fail(error);
    this.sendClose();
  }

  private transmit(data: Uint8Array): void {
    if (this.creditHandle === 0) {
      const dst = this.dst;
      this.creditHandle = this.router.addHandler((message) => this.onCredit(message), {
        contextId: dst,
        // Credit comes from the receiver's context; a dead message from the
        // receiver's context or a router on the way to it.
        policy: (message, stream) =>
          message.isDead ? stream === undefined || stream === this.router.expectedStream(dst) : message.src === dst,
        onClose: (error) => this.fail(error),
      });
    }
    this.messages++;
    this.bytes += data.length;
    this.deliver(0, data);
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
    this.deliver(FLAG_DEAD, encode(SENDER_CLOSED));
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
    this.messages -= Math.min(credit[0] as number, this.messages);
    this.bytes -= Math.min(credit[1] as number, this.bytes);
    this.flush();
  }

  private flush(): void {
    while (this.failure === undefined && this.pending.length > 0) {
      const next = this.pending[0] as Pending;
      if (!fits(this.window, this.messages, this.bytes, next.data.length)) return;
      this.pending.shift();
      this.transmit(next.data);
      if (this.failure) next.reject(this.failure);
      else next.resolve();
    }
    this.hold(false);
    if (this.closing && this.failure === undefined) this.sendClose();
  }

  private fail(error: TendrilError): void {
    if (this.failure) return;
    this.failure = error;
    if (this.creditHandle !== 0) this.router.removeHandler(this.creditHandle);
    for (const waiting of this.pending.splice(0)) waiting.reject(error);
    this.hold(false);
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
