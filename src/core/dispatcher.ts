import { fileURLToPath } from 'node:url';
import { encodePrepared, prepareValue } from './codec.js';
import { MessageTooLargeError, toRemoteErrorInfo } from './errors.js';
import { compileFunction } from './function-source.js';
import { CALL_FUNCTION } from './handles.js';
import type { Importer } from './importer.js';
import { Message } from './message.js';
import { hasParentAuthority } from './policy.js';
import type { Router } from './router.js';

/**
 * Payload of a CALL_FUNCTION message: a shipped function (`f`) or an export
 * (`e`) of a module (`m`), its arguments, and where its `require()`s resolve.
 */
export interface CallPayload {
  /** Source of the function to run. */
  f?: string;
  /** Path (on the master) of the module whose export `e` to run. */
  m?: string;
  /** Name of the export of `m` to run. */
  e?: string;
  /** Arguments. */
  a: unknown[];
  /**
   * File (a path on the master) the function's `require()` and `import()`
   * resolve from, as if written there: a module, or `<dir>/[tendril call]`.
   */
  b?: string;
  /** Specifiers the function requires literally, fetched before it runs. */
  p?: string[];
}

/** Payload of a call's reply: `[0, result]` or `[1, error info]`. */
export type ReplyPayload = [0, unknown] | [1, ReturnType<typeof toRemoteErrorInfo>];

/**
 * A shipped function that reads a variable of the scope it was written in
 * fails with a bare "x is not defined" where it runs (when the master's
 * check could not tell: a source it cannot parse, a global only it has).
 * Says why, on the error itself, before it travels.
 */
function explainReferenceError(error: unknown): void {
  if (!(error instanceof ReferenceError) || !/^\S+ is not defined$/.test(error.message)) return;
  const firstFrame = /\n\s+at [^\n]*/.exec(error.stack ?? '')?.[0] ?? '';
  if (!firstFrame.includes('tendril-call:')) return;
  error.message +=
    ': functions passed to call() travel as source text and cannot see variables of the scope they were written in; pass values as arguments, and write globals of this context as globalThis.<name>';
}

/** A file URL as a path; a path or specifier unchanged. */
export function toPathOrSpecifier(module: string | URL): string {
  return module instanceof URL || module.startsWith('file:') ? fileURLToPath(module) : module;
}

/** Name of the file a call resolves from when its base is a directory. */
export const CALL_FILE = '[tendril call]';

/** The file name a call's `require()` resolves from: a name in its base directory. */
export function callOrigin(base: string): string {
  return `${base.replace(/\/+$/, '')}/${CALL_FILE}`;
}

/**
 * Runs shipped functions in this context. Calls run concurrently: an async
 * function awaiting IO does not hold up the next call.
 */
export class Dispatcher {
  /**
   * @param importer loads the modules calls need.
   * @param defaultBase directory `require()` resolves from when a call names none.
   * @param onUnreported called with errors of calls that expect no reply (callNoReply).
   */
  constructor(
    private readonly router: Router,
    private readonly importer: Importer,
    private readonly defaultBase: string,
    private readonly onUnreported: (error: unknown) => void,
  ) {
    router.addHandler((message) => this.onCall(message), {
      handle: CALL_FUNCTION,
      policy: hasParentAuthority(router),
    });
  }

  private onCall(message: Message): void {
    let result: unknown;
    try {
      const call = message.unpack(this.router) as CallPayload;
      if (typeof call !== 'object' || call === null || !Array.isArray(call.a)) {
        throw new TypeError('malformed CALL_FUNCTION payload');
      }
      result = typeof call.m === 'string' ? this.callExport(call, call.m, String(call.e)) : this.callFunction(call);
    } catch (error) {
      this.fail(message, error);
      return;
    }
    if (result !== null && typeof result === 'object' && typeof (result as PromiseLike<unknown>).then === 'function') {
      (result as PromiseLike<unknown>).then(
        (value) => this.succeed(message, value),
        (error) => this.fail(message, error),
      );
    } else {
      this.succeed(message, result);
    }
  }

  private callFunction(call: CallPayload): unknown {
    if (typeof call.f !== 'string') throw new TypeError('malformed CALL_FUNCTION payload: no function');
    const factory = compileFunction(call.f);
    const from = typeof call.b === 'string' ? call.b : callOrigin(this.defaultBase);
    const run = () => factory(this.importer.requireFrom(from), this.importer.importFrom(from)).apply(undefined, call.a);
    const preload = Array.isArray(call.p) ? call.p.filter((spec): spec is string => typeof spec === 'string') : [];
    // Literal require()s are fetched up front, in one round trip, so the function need not block on them.
    return preload.length > 0 ? this.importer.prefetch(from, preload, 'require').then(run) : run();
  }

  private async callExport(call: CallPayload, path: string, name: string): Promise<unknown> {
    // An absolute path stands for itself; a specifier resolves from the call's base.
    const from = path.startsWith('/') ? path : typeof call.b === 'string' ? call.b : callOrigin(this.defaultBase);
    const namespace = (await this.importer.import(from, path)) as Record<string, unknown>;
    const value = name === 'default' ? namespace.default : namespace[name];
    if (typeof value !== 'function') {
      const what =
        value === undefined ? 'does not exist' : `is ${value === null ? 'null' : `a ${typeof value}`}, not a function`;
      throw new TypeError(
        `export '${name}' of module ${path} ${what}; only functions can be called through context.import()`,
      );
    }
    return value.apply(namespace, call.a);
  }

  private succeed(message: Message, value: unknown): void {
    if (message.replyTo === 0) return;
    let data: Uint8Array;
    try {
      data = encodePrepared([0, prepareValue(value, 'return value')]);
      if (data.length > this.router.maxMessageSize) {
        throw new MessageTooLargeError(
          data.length,
          this.router.maxMessageSize,
          `the result (as a reply to context ${message.src})`,
        );
      }
    } catch (error) {
      this.fail(message, error);
      return;
    }
    this.send(message, data);
  }

  private fail(message: Message, error: unknown): void {
    explainReferenceError(error);
    if (message.replyTo === 0) {
      this.onUnreported(error);
      return;
    }
    this.send(message, encodePrepared([1, toRemoteErrorInfo(error)]));
  }

  private send(message: Message, data: Uint8Array): void {
    this.router.send(
      new Message(
        { dst: message.src, src: this.router.id, auth: this.router.id, handle: message.replyTo, replyTo: 0, flags: 0 },
        data,
      ),
    );
  }
}
