/**
 * Error classes thrown by tendril. Every error a caller can catch is one of
 * these, so programs can branch on `instanceof` rather than on message text.
 *
 * Messages name the context (and host where one is known), say what happened
 * and, where there is one, what to do about it.
 *
 * `instanceof` works across copies of the package (two versions in one
 * program, or an error revived from another context): each error carries
 * the names of its classes under a registered symbol, and the classes
 * check that brand, as undici does.
 */

/** Where an error keeps the names of the tendril classes it is an instance of. */
const BRANDS: unique symbol = Symbol.for('tendril.errorBrands') as never;

/** Any class. */
type Class = abstract new (...args: never[]) => object;

/** Marks `error` as an instance of `Class` and of every class it extends up to `Error`. */
function brand(error: object, Class: Class, extra: string[] = []): void {
  const names: string[] = [];
  for (let c: Class | null = Class; c && c !== Error && c !== TypeError && c !== Function.prototype; ) {
    names.push(c.name);
    c = Object.getPrototypeOf(c) as Class | null;
  }
  Object.defineProperty(error, BRANDS, { value: names.concat(extra), enumerable: false, configurable: true });
}

/** Whether `value` carries the brand of class `Class` (see `brand`), else the ordinary prototype check. */
function isBranded(Class: Class, value: unknown): boolean {
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

/** Base class of every error tendril throws on purpose. */
export class TendrilError extends Error {
  /** Stable machine-readable code, e.g. `'ERR_TENDRIL_CALL'`. */
  readonly code: string;

  /** True for tendril errors of this class or a subclass, from any copy of the package. */
  static override [Symbol.hasInstance](value: unknown): boolean {
    // biome-ignore lint/complexity/noThisInStatic: `this` is the class instanceof asked about, a subclass included.
    return isBranded(this, value);
  }

  /**
   * @param message what happened, where, and what to do.
   * @param code the stable `code`.
   * @param options `cause`: the underlying error, if any.
   */
  constructor(message: string, code: string, options?: { cause?: unknown }) {
    super(message);
    // `cause` is assigned by hand: the two-argument Error constructor is
    // missing on the oldest Node a child may run.
    if (options && 'cause' in options) this.cause = options.cause;
    this.name = new.target.name;
    this.code = code;
    brand(this, new.target);
  }
}

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
   * For tendril's own errors: their data fields (`contextName`,
   * `methodsTried`...), so they can be rebuilt as their class.
   */
  fields?: Record<string, unknown>;
}

/**
 * A function called in another context threw (or its promise rejected).
 * The remote exception's class name, message and stack are kept as fields;
 * the local stack of this error shows where the call was made.
 */
export class CallError extends TendrilError {
  /** Class name of the remote exception, e.g. `'TypeError'`. */
  readonly remoteName: string;
  /** Message of the remote exception. */
  readonly remoteMessage: string;
  /** Stack trace of the remote exception, as text. */
  readonly remoteStack: string;
  /** The remote exception's `code` property, when it was a string. */
  readonly remoteCode: string | undefined;
  /** Name of the context the exception was raised in. */
  readonly contextName: string;
  /** ID of the context the exception was raised in. */
  readonly contextId: number;

  /**
   * @param info the remote exception as it travelled.
   * @param contextName name of the context it was raised in.
   * @param contextId ID of that context.
   */
  constructor(info: RemoteErrorInfo, contextName: string, contextId: number) {
    super(`${info.name}: ${info.message} (raised in context '${contextName}', id ${contextId})`, 'ERR_TENDRIL_CALL');
    this.remoteName = info.name;
    this.remoteMessage = info.message;
    this.remoteStack = info.stack;
    this.remoteCode = info.code;
    this.contextName = contextName;
    this.contextId = contextId;
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
   */
  constructor(what: string, contextName: string, timeoutMs: number) {
    super(
      `${what} in context '${contextName}' timed out after ${timeoutMs} ms; raise the timeout if the work is expected to take longer`,
      'ERR_TENDRIL_TIMEOUT',
    );
    this.timeoutMs = timeoutMs;
    this.contextName = contextName;
  }
}

/**
 * A message could not reach its destination, or the context a reply was
 * awaited from went away (it was shut down, killed, or an intermediate
 * context on the path to it died). Pending calls to that context reject with
 * this error instead of hanging.
 */
export class ChannelError extends TendrilError {
  /** Name of the context that could not be reached, when known. */
  readonly contextName: string;
  /** ID of the context that could not be reached. */
  readonly contextId: number;
  /** Why delivery failed, e.g. `'no route to context 7'`. */
  readonly reason: string;

