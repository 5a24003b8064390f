import { addExtension, Packr } from 'msgpackr';
import { DecodeError, UnsupportedValueError } from './errors.js';
import { FIRST_DYNAMIC_HANDLE } from './protocol/handles.js';
import { SENDER_REFERENCE } from './symbols.js';

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
 */

/** msgpack extension type used for `Map`, which msgpackr would otherwise decode as a plain object. */
const MAP_EXTENSION = 77;
/**
 * msgpack extension type used for a Sender, `[contextId, handle]` or
 * `[contextId, handle, windowBytes, windowMessages]`, and for a Channel's
 * end, `[contextId, handle, windowBytes, windowMessages, helloHandle]`.
 */
const SENDER_EXTENSION = 78;
/**
 * msgpack extension type used for an Error: a tag wrapping `[name, message,
 * cause]`. tendril's own, not msgpackr's (0x65): msgpackr's extension
 * tables are process-wide, and replacing its Error extension would change
 * how a program's own msgpackr, in the same process, encodes and decodes
 * errors.
 */
const ERROR_EXTENSION = 79;
/** msgpackr's extension type for a bigint beyond 64 bits: big-endian two's complement bytes. */
const BIGINT_EXTENSION = 0x42;
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
/** Bigints in `[BIGINT_MIN, BIGINT_END)` fit in `MAX_BIGINT_BYTES`. */
const BIGINT_END = BigInt(1) << BigInt(MAX_BIGINT_BYTES * 8 - 1);
const BIGINT_MIN = -BIGINT_END;
/** Largest 32-bit header field: context IDs and handles. */
const MAX_HEADER_FIELD = 0xffffffff;

/** A decoded reference to a receiver: where it is and what it admits. */
export interface ReceiverReference {
  /** The context the receiver lives in. */
  contextId: number;
  /** Its handle there. */
  handle: number;
  /** Its window, when the reference carries one: bytes and messages a sender may have in flight. */
  window: { bytes: number; messages: number } | undefined;
  /** For a Channel's end: the handle its peer announces itself on. */
  helloHandle: number | undefined;
}

/**
 * Builds a Sender or Channel bound to the router decoding it; registered by
 * sender.ts and channel.ts. `authority` is the auth ID of the message the
 * reference arrived in (undefined when the caller of `decode` gave none).
 */
type ReferenceFactory = (router: unknown, reference: ReceiverReference, authority: number | undefined) => unknown;
let senderFactory: ReferenceFactory | undefined;
let channelFactory: ReferenceFactory | undefined;
/** Router on whose behalf the current (synchronous) decode runs, and the auth ID of the message decoded. */
let decodingFor: unknown;
let decodingAuthority: number | undefined;
/** Where the current decode lists the Senders and Channels it makes. */
let decodedReferences: unknown[] | undefined;

/** Registers how decoded sender references become Senders. */
export function setSenderFactory(factory: ReferenceFactory): void {
  senderFactory = factory;
}

/** Registers how decoded channel references become Channels. */
export function setChannelFactory(factory: ReferenceFactory): void {
  channelFactory = factory;
}

class WireSender {
  constructor(readonly reference: number[]) {}
}

