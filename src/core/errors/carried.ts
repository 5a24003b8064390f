import { bigintFits } from '../codec/limits.js';

/**
 * What of an error travels besides its name, message and stack: its own
 * data fields (`error.status`, `error.body`) and its `cause`. The same
 * checks run where an error is sent and where it is received, so a context
 * that does not follow the protocol gets no further than one that does:
 * only plain data of a few types, within bounds, is ever kept, always as a
 * fresh copy, and no key can reach a prototype.
 */

/** Most data fields taken from one error; the rest are dropped. */
const MAX_ERROR_FIELDS = 64;
/** Most properties of one error looked at for fields. */
const MAX_EXAMINED = 16 * MAX_ERROR_FIELDS;
/** Deepest nesting of arrays and objects inside one field; a deeper field is dropped. */
const MAX_FIELD_DEPTH = 8;
/**
 * Most data taken from the fields (and non-Error causes) of one error and
 * its whole cause chain, roughly in bytes (characters of strings and keys,
 * bytes of binaries, 8 per number or container). A field that does not fit
 * in what is left is dropped.
 */
const MAX_FIELDS_SIZE = 64 * 1024;
/** Most causes followed down a chain; the cause past the last is left out. */
export const MAX_CAUSE_DEPTH = 8;

/** What is left of `MAX_FIELDS_SIZE` for one cause chain. */
export interface FieldBudget {
  /** Size units still available. */
  left: number;
}

/** A fresh budget for one error and its cause chain. */
export function fieldBudget(): FieldBudget {
  return { left: MAX_FIELDS_SIZE };
}

/** Returned by `carried` for a value that does not travel. */
export const DROPPED: unique symbol = Symbol('dropped');

/**
 * Names never taken from an error as fields: those carried on their own,
 * and the one key that reaches a prototype when assigned.
 */
const NOT_FIELDS = ['name', 'message', 'stack', 'cause', '__proto__'];

/** Whether `key` may be a field name taken from an error. */
function isFieldName(key: string): boolean {
  return NOT_FIELDS.indexOf(key) === -1;
}

function spend(budget: FieldBudget, size: number): boolean {
  if (budget.left < size) return false;
  budget.left -= size;
  return true;
}

/**
 * A copy of `value` if it is made only of what an error's field may hold
 * (strings, numbers, booleans, null, undefined, bigints, Dates, typed
 * arrays and Buffers, and arrays and plain objects of those, at most
 * `MAX_FIELD_DEPTH` deep) and fits in `budget`; else `DROPPED`. Never
 * throws; Maps, Sets, class instances, functions and Errors are dropped.
 * @param depth how deep `value` is already (0 for a field itself).
 */
export function carried(value: unknown, budget: FieldBudget, depth = 0): unknown {
  try {
    return copy(value, budget, depth);
  } catch {
    // A getter or a proxy that throws, on the side that sends.
    return DROPPED;
  }
}

function copy(value: unknown, budget: FieldBudget, depth: number): unknown {
  switch (typeof value) {
    case 'string':
      return spend(budget, value.length + 1) ? value : DROPPED;
    case 'number':
    case 'boolean':
    case 'undefined':
      return spend(budget, 8) ? value : DROPPED;
    case 'bigint':
      if (!bigintFits(value)) return DROPPED;
      // Hex digits over two: its size in bytes.
      return spend(budget, 8 + (value.toString(16).length >> 1)) ? value : DROPPED;
    case 'object':
      break;
    default:
      return DROPPED;
  }
  if (value === null) return spend(budget, 8) ? null : DROPPED;
  if (value instanceof Date) return spend(budget, 8) ? new Date(value.getTime()) : DROPPED;
  if (ArrayBuffer.isView(value)) return spend(budget, 8 + value.byteLength) ? copyOf(value) : DROPPED;
  if (depth >= MAX_FIELD_DEPTH || !spend(budget, 8)) return DROPPED;
  if (Array.isArray(value)) {
    const items: unknown[] = [];
    // The budget ends a long (or sparse and huge) array: each item costs something.
    for (let i = 0; i < value.length; i++) {
      const item = copy(value[i], budget, depth + 1);
      if (item === DROPPED) return DROPPED;
      items.push(item);
    }
    return items;
  }
  const proto = Object.getPrototypeOf(value);
  if (proto !== Object.prototype && proto !== null) return DROPPED;
  const record: Record<string, unknown> = {};
  for (const key of Object.keys(value)) {
    if (key === '__proto__' || !spend(budget, key.length + 1)) return DROPPED;
    const item = copy((value as Record<string, unknown>)[key], budget, depth + 1);
    if (item === DROPPED) return DROPPED;
    define(record, key, item, true);
  }
  return record;
}

