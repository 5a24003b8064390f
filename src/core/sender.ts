import { encode, SENDER_REFERENCE, setSenderFactory } from './codec.js';
import { FLAG_DEAD, Message } from './message.js';
import { type Router, type RouterLike, switchOf } from './router.js';

/** Reason a receiver sees when its sender closed it on purpose. */
export const SENDER_CLOSED = 'closed by sender';

/**
 * The sending end of a one-way channel: delivers values to a handle in a
 * context (a `Receiver` there). Cheap to create; holds no resources.
 *
 * A Sender may itself be sent — as a call argument, say — and arrives bound
 * to the receiving context's router, so remote code can stream values back
 * (only a Sender aimed at a receiver travels: one aimed at a standard handle
 * such as SHUTDOWN is refused when decoded, with `DecodeError`):
 *
 * ```ts
 * const progress = new Receiver<number>(router);
 * const done = child.call(async (out: Sender<number>) => {
 *   for (let i = 1; i <= 3; i++) out.send(i);
 *   out.close();
 * }, progress.toSender());
 * for await (const step of progress) console.log(step);
 * ```
 */
export class Sender<T = unknown> {
  /** The router of the context sending. */
  readonly router: Router;
  /** The context the receiver lives in. */
  readonly contextId: number;
  /** The receiver's handle in that context. */
  readonly handle: number;
  /**
   * The context under whose authority its messages act (their auth ID):
   * this context for a Sender made here, or the less trusted context a
   * decoded Sender came from (see the constructor).
   */
  readonly authority: number;

  /**
   * @param router the router of the context sending (the master's `Router`, or a context's own).
   * @param contextId the context the receiver lives in.
   * @param handle the receiver's handle in that context.
   * @param authority the auth ID of the message this Sender arrived in, when
   *   it was decoded from one. A Sender handed over by a descendant (or any
   *   context that is not this one or an ancestor) keeps that context's
   *   authority, so a child cannot borrow its parent's by having the parent
   *   send for it; from this context or an ancestor it takes this
   *   context's own ID, as the router could not prove an ancestor's
   *   authority on the wire. Default: this context's own ID.
   */
  constructor(router: RouterLike, contextId: number, handle: number, authority?: number) {
    const core = switchOf(router);
    this.router = core;
    this.contextId = contextId;
    this.handle = handle;
    this.authority =
      authority === undefined || authority === core.id || core.parentIds.indexOf(authority) >= 0 ? core.id : authority;
  }

  /**
   * Sends one value.
   * @throws UnsupportedValueError when the value cannot be sent.
   * @throws MessageTooLargeError when it exceeds `maxMessageSize`.
   */
  send(value: T): void {
    this.router.send(
      Message.encoded(
        { dst: this.contextId, src: this.router.id, auth: this.authority, handle: this.handle, replyTo: 0 },
        value,
      ),
    );
  }

  /** Tells the receiver no more values will come; its iteration ends. */
  close(): void {
    this.router.send(
      new Message(
        {
          dst: this.contextId,
          src: this.router.id,
          auth: this.authority,
          handle: this.handle,
          replyTo: 0,
          flags: FLAG_DEAD,
        },
        encode(SENDER_CLOSED),
      ),
    );
  }

  /** How the codec carries a Sender: the receiver's context and handle. */
  get [SENDER_REFERENCE](): [number, number] {
    return [this.contextId, this.handle];
  }

  /** `'Sender(<context id>, <handle>)'`. */
  toString(): string {
    return `Sender(${this.contextId}, ${this.handle})`;
  }
}

setSenderFactory((router, contextId, handle, authority) => new Sender(router as Router, contextId, handle, authority));
