import { TendrilError } from './base.js';

/** A message is larger than the router's `maxMessageSize`; nothing was sent. */
export class MessageTooLargeError extends TendrilError {
  /** Size of the refused payload, in bytes. */
  readonly size: number;
  /** The configured limit, in bytes. */
  readonly maxMessageSize: number;

  /** @param what the message, e.g. `"a message to CALL_FUNCTION in context 'web1' (id 3)"`. */
  constructor(size: number, maxMessageSize: number, what: string) {
    super(
      `${what} is ${size} bytes, over maxMessageSize (${maxMessageSize} bytes); send less per call or raise maxMessageSize on the master's Router`,
      'ERR_TENDRIL_MESSAGE_TOO_LARGE',
    );
    this.size = size;
    this.maxMessageSize = maxMessageSize;
  }
}

/**
 * The contexts of one account would make the receiving context hold more
 * than its `maxHeldBytes`: a child and the contexts behind it, or the
 * contexts beyond the receiving context's parent (its siblings and the
 * rest of the tree but its ancestors), which share one account. What they
 * hold: values sent and nobody has read yet, command output kept for a
 * result, service calls waiting for their turn, the entries a transfer
 * remembers. What they sent is refused (a value dropped, a command killed,
 * a call refused, a transfer failed); the stream stays open and everything
 * else carries on.
 */
export class HeldBytesError extends TendrilError {
  /** Name of the context the bytes came through: the child whose account is full, or the parent for the contexts beyond it. */
  readonly contextName: string;
  /** Its ID. */
  readonly contextId: number;
  /**
   * Whom the full account is for: `"context 'web1' (id 3) and the
   * contexts behind it"`, or `"the contexts beyond the parent of 'web2'
   * (...)"`.
   */
  readonly account: string;
  /** Bytes that were asked for, on top of those held. */
  readonly size: number;
  /** Bytes its account held already. */
  readonly heldBytes: number;
  /** The limit, in bytes. */
  readonly maxHeldBytes: number;

  /**
   * @param contextName the context the bytes came through (the child whose account is full, or the parent).
   * @param contextId its ID.
   * @param holder the context that would hold the bytes.
   * @param what what the bytes were for, e.g. `'output of exec cat /dev/zero'`.
   * @param size bytes asked for.
   * @param heldBytes bytes held already.
   * @param maxHeldBytes the limit.
   * @param account whom the account is for; default: the child `contextName` and the contexts behind it.
   */
  constructor(
    contextName: string,
    contextId: number,
    holder: string,
    what: string,
    size: number,
    heldBytes: number,
    maxHeldBytes: number,
    account = `context '${contextName}' (id ${contextId}) and the contexts behind it`,
  ) {
    super(
      `${account} would make '${holder}' hold ${heldBytes + size} bytes with ${size} more for ${what}, over its maxHeldBytes (${maxHeldBytes} bytes); it was refused. Read what they send sooner, or raise the Router's maxHeldBytes option`,
      'ERR_TENDRIL_HELD_BYTES',
    );
    this.contextName = contextName;
    this.contextId = contextId;
    this.account = account;
    this.size = size;
    this.heldBytes = heldBytes;
    this.maxHeldBytes = maxHeldBytes;
  }
}
