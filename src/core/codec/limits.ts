/**
 * The codec's limits: what a value may hold, checked before encoding (with
 * `UnsupportedValueError`) and before decoding (with `DecodeError`).
 */

/** Deepest nesting a value may have; deeper values are refused before encoding and before decoding. */
export const MAX_DEPTH = 512;
/**
 * Most containers, strings, binaries and extensions one payload may hold.
 * Each becomes a heap object of some 20 to 50 bytes however few bytes it
 * took on the wire, so this bounds what a payload of tiny values (a
 * million empty arrays) can make the receiver allocate.
 */
export const MAX_OBJECTS = 1 << 21;
/**
 * Largest bigint carried, in bytes of big-endian two's complement: 64 KiB,
 * so from -(2^524287) to 2^524287 - 1. Larger ones are refused at the sender
 * with `UnsupportedValueError` and at the receiver with `DecodeError`:
 * building a bigint costs several times what a string of the same size does,
 * and one huge value would block the event loop for seconds.
 */
export const MAX_BIGINT_BYTES = 64 * 1024;
/**
 * Whether `value` fits in `MAX_BIGINT_BYTES`. Asked of the value itself
 * rather than compared with the bounds: those are two 64 KiB bigints that
 * every process would hold for its whole life.
 */
export function bigintFits(value: bigint): boolean {
  return BigInt.asIntN(MAX_BIGINT_BYTES * 8, value) === value;
}
/** Largest 32-bit header field: context IDs and handles. */
export const MAX_HEADER_FIELD = 0xffffffff;
