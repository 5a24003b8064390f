import { addExtension, Packr } from 'msgpackr';
import { UnsupportedValueError } from './errors.js';

/**
 * The payload codec: msgpack via msgpackr, with records off so every payload
 * is self-contained and routers can forward frames without decoding them.
 *
 * Supported values: null, undefined, booleans, numbers, bigints (any size),
 * strings, Buffers, typed arrays, ArrayBuffers, DataViews, arrays, plain
 * objects (prototype Object.prototype or null; own enumerable string keys,
 * like structuredClone), Maps, Sets, Dates, RegExps, Errors (name, message
 * and cause) and Senders (which arrive bound to the receiving context's
 * router). Anything else is refused at the sender with an
 * `UnsupportedValueError` (a TypeError) rather than silently changed.
 */

/** msgpack extension type used for `Map`, which msgpackr would otherwise decode as a plain object. */
const MAP_EXTENSION = 77;
/** msgpack extension type used for a Sender: `[contextId, handle]`. */
const SENDER_EXTENSION = 78;
/** Deepest nesting a value may have; deeper values are refused before encoding. */
const MAX_DEPTH = 512;

/**
 * Objects carrying this property travel as a reference to a receiver,
 * `[contextId, handle]`, rather than as data (see `Sender`).
 */
export const SENDER_REFERENCE: unique symbol = Symbol.for('tendril.senderReference') as never;

/** Builds a Sender bound to the router decoding it; registered by sender.ts. */
type SenderFactory = (router: unknown, contextId: number, handle: number) => unknown;
let senderFactory: SenderFactory | undefined;
/** Router on whose behalf the current (synchronous) decode runs. */
let decodingFor: unknown;

/** Registers how decoded sender references become Senders. */
export function setSenderFactory(factory: SenderFactory): void {
  senderFactory = factory;
}

class WireSender {
  constructor(readonly reference: [number, number]) {}
}

addExtension({
  Class: WireSender,
  type: SENDER_EXTENSION,
  write: (sender: WireSender) => sender.reference,
  read: (reference: unknown) => {
    if (
      !Array.isArray(reference) ||
      reference.length !== 2 ||
      !Number.isInteger(reference[0]) ||
      !Number.isInteger(reference[1])
    ) {
      throw new Error('malformed Sender extension');
    }
    if (decodingFor === undefined || !senderFactory) {
      throw new Error('a Sender can only be decoded on behalf of a router');
    }
    return senderFactory(decodingFor, reference[0], reference[1]);
  },
});

/** Private carrier for a Map's entries; only this module creates it, so user classes are never affected. */
class WireMap {
  constructor(readonly entries: unknown[]) {}
}

addExtension({
  Class: WireMap,
  type: MAP_EXTENSION,
  write: (map: WireMap) => map.entries,
  read: (entries: unknown) => {
    if (!Array.isArray(entries) || entries.length % 2 !== 0) throw new Error('malformed Map extension');
    const map = new Map();
    for (let i = 0; i < entries.length; i += 2) map.set(entries[i], entries[i + 1]);
    return map;
  },
});

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
 * @throws UnsupportedValueError when the value (or anything inside it) is not a supported type.
 */
export function encode(value: unknown, path = 'value'): Uint8Array {
  return packr.pack(prepare(value, path, 0, undefined));
}

/**
 * Validates `value` for sending and returns the form to embed in a larger
 * value passed to `encodePrepared`. Lets callers name parts of a composite
 * payload (`args[1]`, `result`) in errors.
 * @throws UnsupportedValueError as for `encode`.
 */
export function prepareValue(value: unknown, path: string): unknown {
  return prepare(value, path, 0, undefined);
}

/** Encodes a value whose parts have all been through `prepareValue`. */
export function encodePrepared(value: unknown): Uint8Array {
  return packr.pack(value);
}

/**
 * Decodes msgpack bytes produced by `encode` (or by a peer). The bytes are
 * checked first, so a hostile payload cannot make the decoder allocate
 * containers larger than the payload or use msgpackr's reference and record
 * extensions.
 * @param router the router Senders in the value are bound to; without one, a Sender is an error.
 * @throws Error when the bytes are not a single valid value.
 */
