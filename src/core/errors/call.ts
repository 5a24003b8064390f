import { escapeTerminalText, KEEP_NEWLINES } from '../terminal-text.js';
import { TendrilError } from './base.js';
import { spreadFields } from './carried.js';

/** Shape of an exception as it travels from the context that threw it. */
export interface RemoteErrorInfo {
  /** Class name of the remote exception, e.g. `'TypeError'`. */
  name: string;
  /** The remote exception's message. */
  message: string;
  /** The remote stack trace, as text; empty when the remote had none. */
  stack: string;
  /** The remote `error.code`, when it had a string code (e.g. `'ENOENT'`). */
  code?: string;
  /**
   * Its own data fields: for tendril's own errors, those their class
   * declares (`contextName`, `methodsTried`...), so they can be rebuilt as
   * that class; for any other error, its own enumerable properties of the
   * types an error's field may hold (`status`, `body`: see `remoteFields`).
   * On the wire, only a tendril error's travel here; another's travel as
   * `data`, so an error of the user's named like a tendril class (got's
   * `TimeoutError`) is never taken for one.
   */
  fields?: Record<string, unknown>;
  /** On the wire: the data fields of an error that is not tendril's own (see `fields`). */
  data?: Record<string, unknown>;
  /** Its `cause`, when that is an Error, as it travelled. */
  cause?: RemoteErrorInfo;
  /** Its `cause`, when that is not an Error but a value a field may hold. */
  causeValue?: unknown;
}

/**
 * A function called in another context threw (or its promise rejected).
 * The remote exception's class name, message, stack and data fields are
 * kept as fields, and its `cause` (when it had one) is a remote error
 * too; the local stack of this error shows where the call was made.
 *
 * The remote exception's text (`remoteName`, `remoteMessage`,
 * `remoteStack`, `remoteCode`, and the message built of them) is made
 * inert for a terminal (`escapeTerminalText`: ESC is written `\x1b`, a
 * bidi override `\u202e`; newlines are kept in the message and stack, not
 * in the name and code), so printing the error cannot drive the terminal.
 * Its data fields (`remoteFields`) are kept as they were sent.
 */
export class CallError extends TendrilError {
  /** Class name of the remote exception, e.g. `'TypeError'`; escaped, on one line. */
  readonly remoteName: string;
  /** Message of the remote exception, escaped (newlines kept). */
  readonly remoteMessage: string;
  /** Stack trace of the remote exception, as text, escaped (newlines kept). */
  readonly remoteStack: string;
  /** The remote exception's `code` property, when it was a string; escaped, on one line. */
  readonly remoteCode: string | undefined;
  /**
   * The remote exception's own data fields, by name (frozen; empty when it
   * had none): `{ status: 404, body: { ... } }` for an error that set
   * `this.status` and `this.body`. Only values of the types a call's
   * arguments may be made of travel (strings, numbers, booleans, null,
   * undefined, bigints, Dates, Buffers and typed arrays, and arrays and
   * plain objects of those, at most 8 levels deep); any other field, and
   * those past 64 fields or 64 KiB, is left out. Each field is also an own
   * property of this error (`error.status`), unless its name is one the
   * error already has (`message`, `code`, `contextName`, `toString`...),
   * `cause` or `then`: those are only here. Kept as they were sent (not
   * escaped): they are the remote code's data, like a call's return
   * value; `util.inspect` (so `console.error(error)`) shows their strings
   * quoted, with control characters escaped, but a program printing them
   * itself escapes them first (`escapeTerminalText`).
   */
  readonly remoteFields: Readonly<Record<string, unknown>>;
  /** Name of the context the exception was raised in. */
  readonly contextName: string;
  /** ID of the context the exception was raised in. */
  readonly contextId: number;

  /**
   * @param info the remote exception as it travelled; its `fields` become
   *   `remoteFields` as given (`remoteError` checks them first), and its
   *   `cause` is not read (`remoteError` revives it).
   * @param contextName name of the context it was raised in.
   * @param contextId ID of that context.
   */
  constructor(info: RemoteErrorInfo, contextName: string, contextId: number) {
    const name = escapeTerminalText(info.name);
    const message = escapeTerminalText(info.message, KEEP_NEWLINES);
    super(`${name}: ${message} (raised in context '${contextName}', id ${contextId})`, 'ERR_TENDRIL_CALL');
    this.remoteName = name;
    this.remoteMessage = message;
    this.remoteStack = escapeTerminalText(info.stack, KEEP_NEWLINES);
    this.remoteCode = info.code === undefined ? undefined : escapeTerminalText(info.code);
    this.contextName = contextName;
    this.contextId = contextId;
    this.remoteFields = spreadFields(this, info.fields);
  }
}

/** An operation did not finish within the time it was given. */
export class TimeoutError extends TendrilError {
  /** The limit that passed, in milliseconds. */
  readonly timeoutMs: number;
  /** Name of the context the operation was waiting on. */
  readonly contextName: string;

  /**
   * @param what the operation, e.g. `'call to deploy()'`.
   * @param contextName the context it waited on.
   * @param timeoutMs the limit that passed, in ms.
   * @param advice what the timeout stopped and what it could not, said after the rest.
   */
  constructor(what: string, contextName: string, timeoutMs: number, advice?: string) {
    super(
      `${what} in context '${contextName}' timed out after ${timeoutMs} ms; ${advice ? `${advice}; ` : ''}raise the timeout if the work is expected to take longer`,
      'ERR_TENDRIL_TIMEOUT',
    );
    this.timeoutMs = timeoutMs;
    this.contextName = contextName;
  }
}