  /**
   * @param contextName the unreachable context's name.
   * @param contextId its ID.
   * @param reason why delivery failed.
   * @param code the stable `code`; subclasses pass their own.
   */
  constructor(contextName: string, contextId: number, reason: string, code = 'ERR_TENDRIL_CHANNEL') {
    super(`context '${contextName}' (id ${contextId}) is unreachable: ${reason}`, code);
    this.contextName = contextName;
    this.contextId = contextId;
    this.reason = reason;
  }
}

/** The context was disconnected: its stream closed or it was shut down. */
export class ContextDisconnectedError extends ChannelError {
  /**
   * @param contextName the context that went away.
   * @param contextId its ID.
   * @param reason why, e.g. `'end of stream (stream to web1)'`.
   */
  constructor(contextName: string, contextId: number, reason: string) {
    super(contextName, contextId, reason, 'ERR_TENDRIL_DISCONNECTED');
  }
}

/** A message is larger than the router's `maxMessageSize`; nothing was sent. */
export class MessageTooLargeError extends TendrilError {
  /** Size of the refused payload, in bytes. */
  readonly size: number;
  /** The configured limit, in bytes. */
  readonly maxMessageSize: number;

  /** @param what the message, e.g. `"a message to CALL_FUNCTION in context 'web1' (id 3)"`. */
  constructor(size: number, maxMessageSize: number, what: string) {
    super(
      `${what} is ${size} bytes, over maxMessageSize (${maxMessageSize} bytes); send less per call or raise maxMessageSize on the master's Router`,
      'ERR_TENDRIL_MESSAGE_TOO_LARGE',
    );
    this.size = size;
    this.maxMessageSize = maxMessageSize;
  }
}

/**
 * The contexts of one account would make the receiving context hold more
 * than its `maxHeldBytes`: a child and the contexts behind it, or the
 * contexts beyond the receiving context's parent (its siblings and the
 * rest of the tree but its ancestors), which share one account. What they
 * hold: values sent and nobody has read yet, command output kept for a
 * result, service calls waiting for their turn, the entries a transfer
 * remembers. What they sent is refused (a value dropped, a command killed,
 * a call refused, a transfer failed); the stream stays open and everything
 * else carries on.
 */
export class HeldBytesError extends TendrilError {
  /** Name of the context the bytes came through: the child whose account is full, or the parent for the contexts beyond it. */
  readonly contextName: string;
  /** Its ID. */
  readonly contextId: number;
  /**
   * Whom the full account is for: `"context 'web1' (id 3) and the
   * contexts behind it"`, or `"the contexts beyond the parent of 'web2'
   * (...)"`.
   */
  readonly account: string;
  /** Bytes that were asked for, on top of those held. */
  readonly size: number;
  /** Bytes its account held already. */
  readonly heldBytes: number;
  /** The limit, in bytes. */
  readonly maxHeldBytes: number;

  /**
   * @param contextName the context the bytes came through (the child whose account is full, or the parent).
   * @param contextId its ID.
   * @param holder the context that would hold the bytes.
   * @param what what the bytes were for, e.g. `'output of exec cat /dev/zero'`.
   * @param size bytes asked for.
   * @param heldBytes bytes held already.
   * @param maxHeldBytes the limit.
   * @param account whom the account is for; default: the child `contextName` and the contexts behind it.
   */
  constructor(
    contextName: string,
    contextId: number,
    holder: string,
    what: string,
    size: number,
    heldBytes: number,
    maxHeldBytes: number,
    account = `context '${contextName}' (id ${contextId}) and the contexts behind it`,
  ) {
    super(
      `${account} would make '${holder}' hold ${heldBytes + size} bytes with ${size} more for ${what}, over its maxHeldBytes (${maxHeldBytes} bytes); it was refused. Read what they send sooner, or raise the Router's maxHeldBytes option`,
      'ERR_TENDRIL_HELD_BYTES',
    );
    this.contextName = contextName;
    this.contextId = contextId;
    this.account = account;
    this.size = size;
    this.heldBytes = heldBytes;
    this.maxHeldBytes = maxHeldBytes;
  }
}

/** A stream carried bytes that are not valid tendril frames; it was closed. */
export class StreamError extends TendrilError {
  /** @param message what was wrong with the bytes. */
  constructor(message: string) {
    super(message, 'ERR_TENDRIL_STREAM');
  }
}

/**
 * A payload could not be decoded: it is not valid msgpack, nests deeper
 * than the decoder allows, uses an extension or error class name the codec
 * does not accept, or holds a value too costly to build (an oversized
 * bigint). Nothing of it was used.
 */
export class DecodeError extends TendrilError {
  /** @param message what was wrong with the payload, and where (byte offset). */
  constructor(message: string) {
    super(message, 'ERR_TENDRIL_DECODE');
  }
}

/**
 * A context sent a request or reply to a standard handle whose shape is
 * wrong (a missing field, a field of the wrong type, an ID it may not
 * claim). The request was answered with this error; nothing else was affected.
 */
export class ProtocolError extends TendrilError {
  /** Name of the standard handle, e.g. `'ALLOCATE_ID'`. */
  readonly handleName: string;
  /** Name of the context that sent it. */
  readonly contextName: string;