export function decode(bytes: Uint8Array, router?: unknown): unknown {
  checkPayload(bytes);
  decodingFor = router;
  try {
    return packr.unpack(bytes);
  } finally {
    decodingFor = undefined;
  }
}

/**
 * Validates a value and returns what should be packed: the value itself,
 * or a copy in which Maps are replaced by their wire form. Only containers
 * that hold a Map are copied.
 */
function prepare(value: unknown, path: string, depth: number, seen: Set<object> | undefined): unknown {
  switch (typeof value) {
    case 'string':
    case 'number':
    case 'boolean':
    case 'bigint':
    case 'undefined':
      return value;
    case 'function':
      throw new UnsupportedValueError(path, `a function (${(value as { name?: string }).name || 'anonymous'})`);
    case 'symbol':
      throw new UnsupportedValueError(path, `a symbol (${String(value)})`);
  }
  if (value === null) return null;
  const object = value as object;
  if (ArrayBuffer.isView(object) || object instanceof ArrayBuffer) return value;
  if (object instanceof Date || object instanceof RegExp) return value;
  if (depth >= MAX_DEPTH) throw new UnsupportedValueError(path, `a value nested deeper than ${MAX_DEPTH} levels`);
  if (!seen) seen = new Set();
  if (seen.has(object)) throw new UnsupportedValueError(path, 'a cyclic reference');
  seen.add(object);
  try {
    return prepareObject(object, path, depth + 1, seen);
  } finally {
    seen.delete(object);
  }
}

function prepareObject(object: object, path: string, depth: number, seen: Set<object>): unknown {
  if (Array.isArray(object)) {
    let copy: unknown[] | undefined;
    for (let i = 0; i < object.length; i++) {
      const item = object[i];
      const prepared = prepare(item, `${path}[${i}]`, depth, seen);
      if (prepared !== item && !copy) copy = object.slice(0, i);
      if (copy) copy.push(prepared);
    }
    return copy ?? object;
  }
  if (object instanceof Map) {
    const entries: unknown[] = [];
    let i = 0;
    for (const [key, item] of object) {
      entries.push(
        prepare(key, `${path}.<key ${i}>`, depth, seen),
        prepare(item, `${path}.get(<key ${i}>)`, depth, seen),
      );
      i++;
    }
    return new WireMap(entries);
  }
  if (object instanceof Set) {
    let changed = false;
    const items: unknown[] = [];
    let i = 0;
    for (const item of object) {
      const prepared = prepare(item, `${path}.<member ${i++}>`, depth, seen);
      if (prepared !== item) changed = true;
      items.push(prepared);
    }
    return changed ? new Set(items) : object;
  }
  if (object instanceof Error) {
    const cause = (object as { cause?: unknown }).cause;
    if (cause !== undefined) prepare(cause, `${path}.cause`, depth, seen);
    return object;
  }
  const proto = Object.getPrototypeOf(object);
  if (proto !== Object.prototype && proto !== null) {
    const reference = (object as { [SENDER_REFERENCE]?: [number, number] })[SENDER_REFERENCE];
    if (reference) return new WireSender(reference);
    const name = proto?.constructor?.name;
    throw new UnsupportedValueError(
      path,
      `an instance of class ${name || '(anonymous)'}; convert it to a plain object (for example with a toJSON-style method) before sending`,
    );
  }
  let copy: Record<string, unknown> | undefined;
  const record = object as Record<string, unknown>;
  const keys = Object.keys(record);
  for (let i = 0; i < keys.length; i++) {
    const key = keys[i] as string;
    const item = record[key];
    const prepared = prepare(item, `${path}.${key}`, depth, seen);
    if (prepared !== item && !copy) {
      copy = proto === null ? Object.create(null) : {};
      for (let j = 0; j < i; j++) (copy as Record<string, unknown>)[keys[j] as string] = record[keys[j] as string];
    }
    if (copy) copy[key] = prepared;
  }
  return copy ?? object;
}

