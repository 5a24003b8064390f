/**
 * What every tendril error shares: the base class, its stable `code`, and
 * the brand that makes `instanceof` work across copies of the package (two
 * versions in one program, or an error revived from another context): each
 * error carries the names of its classes under a registered symbol, and
 * the classes check that brand, as undici does.
 */

import { escapeTerminalText, KEEP_NEWLINES } from '../terminal-text.js';

/** Where an error keeps the names of the tendril classes it is an instance of. */
const BRANDS: unique symbol = Symbol.for('tendril.errorBrands') as never;

/** Any class. */
type Class = abstract new (...args: never[]) => object;

/** Marks `error` as an instance of `Class` and of every class it extends up to `Error`. */
export function brand(error: object, Class: Class, extra: string[] = []): void {
  const names: string[] = [];
  for (let c: Class | null = Class; c && c !== Error && c !== TypeError && c !== Function.prototype; ) {
    names.push(c.name);
    c = Object.getPrototypeOf(c) as Class | null;
  }
  Object.defineProperty(error, BRANDS, { value: names.concat(extra), enumerable: false, configurable: true });
}

/** Whether `value` carries the brand of class `Class` (see `brand`), else the ordinary prototype check. */
export function isBranded(Class: Class, value: unknown): boolean {
  if (value === null || (typeof value !== 'object' && typeof value !== 'function')) return false;
  const names = (value as { [BRANDS]?: unknown })[BRANDS];
  if (Array.isArray(names)) return names.indexOf(Class.name) !== -1;
  return Function.prototype[Symbol.hasInstance].call(Class, value);
}

/** What an error says, whatever was thrown (even a value whose `String()` throws). */
export function describeError(error: unknown): string {
  try {
    return error instanceof Error ? error.message : String(error);
  } catch {
    return 'an error that could not be described';
  }
}

/**
 * `make()`'s error without capturing a stack trace, which is most of what
 * an error costs (ten times the rest). For errors whose trace would show
 * only tendril's own machinery: an error revived by the decoder (its trace
 * would show the decoder, not where it was thrown remotely), and the
 * errors tendril makes as a matter of course when something ends normally
 * (a Sender closed, a command over).
 */
export function withoutStack<E extends Error>(make: () => E): E {
  const limit = Error.stackTraceLimit;
  if (typeof limit !== 'number') return make();
  try {
    Error.stackTraceLimit = 0;
  } catch {
    // Frozen by the program: the error keeps its stack.
    return make();
  }
  try {
    return make();
  } finally {
    Error.stackTraceLimit = limit;
  }
}

/**
 * Base class of every error tendril throws on purpose. Its message is made
 * inert for a terminal (`escapeTerminalText`, newlines kept): a message
 * quotes what other contexts sent (a remote exception, a command's stderr,
 * a login banner, a name an intermediate chose), and whatever prints the
 * error (`console.error`, an uncaught exception, `util.inspect`, a logger)
 * prints that text as it is.
 */
export class TendrilError extends Error {
  /** Stable machine-readable code, e.g. `'ERR_TENDRIL_CALL'`. */
  readonly code: string;

  /** True for tendril errors of this class or a subclass, from any copy of the package. */
  static override [Symbol.hasInstance](value: unknown): boolean {
    // biome-ignore lint/complexity/noThisInStatic: `this` is the class instanceof asked about, a subclass included.
    return isBranded(this, value);
  }

  /**
   * @param message what happened, where, and what to do; control and
   *   format characters in it are escaped (`\x1b`, `\r`, `\u202e`).
   * @param code the stable `code`.
   * @param options `cause`: the underlying error, if any.
   */
  constructor(message: string, code: string, options?: { cause?: unknown }) {
    super(escapeTerminalText(message, KEEP_NEWLINES));
    // `cause` is assigned by hand: the two-argument Error constructor is
    // missing on the oldest Node a child may run.
    if (options && 'cause' in options) this.cause = options.cause;
    this.name = new.target.name;
    this.code = code;
    brand(this, new.target);
  }
}