addExtension({
  Class: WireSender,
  type: SENDER_EXTENSION,
  write: (sender: WireSender) => sender.reference,
  read: (reference: unknown) => {
    if (
      !Array.isArray(reference) ||
      (reference.length !== 2 && reference.length !== 4 && reference.length !== 5) ||
      !reference.every(isHeaderField) ||
      (reference.length > 2 && (reference[2] === 0 || reference[3] === 0))
    ) {
      throw new DecodeError(
        'malformed Sender: expected [context ID, handle], then optionally a window (bytes, messages, both above 0) and a hello handle, all 32-bit unsigned integers',
      );
    }
    const [contextId, handle, bytes, messages, helloHandle] = reference as number[] as [
      number,
      number,
      number?,
      number?,
      number?,
    ];
    // A standard handle (CALL_FUNCTION, SHUTDOWN...) is never a receiver a
    // peer may hand out: sending on it would act on that context directly.
    if (handle < FIRST_DYNAMIC_HANDLE) {
      throw new DecodeError(
        `refused a Sender aimed at standard handle ${handle} of context ${contextId}: only receivers (handles from ${FIRST_DYNAMIC_HANDLE}) can be sent`,
      );
    }
    if (helloHandle !== undefined && helloHandle < FIRST_DYNAMIC_HANDLE) {
      throw new DecodeError(`refused a Channel whose hello handle ${helloHandle} is a standard handle`);
    }
    const factory = helloHandle === undefined ? senderFactory : channelFactory;
    if (decodingFor === undefined || !factory) {
      throw new DecodeError('a Sender or Channel can only be decoded on behalf of a router');
    }
    const made = factory(
      decodingFor,
      {
        contextId,
        handle,
        window: bytes === undefined ? undefined : { bytes, messages: messages as number },
        helloHandle,
      },
      decodingAuthority,
    );
    decodedReferences?.push(made);
    return made;
  },
});

function isHeaderField(value: unknown): boolean {
  return typeof value === 'number' && Number.isInteger(value) && value >= 0 && value <= MAX_HEADER_FIELD;
}

/** Private carrier for a Map's entries; only this module creates it, so user classes are never affected. */
class WireMap {
  constructor(readonly entries: unknown[]) {}
}

addExtension({
  Class: WireMap,
  type: MAP_EXTENSION,
  write: (map: WireMap) => map.entries,
  read: (entries: unknown) => {
    if (!Array.isArray(entries) || entries.length % 2 !== 0) {
      throw new DecodeError('malformed Map: expected an array of keys and values');
    }
    const map = new Map();
    for (let i = 0; i < entries.length; i += 2) map.set(entries[i], entries[i + 1]);
    return map;
  },
});

/**
 * The error classes a remote Error may be rebuilt as, by name. A Map, so a
 * name like `constructor` or `__proto__` finds nothing (msgpackr's own table
 * is a plain object, where such names reach Object.prototype).
 */
const ERROR_CLASSES = new Map<string, ErrorConstructor>();
for (const Class of [Error, EvalError, RangeError, ReferenceError, SyntaxError, TypeError, URIError]) {
  ERROR_CLASSES.set(Class.name, Class);
}
/** AggregateError where this Node has it (15 and newer); its constructor takes the errors first. */
const AggregateErrorClass = (globalThis as { AggregateError?: new (errors: unknown[], message: string) => Error })
  .AggregateError;
if (AggregateErrorClass) ERROR_CLASSES.set('AggregateError', AggregateErrorClass as unknown as ErrorConstructor);

/** An Error as it travels, `[name, message, cause]` (cause prepared); only this module creates it. */
class WireError {
  constructor(readonly fields: [string, string, unknown]) {}
}

/** What travels of an Error: its name, message and cause. */
function errorFields(error: Error): [string, string, unknown] {
  return [
    typeof error.name === 'string' ? error.name : String(error.name),
    typeof error.message === 'string' ? error.message : String(error.message),
    (error as { cause?: unknown }).cause,
  ];
}

function readError(fields: unknown): Error {
  if (
    !Array.isArray(fields) ||
    fields.length < 2 ||
    fields.length > 3 ||
    typeof fields[0] !== 'string' ||
    typeof fields[1] !== 'string'
  ) {
    throw new DecodeError('malformed Error: expected [name, message, cause] with a string name and message');
  }
  return rebuildError(fields[0], fields[1], fields[2]);
}

/**
 * Errors travel as WireErrors (`prepare` turns each into one), so that
 * msgpackr's own Error extension is left alone. A decoded Error is always an
 * instance of Error or one of the built-in error classes; any other name is
 * kept as the `name` property of an Error.
 */
addExtension({ Class: WireError, type: ERROR_EXTENSION, write: (error: WireError) => error.fields, read: readError });