  /**
   * @param handleName the standard handle, e.g. `'CONNECT'`.
   * @param contextName the context that sent the malformed message.
   * @param what what was wrong with it.
   */
  constructor(handleName: string, contextName: string, what: string) {
    // A context a router knows nothing of is named by its ID alone ('context 7').
    const from = /^context \d+$/.test(contextName) ? contextName : `context '${contextName}'`;
    super(`malformed ${handleName} message from ${from}: ${what}`, 'ERR_TENDRIL_PROTOCOL');
    this.handleName = handleName;
    this.contextName = contextName;
  }
}

/**
 * An option has the wrong type or is out of range. Thrown synchronously
 * (or as the rejection of the call it was passed to) before anything is
 * started or sent.
 */
export class InvalidOptionError extends TendrilError {
  /** The option, e.g. `'timeout'` or `'shutdownGrace'`. */
  readonly option: string;

  /**
   * @param option the option's name.
   * @param where what it was passed to, e.g. `'context.callWith()'`.
   * @param expected what it must be, e.g. `'a number of milliseconds from 0 to 2147483647'`.
   * @param value the value given.
   */
  constructor(option: string, where: string, expected: string, value: unknown) {
    super(
      `option ${option} of ${where} must be ${expected}, got ${describeValue(value)}`,
      'ERR_TENDRIL_INVALID_OPTION',
    );
    this.option = option;
  }
}

function describeValue(value: unknown): string {
  if (typeof value === 'string') return JSON.stringify(value.length > 80 ? `${value.slice(0, 80)}...` : value);
  if (typeof value === 'number' || typeof value === 'boolean' || value === null || value === undefined)
    return String(value);
  if (typeof value === 'bigint') return `${value}n`;
  return Array.isArray(value) ? 'an array' : `a ${typeof value}`;
}

/**
 * A value cannot be sent: it is of a type the codec does not carry (a
 * function, a symbol, a class instance, a cyclic structure). Raised at the
 * sender, before anything is sent. See `docs/protocol.md` for the types that
 * are supported.
 */
export class UnsupportedValueError extends TypeError {
  /** Stable machine-readable code. */
  readonly code = 'ERR_TENDRIL_UNSUPPORTED_VALUE';
  /** Where in the value the problem is, e.g. `'args[1].handler'`. */
  readonly path: string;

  /**
   * @param path where in the value, e.g. `'args[1].handler'`.
   * @param what the offending value, described.
   */
  constructor(path: string, what: string) {
    super(
      `cannot send ${what} at ${path}: only null, undefined, booleans, numbers, bigints, strings, Buffers and typed arrays, arrays, plain objects, Maps, Sets, Dates, RegExps and Errors can be sent`,
    );
    this.name = 'UnsupportedValueError';
    this.path = path;
    brand(this, new.target, ['TendrilError']);
  }

  /** True for this error from any copy of the package (it is also a `TendrilError`). */
  static override [Symbol.hasInstance](value: unknown): boolean {
    // biome-ignore lint/complexity/noThisInStatic: `this` is the class instanceof asked about, a subclass included.
    return isBranded(this, value);
  }
}

/**
 * A function given to `call()` reads variables of the scope it was
 * written in. Functions travel as source text and run in another process,
 * where those variables do not exist; nothing was sent.
 */
export class CapturedVariableError extends TypeError {
  /** Stable machine-readable code. */
  readonly code = 'ERR_TENDRIL_CAPTURED_VARIABLE';
  /** The identifiers the function reads from its enclosing scope. */
  readonly names: string[];

