import { addExtension } from 'msgpackr';
import { DecodeError, withoutStack } from '../errors.js';
import { KEEP_NEWLINES, MAX_REMOTE_TEXT, MAX_REMOTE_WORD, shownRemoteText } from '../terminal-text.js';
import { ERROR_EXTENSION } from './extension-types.js';

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

/** An Error as it travels, `[name, message, cause]` (cause prepared); only the codec creates it. */
export class WireError {
  /** `[name, message, cause]`. */
  readonly fields: [string, string, unknown];
  /** @param fields `[name, message, cause]`, the cause prepared. */
  constructor(fields: [string, string, unknown]) {
    this.fields = fields;
  }
}

/** What travels of an Error: its name, message and cause. */
export function errorFields(error: Error): [string, string, unknown] {
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
  // An error's text is printed with it (its stack starts with it): escaped, as a remote exception's is.
  return rebuildError(
    shownRemoteText(fields[0], MAX_REMOTE_WORD),
    shownRemoteText(fields[1], MAX_REMOTE_TEXT, KEEP_NEWLINES),
    fields[2],
  );
}

/**
 * Errors travel as WireErrors (`prepare` turns each into one), so that
 * msgpackr's own Error extension is left alone. A decoded Error is always an
 * instance of Error or one of the built-in error classes; any other name is
 * kept as the `name` property of an Error. Its name and message are made
 * inert for a terminal (`escapeTerminalText`), as those of a remote
 * exception are: a value received is often printed.
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
