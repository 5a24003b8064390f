/**
 * Shape checks for values decoded from another context. Each returns the
 * value typed or throws a `Violation` saying what is wrong with it; `serve`
 * and `ask` turn a violation into a `ProtocolError` naming the handle and
 * the context that sent it.
 */

import { escapeTerminalText } from '../terminal-text.js';

/** What is wrong with a decoded request or reply. */
export class Violation extends Error {
  /** @param what the field and what was wrong, e.g. `'count: not an integer'`. */
  constructor(what: string) {
    super(what);
    this.name = 'Violation';
  }
}

/** Longest name (of a context, a method, a host...) accepted, in characters. */
export const MAX_NAME_LENGTH = 256;
/** Longest free text (a reason, a log line piece) accepted, in characters. */
export const MAX_TEXT_LENGTH = 64 * 1024;

/** `value` as a plain record (a decoded msgpack map). */
export function record(value: unknown, what: string): Record<string, unknown> {
  if (typeof value !== 'object' || value === null || Array.isArray(value) || ArrayBuffer.isView(value)) {
    throw new Violation(`${what}: expected an object`);
  }
  return value as Record<string, unknown>;
}

/** `value` as an array of exactly `length` items (or at least `min`, at most `max` when given as a range). */
export function tuple(value: unknown, what: string, min: number, max = min): unknown[] {
  if (!Array.isArray(value) || value.length < min || value.length > max) {
    throw new Violation(`${what}: expected an array of ${min === max ? min : `${min} to ${max}`} items`);
  }
  return value;
}

/** `value` as a string of at most `maxLength` characters. */
export function string(value: unknown, what: string, maxLength = MAX_NAME_LENGTH): string {
  if (typeof value !== 'string') throw new Violation(`${what}: expected a string`);
  if (value.length > maxLength) throw new Violation(`${what}: longer than ${maxLength} characters`);
  return value;
}

/**
 * `value` as a string of at most `maxLength` characters (counted before
 * escaping) that names or describes something for people (a context's
 * name, a host name, why a context went away), made inert for a terminal
 * on one line, its invisible characters escaped too (`escapeTerminalText`
 * with `name`): every error, event and line that quotes it later is safe
 * to print, and no name prints like another.
 */
export function shownString(value: unknown, what: string, maxLength = MAX_NAME_LENGTH): string {
  // Invisible characters too: a name with one added must not print as another's.
  return escapeTerminalText(string(value, what, maxLength), { name: true });
}

/** `value` as an integer from `min` to `max` inclusive. */
export function integer(value: unknown, what: string, min: number, max: number): number {
  if (typeof value !== 'number' || !Number.isInteger(value) || value < min || value > max) {
    throw new Violation(`${what}: expected an integer from ${min} to ${max}`);
  }
  return value;
}

/** `value` as a list of at most `maxItems` strings. */
export function strings(value: unknown, what: string, maxItems: number, maxLength = MAX_TEXT_LENGTH): string[] {
  if (!Array.isArray(value) || value.length > maxItems) {
    throw new Violation(`${what}: expected a list of at most ${maxItems} strings`);
  }
  for (let i = 0; i < value.length; i++) string(value[i], `${what}[${i}]`, maxLength);
  return value as string[];
}

/** Largest context ID or handle number: the header fields are 32-bit. */
export const MAX_ID = 0xffffffff;

/** `value` as a context ID. */
export function contextId(value: unknown, what: string): number {
  return integer(value, what, 0, MAX_ID);
}
