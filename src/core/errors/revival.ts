import {
  escapeTerminalText,
  KEEP_NEWLINES,
  MAX_REMOTE_TEXT,
  MAX_REMOTE_WORD,
  shownRemoteText,
} from '../terminal-text.js';
import { brand, TendrilError } from './base.js';
import { CallError, type RemoteErrorInfo, TimeoutError } from './call.js';
import {
  carried,
  carriedFields,
  DROPPED,
  define,
  type FieldBudget,
  fieldBudget,
  MAX_CAUSE_DEPTH,
  spreadFields,
} from './carried.js';
import { ChannelError, ContextDisconnectedError } from './delivery.js';
import { HeldBytesError, MessageTooLargeError } from './limits.js';
import { DecodeError, ProtocolError, StreamError } from './malformed.js';
import { ModuleRequestError } from './module-request.js';
import { InvalidOptionError } from './options.js';
import { ServiceError } from './service.js';
import { CapturedVariableError, UnsupportedValueError } from './values.js';

/**
 * The error a caller receives for an exception raised in another context:
 * one of tendril's own error classes (`PasswordError` raised while a `via`
 * context started a child, a `ChannelError` from a call made remotely...)
 * arrives as that class, with its fields, its remote stack and this
 * side's; anything else is a `CallError` with the exception's own data
 * fields (see `CallError.remoteFields`). Its `cause` arrives too: a cause
 * that was an Error is revived the same way (at most `MAX_CAUSE_DEPTH`
 * deep), any other one as its value when that is of a type a field may
 * hold. The remote side's data is only ever copied into plain fields,
 * within the bounds of carried.ts: no class other than tendril's own is
 * instantiated, and nothing can replace a method or a prototype. Its
 * text (name, message, stack, code, and the string fields of a tendril
 * class) is made inert for a terminal here, where it is received
 * (`escapeTerminalText`), so every printer of the error is safe; the data
 * fields of an exception that is not tendril's own stay as they were sent.
 * @param info the exception as it travelled (untrusted: anything at all).
 * @param contextName the context it came from.
 * @param contextId its ID.
 * @returns the error; never throws.
 */
export function remoteError(info: RemoteErrorInfo, contextName: string, contextId: number): Error {
  return revive(info, contextName, contextId, 0, fieldBudget());
}

function revive(info: unknown, contextName: string, contextId: number, depth: number, budget: FieldBudget): Error {
  const travelled: Partial<Record<keyof RemoteErrorInfo, unknown>> = isRecord(info) ? info : {};
  const safe: RemoteErrorInfo = {
    // Kept short (a message may be as long as a message allows) and escaped.
    name: typeof travelled.name === 'string' ? shownRemoteText(travelled.name, MAX_REMOTE_WORD) : 'Error',
    // Anything else came from a context that does not follow the protocol; String() of it could even throw.
    message:
      typeof travelled.message === 'string'
        ? shownRemoteText(travelled.message, MAX_REMOTE_TEXT, KEEP_NEWLINES)
        : 'a malformed error (its message is not a string)',
    stack: typeof travelled.stack === 'string' ? shownRemoteText(travelled.stack, MAX_REMOTE_TEXT, KEEP_NEWLINES) : '',
  };
  if (typeof travelled.code === 'string') safe.code = shownRemoteText(travelled.code, MAX_REMOTE_WORD);
  // biome-ignore lint/suspicious/noPrototypeBuiltins: Object.hasOwn is missing on the Node 12 to 16.8 a child may run.
  const Class = Object.prototype.hasOwnProperty.call(REVIVABLE, safe.name) ? REVIVABLE[safe.name] : undefined;
  const fields = isRecord(travelled.fields) ? travelled.fields : undefined;
  const data = isRecord(travelled.data) ? travelled.data : undefined;
  let error: Error;
  if (Class && fields) error = rebuild(Class, safe, fields, contextName, contextId, budget);
  else {
    // `fields` of an error that is no tendril class came from a context that does not follow the protocol.
    const own = data ?? (Class ? undefined : fields);
    if (own) safe.fields = carriedFields(own, budget);
    error = new CallError(safe, contextName, contextId);
  }
  if (depth < MAX_CAUSE_DEPTH) {
    if (isRecord(travelled.cause)) {
      define(error, 'cause', revive(travelled.cause, contextName, contextId, depth + 1, budget), false);
    } else if ('causeValue' in travelled) {
      const cause = carried(travelled.causeValue, budget);
      if (cause !== DROPPED) define(error, 'cause', cause, false);
    }
  }
  return error;
}

