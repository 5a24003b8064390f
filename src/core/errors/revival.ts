import { brand, TendrilError } from './base.js';
import { CallError, type RemoteErrorInfo, TimeoutError } from './call.js';
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
 * side's; anything else is a `CallError`. The remote side's data is only
 * ever copied into plain fields: no class other than tendril's own is
 * instantiated, and nothing can replace a method or a prototype.
 * @param info the exception as it travelled (untrusted).
 * @param contextName the context it came from.
 * @param contextId its ID.
 */
export function remoteError(info: RemoteErrorInfo, contextName: string, contextId: number): Error {
  const safe: RemoteErrorInfo = {
    name: typeof info?.name === 'string' ? info.name : 'Error',
    // Anything else came from a context that does not follow the protocol; String() of it could even throw.
    message: typeof info?.message === 'string' ? info.message : 'a malformed error (its message is not a string)',
    stack: typeof info?.stack === 'string' ? info.stack : '',
  };
  if (typeof info?.code === 'string') safe.code = info.code;
  // biome-ignore lint/suspicious/noPrototypeBuiltins: Object.hasOwn is missing on the Node 12 to 16.8 a child may run.
  const Class = Object.prototype.hasOwnProperty.call(REVIVABLE, safe.name) ? REVIVABLE[safe.name] : undefined;
  const fields = info?.fields;
  if (!Class || typeof fields !== 'object' || fields === null || Array.isArray(fields)) {
    return new CallError(safe, contextName, contextId);
  }
  const local = new Error(safe.message);
  const error = Object.create(Class.prototype) as Error & Record<string, unknown>;
  brand(error, Class, Class.prototype instanceof TypeError ? ['TendrilError'] : []);
  const define = (key: string, value: unknown, enumerable = true) =>
    Object.defineProperty(error, key, { value, enumerable, writable: true, configurable: true });
  define('message', safe.message, false);
  for (const key of Object.keys(fields).slice(0, MAX_FIELDS)) {
    const value = (fields as Record<string, unknown>)[key];
    if (isField(key, value)) define(key, value);
  }
  if (safe.code !== undefined) define('code', safe.code);
  define('name', safe.name, false);
  const here = (local.stack ?? '').split('\n').slice(1).join('\n');
  define(
    'stack',
    `${safe.stack || `${safe.name}: ${safe.message}`}\n    (raised in context '${contextName}', id ${contextId}; received here:)\n${here}`,
    false,
  );
  return error;
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
/**
 * The data fields tendril's error classes declare: the only ones taken
 * from a remote error (anything else, `toString` say, could make the
 * error misbehave where it is caught).
 */
const FIELDS = new Set([
  'contextName',
  'contextId',
  'reason',
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

/** The data fields of a tendril error worth sending: strings, numbers, booleans and lists of strings. */
function fieldsOf(error: Error): Record<string, unknown> {
  const fields: Record<string, unknown> = {};
  for (const key of Object.keys(error).slice(0, MAX_FIELDS)) {
    const value = (error as unknown as Record<string, unknown>)[key];
    if (isField(key, value)) fields[key] = value;
  }
  return fields;
}

function isField(key: string, value: unknown): boolean {
  if (!FIELDS.has(key)) return false;
  if (typeof value === 'string') return value.length <= MAX_FIELD_LENGTH;
  if (typeof value === 'number' || typeof value === 'boolean' || value === undefined) return true;
  return (
    Array.isArray(value) &&
    value.length <= 1024 &&
    value.every((item) => typeof item === 'string' && item.length <= MAX_FIELD_LENGTH)
  );
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

/** Converts anything thrown into the shape sent back to a caller. */
export function toRemoteErrorInfo(error: unknown): RemoteErrorInfo {
  if (error instanceof Error) {
    const code = (error as { code?: unknown }).code;
    const info: RemoteErrorInfo = {
      name: errorName(error),
      message: String(error.message),
      stack: typeof error.stack === 'string' ? error.stack : '',
    };
    if (typeof code === 'string') info.code = code;
    // biome-ignore lint/suspicious/noPrototypeBuiltins: Object.hasOwn is missing on the Node 12 to 16.8 a child may run.
    const Class = Object.prototype.hasOwnProperty.call(REVIVABLE, info.name) ? REVIVABLE[info.name] : undefined;
    // By brand, so an error of another copy of the package counts too.
    if (Class && error instanceof Class) info.fields = fieldsOf(error);
    return info;
  }
  let message: string;
  try {
    message = String(error);
  } catch {
    message = Object.prototype.toString.call(error);
  }
  return { name: 'NonErrorThrown', message: `a non-Error value was thrown: ${message}`, stack: '' };
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
