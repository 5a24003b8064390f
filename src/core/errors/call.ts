import { TendrilError } from './base.js';

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