/** A remote tendril error rebuilt as its class, with the fields that class declares. */
function rebuild(
  Class: new (...args: never[]) => Error,
  safe: RemoteErrorInfo,
  fields: Record<string, unknown>,
  contextName: string,
  contextId: number,
  budget: FieldBudget,
): Error {
  const local = new Error(safe.message);
  const error = Object.create(Class.prototype) as Error & Record<string, unknown>;
  brand(error, Class, Class.prototype instanceof TypeError ? ['TendrilError'] : []);
  define(error, 'message', safe.message, false);
  for (const key of Object.keys(fields).slice(0, MAX_FIELDS)) {
    const value = fields[key];
    if (!isField(key, value)) continue;
    // Counted against the error's budget of field data, as any other field is: 16 lists of
    // 1024 strings of 64 Ki characters were a gigabyte.
    const size = textSize(value);
    if (size > budget.left) continue;
    budget.left -= size;
    define(error, key, inert(value), true);
  }
  if (safe.code !== undefined) define(error, 'code', safe.code, true);
  define(error, 'name', safe.name, false);
  const here = (local.stack ?? '').split('\n').slice(1).join('\n');
  define(
    error,
    'stack',
    `${safe.stack || `${safe.name}: ${safe.message}`}\n    (raised in context '${contextName}', id ${contextId}; received here:)\n${here}`,
    false,
  );
  // A CallError relayed from further down the tree: the fields of the exception it stands for.
  if (isRecord(fields.remoteFields)) {
    define(error, 'remoteFields', spreadFields(error, carriedFields(fields.remoteFields, budget)), true);
  }
  return error;
}

/**
 * A declared field's value with its text escaped for a terminal: these
 * fields name and describe (`contextName`, `reason`, `lastOutput`,
 * `remoteMessage`...), as the message does.
 */
function inert(value: unknown): unknown {
  if (typeof value === 'string') return escapeTerminalText(value, KEEP_NEWLINES);
  if (Array.isArray(value)) return value.map((item: string) => escapeTerminalText(item, KEEP_NEWLINES));
  return value;
}

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

/**
 * tendril's error classes by name: a remote exception of one of these
 * names and codes is rebuilt as that class (see `remoteError`).
 */
const REVIVABLE: Record<string, new (...args: never[]) => Error> = {
  TendrilError,
  CallError,
  TimeoutError,
  ChannelError,
  ContextDisconnectedError,
  MessageTooLargeError,
  StreamError,
  DecodeError,
  ProtocolError,
  InvalidOptionError,
  UnsupportedValueError,
  CapturedVariableError,
  ServiceError,
  HeldBytesError,
  ModuleRequestError,
};

/** Most data fields taken from a remote tendril error, and the longest string or list kept. */
const MAX_FIELDS = 16;
const MAX_FIELD_LENGTH = 64 * 1024;
/** Most items of a list field (`methodsTried`, `names`...). */
const MAX_FIELD_ITEMS = 64;
/**
 * The data fields tendril's error classes declare: the only ones taken
 * from a remote error (anything else, `toString` say, could make the
 * error misbehave where it is caught).
 */
const FIELDS = new Set([
  'contextName',
  'contextId',
  'reason',
  'kind',
  'remoteName',
  'remoteMessage',
  'remoteStack',
  'remoteCode',
  'lastOutput',
  'timeoutMs',
  'step',
  'presented',
  'expected',
  'methodsTried',
  'tool',

  'size',
  'maxMessageSize',
  'path',
  'owner',
  'names',
  'handleName',
  'option',
  'service',
  'method',
  'caller',
  'callerId',
  'target',
  'heldBytes',
  'maxHeldBytes',
]);

/**
 * The data fields of a tendril error worth sending: strings, numbers,
 * booleans and lists of strings its class declares, and the fields of the
 * exception a `CallError` stands for.
 */
function fieldsOf(error: Error, budget: FieldBudget): Record<string, unknown> {
  const fields: Record<string, unknown> = {};
  for (const key of Object.keys(error).slice(0, MAX_FIELDS)) {
    const value = (error as unknown as Record<string, unknown>)[key];
    if (isField(key, value)) fields[key] = value;
  }
  const relayed = (error as { remoteFields?: unknown }).remoteFields;
  if (isRecord(relayed)) {
    const kept = carriedFields(relayed, budget);
    if (kept) fields.remoteFields = kept;
  }
  return fields;
}

function isField(key: string, value: unknown): boolean {
  if (!FIELDS.has(key)) return false;
  if (typeof value === 'string') return value.length <= MAX_FIELD_LENGTH;
  if (typeof value === 'number' || typeof value === 'boolean' || value === undefined) return true;
  return (
    Array.isArray(value) &&
    value.length <= MAX_FIELD_ITEMS &&
    value.every((item) => typeof item === 'string' && item.length <= MAX_FIELD_LENGTH)
  );
}