/** Extension types the decoder accepts; anything else is refused before decoding. */
const ALLOWED_EXTENSIONS = new Set([
  0x00, // undefined
  0x42, // big bigint
  0x65, // Error
  0x73, // Set
  0x74, // typed array, ArrayBuffer, DataView
  0x78, // RegExp
  0xff, // timestamp (Date)
  MAP_EXTENSION,
  SENDER_EXTENSION,
]);

/**
 * Walks the msgpack token structure without building values: every
 * container must fit in the bytes that remain (each element takes at least
 * one byte), every length must lie within the payload, only allowed
 * extensions may appear, and exactly one value must fill the payload.
 */
function checkPayload(bytes: Uint8Array): void {
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  const end = bytes.length;
  let pos = 0;
  // Number of values still to read; containers add their element counts.
  let pending = 1;
  const fail = (why: string): never => {
    throw new Error(`malformed payload at byte ${pos}: ${why}`);
  };
  const need = (n: number) => {
    if (pos + n > end) fail('truncated');
  };
  const container = (count: number) => {
    if (count > end - pos) fail(`container of ${count} elements in ${end - pos} remaining bytes`);
    pending += count;
  };
  const skip = (n: number) => {
    need(n);
    pos += n;
  };
  const extension = (length: number) => {
    need(1);
    const type = bytes[pos] as number;
    if (!ALLOWED_EXTENSIONS.has(type)) fail(`extension type ${type} is not accepted`);
    pos += 1;
    if (type === 0x65 || type === 0x73 || type === 0x78 || type === MAP_EXTENSION || type === SENDER_EXTENSION) {
      // These are tags: the value they wrap follows as a regular token.
      if (length !== 1) fail(`tag extension ${type} with length ${length}`);
      pos += 1;
      pending += 1;
      return;
    }
    skip(length);
  };
  while (pending > 0) {
    pending--;
    need(1);
    const token = bytes[pos++] as number;
    if (token <= 0x7f || token >= 0xe0) continue; // fixint
    if (token <= 0x8f) container((token & 0x0f) * 2);
    else if (token <= 0x9f) container(token & 0x0f);
    else if (token <= 0xbf) skip(token & 0x1f);
    else
      switch (token) {
        case 0xc0:
        case 0xc2:
        case 0xc3:
          break;
        case 0xc4:
        case 0xd9:
          need(1);
          skip(bytes[pos++] as number);
          break;
        case 0xc5:
        case 0xda:
          need(2);
          pos += 2;
          skip(view.getUint16(pos - 2));
          break;
        case 0xc6:
        case 0xdb:
          need(4);
          pos += 4;
          skip(view.getUint32(pos - 4));
          break;
        case 0xc7:
          need(1);
          pos += 1;
          extension(bytes[pos - 1] as number);
          break;
        case 0xc8:
          need(2);
          pos += 2;
          extension(view.getUint16(pos - 2));
          break;
        case 0xc9:
          need(4);
          pos += 4;
          extension(view.getUint32(pos - 4));
          break;
        case 0xca:
          skip(4);
          break;
        case 0xcb:
          skip(8);
          break;
        case 0xcc:
        case 0xd0:
          skip(1);
          break;
        case 0xcd:
        case 0xd1:
          skip(2);
          break;
        case 0xce:
        case 0xd2:
          skip(4);
          break;
        case 0xcf:
        case 0xd3:
          skip(8);
          break;
        case 0xd4:
          extension(1);
          break;
        case 0xd5:
          extension(2);
          break;
        case 0xd6:
          extension(4);
          break;
        case 0xd7:
          extension(8);
          break;
        case 0xd8:
          extension(16);
          break;
        case 0xdc:
          need(2);
          pos += 2;
          container(view.getUint16(pos - 2));
          break;
        case 0xdd:
          need(4);
          pos += 4;
          container(view.getUint32(pos - 4));
          break;
        case 0xde:
          need(2);
          pos += 2;
          container(view.getUint16(pos - 2) * 2);
          break;
        case 0xdf:
          need(4);
          pos += 4;
          container(view.getUint32(pos - 4) * 2);
          break;
        default:
          fail(`invalid token 0x${token.toString(16)}`);
      }
  }
  if (pos !== end) fail(`${end - pos} trailing bytes after the value`);
}
