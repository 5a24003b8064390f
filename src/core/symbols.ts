/**
 * The symbols that key the core's objects to one another, in one module
 * that imports nothing, so that any part of the core (and the layers above)
 * can name them without importing the class that uses them.
 */

/**
 * Where an object standing for a router (the public `Router` facade) keeps
 * the message switch it drives; `Receiver` and `Sender` accept either.
 */
export const ROUTER_SWITCH: unique symbol = Symbol.for('tendril.routerSwitch') as never;

/**
 * Objects carrying this property travel as a reference to a receiver
 * rather than as data (see `Sender` and `Channel`): its value is the
 * reference, `[contextId, handle]`, optionally followed by the receiver's
 * window (bytes, messages) and, for a Channel, its hello handle.
 */
export const SENDER_REFERENCE: unique symbol = Symbol.for('tendril.senderReference') as never;

/**
 * Where a Sender made by `Receiver.toSender()` (or a Channel) keeps the
 * receiver it feeds, so that a call it is passed to can count on the
 * receiver to wait for the callee's end (see `Receiver`).
 */
export const LOCAL_RECEIVER: unique symbol = Symbol('tendril.localReceiver') as never;

/**
 * What a context calls on each Sender and Channel a call's arguments
 * carried, once the call has settled: the call's use of them is over.
 */
export const CALL_SETTLED: unique symbol = Symbol('tendril.callSettled') as never;

/**
 * What an operation calls on a Sender or Channel whose other side it gives
 * up on (it stopped taking values, or the operation was abandoned): values
 * still waiting for credit are dropped, their sends reject with the error
 * given, and the other side is told this end closed. `close()` would wait
 * for credit that may never come.
 */
export const ABANDON: unique symbol = Symbol('tendril.abandon') as never;

/**
 * Sends bytes through a Sender or Channel as they are, without copying
 * them into an encoded value (a raw message): the receiving end reads them
 * as a `Uint8Array`, as it would the encoded bytes. The caller hands the
 * bytes over and must not change them afterwards (they may still be
 * waiting to be written), unless it is told, by the callback it may pass,
 * that the receiver has read them. Bulk data (file transfers) uses it.
 */
export const SEND_BYTES: unique symbol = Symbol('tendril.sendBytes') as never;
