import { Packr } from 'msgpackr';
import { checkPayload } from './codec/payload-check.js';
import { prepare } from './codec/prepare.js';
import { beginDecoding, endDecoding } from './codec/references.js';
import { DecodeError } from './errors.js';

/**
 * The payload codec: msgpack via msgpackr, with records off so every payload
 * is self-contained and routers can forward frames without decoding them.
 *
 * Supported values: null, undefined, booleans, numbers, bigints (up to
 * `MAX_BIGINT_BYTES`), strings, Buffers, typed arrays, ArrayBuffers,
 * DataViews, arrays, plain objects (prototype Object.prototype or null; own
 * enumerable string keys, like structuredClone), Maps, Sets, Dates, RegExps,
 * Errors (name, message and cause) and Senders (which arrive bound to the
 * receiving context's router). Anything else is refused at the sender with
 * an `UnsupportedValueError` (a TypeError) rather than silently changed.
 *
 * Decoding treats the bytes as hostile: every failure is a `DecodeError`,
 * and nothing a peer writes can build a class other than the supported
 * ones, nest deeper than encoding allows, or cost much more to build than a
 * string of the same size.
 *
 * This module is the one msgpackr instance and its entry points; codec/
 * holds the parts: the wire forms of Senders (references.ts), Maps and
 * Errors, the check of outgoing values (prepare.ts), the check of incoming
 * bytes (payload-check.ts), and the limits both enforce.
 */

export { MAX_BIGINT_BYTES, MAX_DEPTH, MAX_OBJECTS } from './codec/limits.js';
export { prepareValue } from './codec/prepare.js';
export { type ReceiverReference, setChannelFactory, setSenderFactory } from './codec/references.js';

const packr = new Packr({
  useRecords: false,
  mapsAsObjects: true,
  moreTypes: true,
  structuredClone: false,
  useBigIntExtension: true,
  int64AsType: 'bigint',
});

/**
 * Encodes a value to msgpack bytes.
 * @param path how to name the value in an error, e.g. `'args'`.
 * @throws UnsupportedValueError when the value (or anything inside it) is
 *   not a supported type, nests deeper than `MAX_DEPTH`, or is a bigint
 *   larger than `MAX_BIGINT_BYTES`.
 */
export function encode(value: unknown, path = 'value'): Uint8Array {
  return packr.pack(prepare(value, path, 0, undefined));
}

/** Encodes a value whose parts have all been through `prepareValue`. */
export function encodePrepared(value: unknown): Uint8Array {
  return packr.pack(value);
}

/**
 * Decodes msgpack bytes produced by `encode` (or by a peer). The bytes are
 * checked first (see `checkPayload`), so a hostile payload cannot make the
 * decoder allocate containers larger than the payload, recurse deeper than
 * `MAX_DEPTH`, or use msgpackr's reference and record extensions.
 * @param bytes one msgpack value, exactly.
 * @param router the router Senders in the value are bound to; without one, a Sender is an error.
 * @param authority the auth ID of the message the bytes arrived in; Senders
 *   in the value act with it when it is less trusted than `router`'s own
 *   context (see `Sender`). Default: the router's own.
 * @param references when given, the Senders and Channels the value holds
 *   are pushed onto it as they are made (a call closes them when it settles).
 * @returns the value.
 * @throws DecodeError when the bytes are not a single valid value (saying
 *   what, and at which byte where known), nest too deeply, hold a bigint
 *   over `MAX_BIGINT_BYTES`, a malformed Error, Map or Sender, or a Sender
 *   aimed at a standard handle.
 */
export function decode(bytes: Uint8Array, router?: unknown, authority?: number, references?: unknown[]): unknown {
  checkPayload(bytes);
  beginDecoding(router, authority, references);
  try {
    return packr.unpack(bytes);
  } catch (error) {
    if (error instanceof DecodeError) throw error;
    const what = error instanceof Error ? `${error.name}: ${error.message}` : String(error);
    throw new DecodeError(`undecodable payload of ${bytes.length} bytes: ${what}`);
  } finally {
    endDecoding();
  }
}