function rebuildError(name: string, message: string, cause: unknown): Error {
  const Class = ERROR_CLASSES.get(name);
  let error: Error;
  if (Class === undefined) {
    error = withoutStack(() => new Error(message));
    error.name = name;
  } else if (Class === (AggregateErrorClass as unknown)) {
    // Its errors do not travel.
    error = withoutStack(
      () => new (AggregateErrorClass as new (errors: unknown[], message: string) => Error)([], message),
    );
  } else {
    error = withoutStack(() => new Class(message));
  }
  // As the two-argument Error constructor does (missing on Node before 16.9): own, not enumerable.
  if (cause !== undefined) {
    Object.defineProperty(error, 'cause', { value: cause, writable: true, configurable: true, enumerable: false });
  }
  return error;
}

/**
 * Builds an error without capturing a stack trace. The trace would show the
 * decoder, not where the error was thrown remotely, and capturing it is
 * most of the cost: ten times that of the rest, about 100 bytes of heap
 * per payload byte for a payload of nothing but Errors.
 */
function withoutStack(build: () => Error): Error {
  const limit = Error.stackTraceLimit;
  if (typeof limit !== 'number') return build();
  try {
    Error.stackTraceLimit = 0;
  } catch {
    // Frozen intrinsics: build it with a trace.
    return build();
  }
  try {
    return build();
  } finally {
    Error.stackTraceLimit = limit;
  }
}

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

/**
 * Validates `value` for sending and returns the form to embed in a larger
 * value passed to `encodePrepared`. Lets callers name parts of a composite
 * payload (`args[1]`, `result`) in errors.
 * @param references when given, the Senders and Channels met are pushed onto it.
 * @throws UnsupportedValueError as for `encode`.
 */
export function prepareValue(value: unknown, path: string, references?: object[]): unknown {
  preparedReferences = references;
  try {
    return prepare(value, path, 0, undefined);
  } finally {
    preparedReferences = undefined;
  }
}

/** Where the current `prepareValue` lists the Senders and Channels it meets. */
let preparedReferences: object[] | undefined;

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
  decodingFor = router;
  decodingAuthority = authority;
  decodedReferences = references;
  try {
    return packr.unpack(bytes);
  } catch (error) {
    if (error instanceof DecodeError) throw error;
    const what = error instanceof Error ? `${error.name}: ${error.message}` : String(error);
    throw new DecodeError(`undecodable payload of ${bytes.length} bytes: ${what}`);
  } finally {
    decodingFor = undefined;
    decodingAuthority = undefined;
    decodedReferences = undefined;
  }
}

/**
 * Validates a value and returns what should be packed: the value itself,
 * or a copy in which Maps, Errors and Senders are replaced by their wire
 * form. Only containers that hold one are copied.
 */
function prepare(value: unknown, path: string, depth: number, seen: Set<object> | undefined): unknown {
  switch (typeof value) {
    case 'bigint':
      if (value < BIGINT_MIN || value >= BIGINT_END) {
        throw new UnsupportedValueError(
          path,
          `a bigint larger than ${MAX_BIGINT_BYTES} bytes (${MAX_BIGINT_BYTES * 8} bits with the sign); send it as a string or Buffer`,
        );
      }
      return value;
    case 'string':
    case 'number':
    case 'boolean':
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
  if (object instanceof Date) return value;
  // A RegExp travels as an array, so it counts as a level like other containers.
  if (depth >= MAX_DEPTH) throw new UnsupportedValueError(path, `a value nested deeper than ${MAX_DEPTH} levels`);
  if (object instanceof RegExp) return value;
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
    const fields = errorFields(object);
    if (fields[2] !== undefined) fields[2] = prepare(fields[2], `${path}.cause`, depth, seen);
    return new WireError(fields);
  }
  const proto = Object.getPrototypeOf(object);
  if (proto !== Object.prototype && proto !== null) {
    const reference = (object as { [SENDER_REFERENCE]?: number[] })[SENDER_REFERENCE];
    if (reference) {
      preparedReferences?.push(object);
      return new WireSender(reference);
    }
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
  BIGINT_EXTENSION,
  ERROR_EXTENSION,
  0x73, // Set
  0x74, // typed array, ArrayBuffer, DataView
  0x78, // RegExp
  0xff, // timestamp (Date)
  MAP_EXTENSION,
  SENDER_EXTENSION,
]);
/**
 * Extensions that are tags: a fixext 1 whose one data byte is filler,
 * followed by the array they wrap as a regular token.
 */
