/**
 * The msgpack extension types of tendril's own wire forms, shared by the
 * modules that register them and the payload check that admits them.
 */

/** msgpack extension type used for `Map`, which msgpackr would otherwise decode as a plain object. */
export const MAP_EXTENSION = 77;
/**
 * msgpack extension type used for a Sender, `[contextId, handle]` or
 * `[contextId, handle, windowBytes, windowMessages]`, and for a Channel's
 * end, `[contextId, handle, windowBytes, windowMessages, helloHandle]`.
 */
export const SENDER_EXTENSION = 78;
/**
 * msgpack extension type used for an Error: a tag wrapping `[name, message,
 * cause]`. tendril's own, not msgpackr's (0x65): msgpackr's extension
 * tables are process-wide, and replacing its Error extension would change
 * how a program's own msgpackr, in the same process, encodes and decodes
 * errors.
 */
export const ERROR_EXTENSION = 79;
/** msgpackr's extension type for a bigint beyond 64 bits: big-endian two's complement bytes. */
export const BIGINT_EXTENSION = 0x42;