  /**
   * @param names the captured identifiers.
   * @param what the function, e.g. `"function 'deploy'"`.
   * @param contextName the context it was to run in.
   */
  constructor(names: string[], what: string, contextName: string) {
    const list = names.map((name) => `'${name}'`).join(', ');
    super(
      `cannot run ${what} in context '${contextName}': it uses ${list} from the scope it was written in, which will not exist there. Functions travel as source text, so pass values as arguments (context.call((${names.join(', ')}) => ..., ${names.join(', ')})), load modules with require() or import() inside the function, and write globals of the target as globalThis.${names[0]}`,
    );
    this.name = 'CapturedVariableError';
    this.names = names;
    brand(this, new.target, ['TendrilError']);
  }

  /** True for this error from any copy of the package (it is also a `TendrilError`). */
  static override [Symbol.hasInstance](value: unknown): boolean {
    // biome-ignore lint/complexity/noThisInStatic: `this` is the class instanceof asked about, a subclass included.
    return isBranded(this, value);
  }
}

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

/** Codes of `ServiceError`: what went wrong with a call to a service. */
export type ServiceErrorCode =
  | 'ERR_TENDRIL_SERVICE_UNKNOWN'
  | 'ERR_TENDRIL_SERVICE_METHOD'
  | 'ERR_TENDRIL_SERVICE_ARGUMENTS'
  | 'ERR_TENDRIL_SERVICE_REFUSED'
  | 'ERR_TENDRIL_SERVICE_BUSY';

/** Who a `ServiceError` is about: the service, the method, where it runs and who called. */
export interface ServiceErrorDetails {
  /** The service's name. */
  service: string;
  /** The method called. */
  method: string;
  /** Name of the context that offers (or lacks) the service. */
  contextName: string;
  /** Name of the calling context, as the serving context knows it. */
  caller: string;
  /** ID of the calling context. */
  callerId: number;
}

/**
 * A call to a service was not run: the context offers no such service
 * (`ERR_TENDRIL_SERVICE_UNKNOWN`), the service has no such method
 * (`ERR_TENDRIL_SERVICE_METHOD`), the service's `validate` rejected the
 * arguments (`ERR_TENDRIL_SERVICE_ARGUMENTS`), its policy does not admit
 * the caller (`ERR_TENDRIL_SERVICE_REFUSED`, "refused by policy"), or it
 * has as many calls waiting as it queues (`ERR_TENDRIL_SERVICE_BUSY`).
 * The service itself carries on. An error a method throws is not one of
 * these: it arrives as it does for `context.call()`.
 */
export class ServiceError extends TendrilError {
  /** One of the `ServiceErrorCode`s. */
  declare readonly code: ServiceErrorCode;
  /** The service's name. */
  readonly service: string;
  /** The method called. */
  readonly method: string;
  /** Name of the context that offers (or lacks) the service. */
  readonly contextName: string;
  /** Name of the calling context, as the serving context knows it. */
  readonly caller: string;
  /** ID of the calling context. */
  readonly callerId: number;

  /**
   * @param code what went wrong.
   * @param message the whole message, naming the service, the context and what to do.
   * @param details the service, method, context and caller.
   */
  constructor(code: ServiceErrorCode, message: string, details: ServiceErrorDetails) {
    super(message, code);
    this.service = details.service;
    this.method = details.method;
    this.contextName = details.contextName;
    this.caller = details.caller;
    this.callerId = details.callerId;
  }
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
 * A module request to a parent failed as a whole: it was refused because
 * the requesting context had too many requests waiting, it was malformed,
 * or the answer could not be sent. Thrown by `require()` and `import()` in
 * the context that asked; nothing is remembered, so asking again later may
 * succeed.
 */
export class ModuleRequestError extends TendrilError {
  /**
   * @param message what the parent said, naming the limit or the problem.
   */
  constructor(message: string) {
    super(message, 'ERR_TENDRIL_MODULE_REQUEST');
  }
}

REVIVABLE.ModuleRequestError = ModuleRequestError;

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