const TAG_EXTENSIONS = new Set([ERROR_EXTENSION, 0x73, 0x78, MAP_EXTENSION, SENDER_EXTENSION]);

/**
 * Walks the msgpack token structure without building values, and refuses
 * (with `DecodeError`, naming the byte) anything the decoder should not be
 * given: a container announcing more elements than bytes remain (each
 * element takes at least one byte), a length past the end, nesting deeper
 * than `MAX_DEPTH` (a tag and the array it wraps count as one level, as
 * when encoding), a map key that is not a string (msgpackr would convert
 * it, at a cost), an extension not in `ALLOWED_EXTENSIONS`, a tag not
 * written as a fixext 1 or wrapping anything but an array, a bigint over
 * `MAX_BIGINT_BYTES`, or anything but exactly one value filling the bytes.
 * Iterative, so hostile nesting cannot overflow the stack here.
 */
/** The state of one `checkPayload` walk. A class, not closures: the walk runs for every message. */
class PayloadCheck {
  private readonly view: DataView;
  private readonly end: number;
  private pos = 0;
  /** Offset of the token being read, for errors. */
  private at = 0;
  // Open levels, innermost at `top`: values still to read in each, and
  // whether it is a map (whose keys come when an even number remain).
  // Level 0 holds the payload's one value.
  private readonly remaining: number[] = [1];
  private readonly isMap: boolean[] = [false];
  private top = 0;
  /** The token being read is the array a tag wraps. */
  private tagged = false;
  /** Values read that become heap objects (see `MAX_OBJECTS`). */
  private objects = 0;

  constructor(private readonly bytes: Uint8Array) {
    this.view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
    this.end = bytes.length;
  }

  private fail(why: string): never {
    throw new DecodeError(`malformed payload at byte ${this.at}: ${why}`);
  }

  private need(n: number): void {
    if (this.pos + n > this.end) this.fail('truncated');
  }

  private skip(n: number): void {
    this.need(n);
    this.pos += n;
  }

  private open(count: number, map: boolean, wrapped: boolean): void {
    if (count > this.end - this.pos)
      this.fail(`container of ${count} elements in ${this.end - this.pos} remaining bytes`);
    // The array a tag wraps takes over the tag's level, which has nothing left to read.
    if (!wrapped && ++this.top > MAX_DEPTH) this.fail(`value nested deeper than ${MAX_DEPTH} levels`);
    this.remaining[this.top] = count;
    this.isMap[this.top] = map;
  }

  private extension(length: number, fixext1: boolean): void {
    this.need(1);
    const type = this.bytes[this.pos] as number;
    if (!ALLOWED_EXTENSIONS.has(type)) this.fail(`extension type ${type} is not accepted`);
    this.pos += 1;
    if (TAG_EXTENSIONS.has(type)) {
      if (!fixext1) this.fail(`tag extension ${type} must be a fixext 1`);
      this.skip(1);
      this.open(1, false, false);
      this.tagged = true;
      return;
    }
    if (type === BIGINT_EXTENSION && (length === 0 || length > MAX_BIGINT_BYTES)) {
      this.fail(`bigint of ${length} bytes: the limit is ${MAX_BIGINT_BYTES}`);
    }
    this.skip(length);
  }

