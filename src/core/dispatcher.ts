import { callOrigin } from './call-base.js';
import { CallStop, runAs } from './call-signal.js';
import { compileFunction, type FunctionFactory, isShippedFrame } from './function-source.js';
import { type Importer, TOOLKIT_MODULE_ID } from './importer.js';
import type { Message } from './message.js';
import type { ProcessState } from './process-state.js';
import { CALL_FUNCTION_SPEC, type CallPayload } from './protocol/call-function.js';
import { CANCEL_CALL_SPEC } from './protocol/cancel-call.js';
import { serve } from './protocol/serve.js';
import type { MessageSwitch } from './switch.js';
import { CALL_SETTLED } from './symbols.js';

/**
 * A shipped function that reads a variable of the scope it was written in
 * fails with a bare "x is not defined" where it runs (when the master's
 * check could not tell: a source it cannot parse, a global only it has).
 * Says why, on the error itself, before it travels.
 */
function explainReferenceError(error: unknown): void {
  if (!(error instanceof ReferenceError) || !/^\S+ is not defined$/.test(error.message)) return;
  const firstFrame = /\n[ \t]+at [^\n]*/.exec(error.stack ?? '')?.[0] ?? '';
  if (!isShippedFrame(firstFrame)) return;
  error.message +=
    ': functions passed to call() travel as source text and cannot see variables of the scope they were written in; pass values as arguments, and write globals of this context as globalThis.<name>';
}

/** Bases whose `require` and `import` are kept; past it the table starts again. */
const MAX_LOADERS = 64;

/** Options of a `Dispatcher`. */
export interface DispatcherOptions {
  /** Directory `require()` resolves from when a call names none. */
  defaultBase: string;
  /** Called with errors of calls that expect no reply (callNoReply). */
  onUnreported: (error: unknown) => void;
  /** The process state user calls are to leave as they found it; none in a job's worker, which runs one call. */
  state?: ProcessState;
  /** Called as a user call starts, before its function runs (the resolver check). */
  beforeCall?: () => void;
}

/**
 * Runs shipped functions in this context. Calls run concurrently: an async
 * function awaiting IO does not hold up the next call.
 */
export class Dispatcher {
  /** The `require` and `import` each base gives calls, like a module's own, kept for the next call. */
  private readonly loaders = new Map<string, [NodeJS.Require, (spec: string) => Promise<unknown>]>();
  /** Calls running that their caller can stop, by `<src>:<reply-to>`. */
  private readonly running = new Map<string, CallStop>();
  private readonly importer: Importer;
  private readonly options: DispatcherOptions;

  /** @param importer loads the modules calls need. */
  constructor(router: MessageSwitch, importer: Importer, options: DispatcherOptions) {
    this.importer = importer;
    this.options = options;
    serve(router, CALL_FUNCTION_SPEC, (call, message) => this.run(call, message), {
      onUnanswered: (error) => this.options.onUnreported(error),
      // A Sender or Channel passed to a call ends with it, so the loop
      // reading the other end always ends, even when the function threw.
      onSettled: (message) => {
        for (const reference of message.references) (reference as { [CALL_SETTLED](): void })[CALL_SETTLED]();
      },
    });
    serve(router, CANCEL_CALL_SPEC, ([replyTo, kind, timeoutMs], message) => {
      this.running.get(`${message.src}:${replyTo}`)?.stop(kind, timeoutMs ?? undefined);
    });
  }

  /** Runs a call and, for a user's call, puts the process back as it was once it settles. */
  private run(call: CallPayload, message: Message): unknown {
    const stop = new CallStop();
    const key = message.replyTo === 0 ? undefined : `${message.src}:${message.replyTo}`;
    if (key !== undefined) this.running.set(key, stop);
    const user = call.m !== TOOLKIT_MODULE_ID;
    if (user) this.options.beforeCall?.();
    let result: unknown;
    try {
      result =
        call.m !== undefined ? this.callExport(call, call.m, String(call.e), stop) : this.callFunction(call, stop);
    } catch (error) {
      explainReferenceError(error);
      this.settled(key, user);
      throw error;
    }
    if (!isThenable(result)) {
      this.settled(key, user);
      return result;
    }
    return Promise.resolve(result).then(
      (value) => {
        this.settled(key, user);
        return value;
      },
      (error: unknown) => {
        explainReferenceError(error);
        this.settled(key, user);
        throw error;
      },
    );
  }