/**
 * The data fields of `source` (an error's own enumerable properties, or a
 * record that travelled) that `carried` keeps, each copied, at most
 * `MAX_ERROR_FIELDS` of them among the first `MAX_EXAMINED` properties;
 * undefined when there are none. Accessors are
 * never called; names `isFieldName` refuses are skipped. Never throws.
 */
export function carriedFields(source: object, budget: FieldBudget): Record<string, unknown> | undefined {
  let fields: Record<string, unknown> | undefined;
  let count = 0;
  let examined = 0;
  let keys: string[];
  try {
    keys = Object.keys(source);
  } catch {
    return undefined;
  }
  for (const key of keys) {
    // A record of a million keys that are all dropped is not walked to the end either.
    if (count >= MAX_ERROR_FIELDS || ++examined > MAX_EXAMINED) break;
    if (!isFieldName(key)) continue;
    let descriptor: PropertyDescriptor | undefined;
    try {
      descriptor = Object.getOwnPropertyDescriptor(source, key);
    } catch {
      continue;
    }
    if (!descriptor || !('value' in descriptor) || !spend(budget, key.length + 1)) continue;
    const value = carried(descriptor.value, budget);
    if (value === DROPPED) continue;
    fields ??= {};
    define(fields, key, value, true);
    count++;
  }
  return fields;
}

/**
 * Names a remote field never takes as an own property of an error, besides
 * those the error already has (its own fields, and every member of its
 * class, `Error` and `Object.prototype`): `cause` is the remote cause, and
 * a `then` would make the error look like a promise.
 */
const NOT_OWN = ['cause', 'then'];

/**
 * Makes each of `given`'s entries (fields that travelled, already checked
 * with `carriedFields`) an own property of `target`, except where
 * `target` already has that name (never over a member: a remote
 * `toString` or `constructor` would break whoever catches the error).
 * @returns all of them, the skipped included, as a frozen record (empty
 *   when `given` is not an object).
 */
export function spreadFields(target: object, given: unknown): Readonly<Record<string, unknown>> {
  const fields: Record<string, unknown> = {};
  if (typeof given === 'object' && given !== null) {
    for (const key of Object.keys(given)) {
      if (key === '__proto__') continue;
      const value = (given as Record<string, unknown>)[key];
      define(fields, key, value, true);
      if (!(key in target) && NOT_OWN.indexOf(key) === -1) define(target, key, value, true);
    }
  }
  return Object.freeze(fields);
}

/** Sets own property `key` of `target` without ever calling a setter (`__proto__` included). */
export function define(target: object, key: string, value: unknown, enumerable: boolean): void {
  Object.defineProperty(target, key, { value, enumerable, writable: true, configurable: true });
}

/**
 * A copy of binary data: a decoded Buffer is a view into the message it
 * came in, which an error kept for long would otherwise keep whole.
 */
function copyOf(view: ArrayBufferView): ArrayBufferView {
  if (Buffer.isBuffer(view)) return Buffer.from(view);
  const bytes = new Uint8Array(view.buffer, view.byteOffset, view.byteLength).slice().buffer;
  if (view instanceof DataView) return new DataView(bytes);
  // The built-in class it is, never its own constructor: a subclass's could run anything.
  for (const Kind of TYPED_ARRAYS) if (view instanceof Kind) return new Kind(bytes);
  return new Uint8Array(bytes);
}

const TYPED_ARRAYS: (new (buffer: ArrayBuffer) => ArrayBufferView)[] = [
  Uint8Array,
  Uint8ClampedArray,
  Int8Array,
  Uint16Array,
  Int16Array,
  Uint32Array,
  Int32Array,
  Float32Array,
  Float64Array,
  ...(typeof BigInt64Array === 'function' ? [BigInt64Array, BigUint64Array] : []),
];