  run(): void {
    while (this.top >= 0) {
      const left = this.remaining[this.top] as number;
      if (left === 0) {
        this.top--;
        continue;
      }
      this.remaining[this.top] = left - 1;
      const isKey = this.isMap[this.top] === true && left % 2 === 0;
      const wrapped = this.tagged;
      this.tagged = false;
      this.at = this.pos;
      this.need(1);
      const token = this.bytes[this.pos++] as number;
      if (isKey && !(token >= 0xa0 && token <= 0xbf) && token !== 0xd9 && token !== 0xda && token !== 0xdb) {
        this.fail(`map key of type 0x${token.toString(16)}: only strings are accepted`);
      }
      if (wrapped && !(token >= 0x90 && token <= 0x9f) && token !== 0xdc && token !== 0xdd) {
        this.fail(`a tag extension must wrap an array, not a value of type 0x${token.toString(16)}`);
      }
      if (token <= 0x7f || token >= 0xe0) continue; // fixint
      // nil, booleans, floats and ints are held inline; everything else is an object.
      const inline = (token >= 0xc0 && token <= 0xc3) || (token >= 0xca && token <= 0xd3);
      if (!inline && ++this.objects > MAX_OBJECTS) {
        this.fail(
          `more than ${MAX_OBJECTS} arrays, maps, strings and binaries in one payload; send large collections as Buffers or in parts`,
        );
      }
      if (token <= 0x8f) this.open((token & 0x0f) * 2, true, wrapped);
      else if (token <= 0x9f) this.open(token & 0x0f, false, wrapped);
      else if (token <= 0xbf) this.skip(token & 0x1f);
      else
        switch (token) {
          case 0xc0:
          case 0xc2:
          case 0xc3:
            break;
          case 0xc4:
          case 0xd9:
            this.need(1);
            this.skip(this.bytes[this.pos++] as number);
            break;
          case 0xc5:
          case 0xda:
            this.need(2);
            this.pos += 2;
            this.skip(this.view.getUint16(this.pos - 2));
            break;
          case 0xc6:
          case 0xdb:
            this.need(4);
            this.pos += 4;
            this.skip(this.view.getUint32(this.pos - 4));
            break;
          case 0xc7:
            this.need(1);
            this.pos += 1;
            this.extension(this.bytes[this.pos - 1] as number, false);
            break;
          case 0xc8:
            this.need(2);
            this.pos += 2;
            this.extension(this.view.getUint16(this.pos - 2), false);
            break;
          case 0xc9:
            this.need(4);
            this.pos += 4;
            this.extension(this.view.getUint32(this.pos - 4), false);
            break;
          case 0xca:
            this.skip(4);
            break;
          case 0xcb:
            this.skip(8);
            break;
          case 0xcc:
          case 0xd0:
            this.skip(1);
            break;
          case 0xcd:
          case 0xd1:
            this.skip(2);
            break;
          case 0xce:
          case 0xd2:
            this.skip(4);
            break;
          case 0xcf:
          case 0xd3:
            this.skip(8);
            break;
          case 0xd4:
            this.extension(1, true);
            break;
          case 0xd5:
            this.extension(2, false);
            break;
          case 0xd6:
            this.extension(4, false);
            break;
          case 0xd7:
            this.extension(8, false);
            break;
          case 0xd8:
            this.extension(16, false);
            break;
          case 0xdc:
            this.need(2);
            this.pos += 2;
            this.open(this.view.getUint16(this.pos - 2), false, wrapped);
            break;
          case 0xdd:
            this.need(4);
            this.pos += 4;
            this.open(this.view.getUint32(this.pos - 4), false, wrapped);
            break;
          case 0xde:
            this.need(2);
            this.pos += 2;
            this.open(this.view.getUint16(this.pos - 2) * 2, true, wrapped);
            break;
          case 0xdf:
            this.need(4);
            this.pos += 4;
            this.open(this.view.getUint32(this.pos - 4) * 2, true, wrapped);
            break;
          default:
            this.fail(`invalid token 0x${token.toString(16)}`);
        }
    }
    if (this.pos !== this.end) {
      this.at = this.pos;
      this.fail(`${this.end - this.pos} trailing bytes after the value`);
    }
  }
}

function checkPayload(bytes: Uint8Array): void {
  new PayloadCheck(bytes).run();
}
