import { UnsupportedValueError } from '../errors.js';
import { SENDER_REFERENCE } from '../symbols.js';
import { bigintFits, MAX_BIGINT_BYTES, MAX_DEPTH } from './limits.js';
import { WireMap } from './maps.js';
import { WireSender } from './references.js';
import { errorFields, WireError } from './wire-errors.js';

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

/**
 * Validates a value and returns what should be packed: the value itself,
 * or a copy in which Maps, Errors and Senders are replaced by their wire
 * form. Only containers that hold one are copied.
 */
export function prepare(value: unknown, path: string, depth: number, seen: Set<object> | undefined): unknown {
  switch (typeof value) {
    case 'bigint':
      if (!bigintFits(value)) {
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