  private settled(key: string | undefined, user: boolean): void {
    if (key !== undefined) this.running.delete(key);
    if (user) this.options.state?.restore();
  }

  private callFunction(call: CallPayload, stop: CallStop): unknown {
    const factory = compileFunction(String(call.f), call.l);
    const from = call.b ?? callOrigin(this.options.defaultBase);
    const preload = call.p ?? [];
    // Literal require()s are fetched up front, in one round trip, so the function need not block on them.
    if (preload.length > 0) {
      return this.importer
        .prefetch(from, preload, 'require')
        .then(() => this.invoke(factory, String(call.f), from, call.a, stop, call.r === 1));
    }
    return this.invoke(factory, String(call.f), from, call.a, stop, call.r === 1);
  }

  /**
   * Calls a compiled function with the `require` and `import` of `from`,
   * made once per base, and the call's `this` (its signal): an arrow
   * function sees it as its lexical `this`.
   */
  private invoke(
    factory: FunctionFactory,
    source: string,
    from: string,
    args: unknown[] | undefined,
    stop: CallStop,
    fresh: boolean,
  ): unknown {
    let loaders = fresh ? this.freshLoaders(from) : this.loaders.get(from);
    if (!loaders) {
      if (this.loaders.size >= MAX_LOADERS) this.loaders.clear();
      loaders = [this.importer.requireFrom(from), this.importer.importFrom(from)];
      this.loaders.set(from, loaders);
    }
    // Only a function that reads `this` gets the call's: V8 names a receiver in
    // every stack frame (`Object.deploy`), which local code called plainly lacks.
    const self = readsThis(factory, source) ? stop.self : undefined;
    const fn = factory.call(self, loaders[0], loaders[1]);
    return runAs(stop, fn as (...args: unknown[]) => unknown, self, args);
  }

  /** The `require` and `import` of `from` in a module cache of the call's own (`CallOptions.fresh`). */
  private freshLoaders(from: string): [NodeJS.Require, (spec: string) => Promise<unknown>] {
    const scope = this.importer.freshScope();
    return [this.importer.requireFrom(from, scope), this.importer.importFrom(from, scope)];
  }

  private async callExport(call: CallPayload, path: string, name: string, stop: CallStop): Promise<unknown> {
    // An absolute path stands for itself; a specifier resolves from the call's base.
    const from = path.startsWith('/') ? path : (call.b ?? callOrigin(this.options.defaultBase));
    const scope = call.r === 1 ? this.importer.freshScope() : undefined;
    const namespace = (await this.importer.import(from, path, scope)) as Record<string, unknown>;
    const value = name === 'default' ? namespace.default : namespace[name];
    if (typeof value !== 'function') {
      const what =
        value === undefined ? 'does not exist' : `is ${value === null ? 'null' : `a ${typeof value}`}, not a function`;
      throw new TypeError(
        `export '${name}' of module ${path} ${what}; only functions can be called through context.import()`,
      );
    }
    return runAs(stop, value as (...args: unknown[]) => unknown, namespace, call.a);
  }
}

/** Whether each compiled function's source mentions `this`, by factory. */
const thisReaders = new WeakMap<FunctionFactory, boolean>();

function readsThis(factory: FunctionFactory, source: string): boolean {
  let reads = thisReaders.get(factory);
  if (reads === undefined) {
    reads = /\bthis\b/.test(source);
    thisReaders.set(factory, reads);
  }
  return reads;
}

function isThenable(value: unknown): value is PromiseLike<unknown> {
  return value !== null && typeof value === 'object' && typeof (value as PromiseLike<unknown>).then === 'function';
}