/** Characters of text in a declared field's value (a string, or a list of them); 8 for anything else. */
function textSize(value: unknown): number {
  if (typeof value === 'string') return value.length;
  if (Array.isArray(value)) return value.reduce((sum: number, item: string) => sum + item.length, 0);
  return 8;
}

/**
 * The class name of an error: its `name`, unless that is only the one
 * inherited from `Error` while its class has a name of its own
 * (`class MyError extends Error {}` sets no `name`).
 */
function errorName(error: Error): string {
  const className = error.constructor?.name;
  const name = typeof error.name === 'string' ? error.name : '';
  if ((!name || name === 'Error') && className && className !== 'Error' && className !== 'Object') return className;
  return name || className || 'Error';
}

/**
 * Converts anything thrown into the shape sent back to a caller: an
 * Error's class name, message, stack (without tendril's own frames, see
 * `withoutOwnFrames`) and string `code`; the data fields its class
 * declares for tendril's own errors, its own data fields for any other
 * (see `carriedFields`); and its cause chain, at most `MAX_CAUSE_DEPTH`
 * deep, each Error in it once. Anything else thrown becomes a
 * `NonErrorThrown` describing it. Never throws.
 */
export function toRemoteErrorInfo(error: unknown): RemoteErrorInfo {
  return describeThrown(error, fieldBudget(), [], 0);
}

function describeThrown(error: unknown, budget: FieldBudget, seen: Error[], depth: number): RemoteErrorInfo {
  if (!(error instanceof Error)) {
    let message: string;
    try {
      message = String(error);
    } catch {
      message = Object.prototype.toString.call(error);
    }
    return { name: 'NonErrorThrown', message: `a non-Error value was thrown: ${message}`, stack: '' };
  }
  seen.push(error);
  let info: RemoteErrorInfo;
  let cause: unknown;
  try {
    const code = (error as { code?: unknown }).code;
    const stack = error.stack;
    info = {
      name: errorName(error),
      message: String(error.message),
      stack: typeof stack === 'string' ? withoutOwnFrames(stack) : '',
    };
    if (typeof code === 'string') info.code = code;
    // biome-ignore lint/suspicious/noPrototypeBuiltins: Object.hasOwn is missing on the Node 12 to 16.8 a child may run.
    const Class = Object.prototype.hasOwnProperty.call(REVIVABLE, info.name) ? REVIVABLE[info.name] : undefined;
    // By brand, so an error of another copy of the package counts too.
    if (Class && error instanceof Class) {
      const fields = fieldsOf(error, budget);
      if (fields) info.fields = fields;
    } else {
      const data = carriedFields(error, budget);
      if (data) info.data = data;
    }
    cause = (error as { cause?: unknown }).cause;
  } catch {
    // A getter or a proxy that throws: what could be read of it is not worth a reply that fails.
    return { name: 'Error', message: 'an error that could not be described', stack: '' };
  }
  if (cause === undefined || depth >= MAX_CAUSE_DEPTH) return info;
  if (cause instanceof Error) {
    if (seen.indexOf(cause) === -1) info.cause = describeThrown(cause, budget, seen, depth + 1);
  } else {
    const value = carried(cause, budget);
    if (value !== DROPPED) info.causeValue = value;
  }
  return info;
}

/**
 * A frame of tendril's own code in a context: a function of one of the
 * modules it ships (`tendril:core`, `tendril:toolkit`...), minified and
 * of no use to whoever reads the stack. Not `tendril-call:` (a shipped
 * function whose file is not known).
 */
const OWN_FRAME = /^\s*at (?:.* \()?tendril:[a-z]+:\d+:\d+\)?$/;

/**
 * `stack` without the frames of tendril's own code in a context (see
 * `OWN_FRAME`): a remote stack shows the frames of the code that threw,
 * Node's own, and nothing of the machinery that called it.
 */
export function withoutOwnFrames(stack: string): string {
  if (stack.indexOf('tendril:') === -1) return stack;
  const lines = stack.split('\n');
  const kept: string[] = [];
  for (const line of lines) if (!OWN_FRAME.test(line)) kept.push(line);
  return kept.length === lines.length ? stack : kept.join('\n');
}

/**
 * Adds error classes of another layer (the connection methods' errors,
 * loaded only where children are started) to those a remote error is
 * rebuilt as; see `remoteError`. Their data fields must be among those it
 * takes (`FIELDS`).
 */
export function registerRemoteErrors(classes: Record<string, new (...args: never[]) => Error>): void {
  // The first copy of the package to register a name keeps it: the brands make either copy's errors match.
  for (const name of Object.keys(classes)) REVIVABLE[name] ??= classes[name] as new (...args: never[]) => Error;
}
