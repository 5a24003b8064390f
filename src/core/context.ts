import { dirname, join } from 'node:path';
import { DEFAULT_SHUTDOWN_GRACE } from './broker.js';
import { toPathOrSpecifier } from './call-base.js';
import { callPreparationOf } from './call-preparation.js';
import { encodePrepared, prepareValue } from './codec.js';
import {
  CapturedVariableError,
  ChannelError,
  ContextDisconnectedError,
  InvalidOptionError,
  MessageTooLargeError,
  TimeoutError,
} from './errors.js';
import { TOOLKIT_MODULE_ID } from './importer.js';
import { Message } from './message.js';
import {
  abortSignal,
  boolean,
  checkOperationOptions,
  location,
  milliseconds,
  type OperationOptions,
  optionsObject,
} from './options.js';

import { CALL_FUNCTION_SPEC, type CallPayload } from './protocol/call-function.js';
import { CALL_SERVICE_SPEC, type ServiceRequest } from './protocol/call-service.js';
import { CANCEL_CALL_SPEC, type CancelCallRequest } from './protocol/cancel-call.js';
import { type ImporterStats, MODULE_STATS_SPEC } from './protocol/module-stats.js';
import { PING_SPEC } from './protocol/ping.js';
import { ask, openReply } from './protocol/serve.js';
import { STOP_CHILD_SPEC } from './protocol/stop-child.js';
import type { LeaseHolder } from './sender.js';
import type { RemoteService, ServiceArgs, ServiceMethodOf, ServiceOf, ServiceResult } from './services.js';
import { type MessageSwitch, type SwitchLike, switchOf } from './switch.js';
import { LOCAL_RECEIVER } from './symbols.js';

// biome-ignore lint/suspicious/noExplicitAny: parameter types are inferred from the caller's function.
type AnyFunction = (...args: any[]) => unknown;

/**
 * The functions a module exports, as seen through `context.import()`: each
 * runs in the context and returns a promise of its (awaited) result.
 * Exports that are not functions are left out.
 */
export type RemoteModule<M> = {
  readonly [K in keyof M as M[K] extends AnyFunction ? K : never]: M[K] extends (...args: infer A) => infer R
    ? (...args: A) => Promise<Awaited<R>>
    : never;
};

/**
 * What a call's `TimeoutError` says the timeout did: the caller stopped
 * waiting and the function was told, but only code that listens stops.
 */
const CALL_TIMEOUT_ADVICE =
  "the function's signal was aborted there (this.signal, or callSignal() from tendril/child), which stops only code that uses it: a busy synchronous loop, or work that ignores the signal, runs on; pass isolate: true to have the call's interpreter killed";

/**
 * Key of the method that sends a prepared call to a fresh interpreter
 * started by the context (`CallOptions.isolate`): given by the toolkit's
 * `Context`, which can start contexts; a context without it refuses
 * isolated calls.
 */
export const SEND_ISOLATED: unique symbol = Symbol('tendril.sendIsolated') as never;

/** What an `isolate` option is refused with where contexts cannot be started. */
export const ISOLATE_ONLY_IN_MASTER =
  'false here: isolated calls are made from the master, on the contexts its Router started';

/** Key of the method a prepared call is sent through, for `SEND_ISOLATED` to send it to another context. */
export const SEND_CALL: unique symbol = Symbol('tendril.sendCall') as never;

/** Key of the method tendril's services (commands, files) call their remote half through. */
export const CALL_TOOLKIT: unique symbol = Symbol('tendril.callService') as never;

/** Per-call options for `Context.callWith`. */
export interface CallOptions {
  /**
   * Reject with `TimeoutError` after this many milliseconds, and abort the
   * call's signal in the context (`this.signal`, `callSignal()`): code that
   * uses it stops; code that does not (a busy loop) runs on unless the
   * call is isolated. Default: no limit.
   */
  timeout?: number;
  /**
   * Reject with the signal's reason (an `AbortError` by default) when it
   * aborts, and abort the call's signal in the context, as `timeout` does.
   */
  signal?: AbortSignal;
  /**
   * Where the function's `require()` and `import()` resolve from, as the
   * master would resolve them there: a module's path or file URL (such as
   * `import.meta.url`), or a directory. Default: the Router's `base`
   * option, else the module that defines the function (docs/calls.md says
   * how it is found), else the main module.
   */
  base?: string | URL;
  /**
   * Run the call in a fresh interpreter the context starts (a child of
   * it, on the same machine and account), which is shut down when the call
   * ends and killed outright when its timeout passes or its signal aborts:
   * nothing the call did to its process outlives it, and code that ignores
   * its signal (a busy loop) is stopped too. One spare interpreter is kept
   * warm per context that has made an isolated call, so the next one does
   * not wait for Node to start. Only on contexts the master holds.
   * Default: the Router's `isolate` option, else false.
   */
  isolate?: boolean;
  /**
   * Load the modules the call uses anew, as if for the first time, instead
   * of from the context's module cache (their files are not fetched
   * again): for a module whose own state a previous call may have changed.
   * Modules it loads stay with this call only. Default false.
   */
  fresh?: boolean;
}

/** Per-call options of `Context.callServiceWith` and `Context.service`. */
export interface ServiceCallOptions extends OperationOptions {
  /** Reject with `TimeoutError` after this many milliseconds. Default: no limit. */
  timeout?: number;
  /**
   * Reject with the signal's reason (an `AbortError` by default) when it
   * aborts. The method is not interrupted; only the wait ends.
   */
  signal?: AbortSignal;
}

/** What a context reported about itself when it became ready. */
export interface ContextInfo {
  /** Process ID on its host. */
  pid: number;
  /** `process.version` of its interpreter, e.g. `'v18.20.8'`. */
  nodeVersion: string;
  /** Host name of the machine it runs on. */
  hostname: string;
  /** `process.platform`. */
  platform: string;
  /** `process.arch`. */
  arch: string;
}

/** Options of `Context.shutdown`. */
export interface ShutdownOptions {
  /**
   * Milliseconds to wait for a graceful exit before SIGTERM, and again
   * before SIGKILL. Default 2000 (for a child of the master, the Router's
   * `shutdownGrace`).
   */
  grace?: number;
}

/**
 * How long past twice its grace a shutdown waits for the context's parent
 * (an intermediate context) to say the context is gone, in ms: that parent
 * sends SIGKILL after twice the grace, and then only reaps and replies.
 */
export const SHUTDOWN_MARGIN = 5000;

/**
 * A handle on a context (a Node interpreter in the tree): call functions in
 * it, and shut it down. Obtained from `router.local()` and the other
 * connection methods.
 */
export class Context {
  /** The message switch this handle sends through (the master's, for contexts the program holds). */
  private readonly router: MessageSwitch;
  /** The context's ID; unique in the tree. */
  readonly id: number;
  /** The context's name, used in logs and errors. */
  readonly name: string;
  /** ID of the context that started this one. */
  readonly parentId: number;
  /** What the context reported when it became ready. */
  readonly info: ContextInfo;

  /**
   * Made by the connection methods; a program does not normally construct one.
   * @param router the router calls are sent through (the master's `Router`, or a context's own).
   * @param id the context's ID.
   * @param name its name.
   * @param parentId the ID of the context that started it.
   * @param info what it reported when it became ready.
   */
  constructor(router: SwitchLike, id: number, name: string, parentId: number, info: ContextInfo) {
    this.router = switchOf(router);
    this.id = id;
    this.name = name;
    this.parentId = parentId;
    this.info = info;
  }

  /**
   * Runs `fn` in this context with `args` and resolves with its return value
   * (awaited, if it returns a promise). `fn` travels as source text, so it
   * must be self-contained: it may use its parameters, globals,
   * `require()` and `import()` (resolved from the module that defines it;
   * see `CallOptions.base`), but not variables from the scope it was
   * written in.
   *
   * @returns the function's result, decoded (see docs/protocol.md for the types that travel).
   * @throws CapturedVariableError (a TypeError) when `fn` reads variables of
   *   the scope it was written in; nothing is sent.
   * @throws CallError when `fn` throws or rejects in the context; a
   *   `TendrilError` thrown there arrives as its own class instead.
   * @throws ContextDisconnectedError / ChannelError when the context is or becomes unreachable.
   * @throws UnsupportedValueError (a TypeError) when an argument cannot be sent; nothing is sent.
   * @throws TypeError when `fn` is native, bound or a class.
   * @throws MessageTooLargeError when the arguments exceed `maxMessageSize`.
   */
  call<F extends AnyFunction>(fn: F, ...args: Parameters<F>): Promise<Awaited<ReturnType<F>>> {
    return this.callWith({}, fn, ...args);
  }

  /**
   * `call` with per-call options: a timeout in milliseconds and an
   * `AbortSignal`. Besides the errors of `call`, rejects with `TimeoutError`
   * when the timeout passes and with the signal's reason when it aborts.
   * Both count from this call, including any time it waits, unsent, for a
   * backed-up stream toward the context (docs/streams.md).
   */
  callWith<F extends AnyFunction>(
    options: CallOptions,
    fn: F,
    ...args: Parameters<F>
  ): Promise<Awaited<ReturnType<F>>> {
    let call: CallPayload;
    const references: object[] = [];
    try {
      checkCallOptions(options, 'context.callWith()');
      // Synchronously, while the caller's frame is on the stack (it is the default base).
      call = this.prepareCall(fn, args, options.base, references);
    } catch (error) {
      return Promise.reject(error);
    }
    return this.send(call, references, options, `call to ${fn.name || 'an anonymous function'}()`) as Promise<
      Awaited<ReturnType<F>>
    >;
  }

  /**
   * A proxy of the module at `module` whose exported functions run in this
   * context: `await tasks.deploy({ version: '1.2.3' })`. The module and
   * everything it statically imports travel on the first call (one round
   * trip), npm packages included.
   *
   * ```ts
   * const tasks = child.import<typeof import('./tasks.js')>(new URL('./tasks.js', import.meta.url));
   * ```
   *
   * @param module a file URL, an absolute path, a relative path (from the
   *   module that calls `import()`, like an `import` statement there), or a
   *   package specifier resolved from `options.base` (default: that module).
   * @param options timeout, signal and base applied to every call through the proxy.
   * @returns a proxy; calling an export that is not a function rejects with a
   *   `CallError` whose `remoteName` is `'TypeError'`.
   * @throws as `call`, per call: `CallError` when the module cannot be loaded
   *   (a syntax error names the file and line) or the function throws.
   */
  import<M>(module: string | URL, options: CallOptions = {}): RemoteModule<M> {
    checkCallOptions(options, 'context.import()');
    const calls = callPreparationOf(this.router);
    const base = calls.resolveBase(options.base);
    let specifier = toPathOrSpecifier(module);
    if ((specifier.startsWith('./') || specifier.startsWith('../')) && base !== undefined) {
      specifier = join(dirname(base), specifier);
    }
    specifier = calls.trustModuleOrigin(specifier);
    return new Proxy(
      {},
      {
        get: (_target, property) => {
          // Not a thenable, and no symbol-keyed exports.
          if (typeof property !== 'string' || property === 'then') return undefined;
          return (...args: unknown[]) => {
            const references: object[] = [];
            const call: CallPayload = {
              m: specifier,
              e: property,
              a: prepareValue(args, 'args', references) as unknown[],
            };
            if (base !== undefined) call.b = base;
            return this.send(call, references, options, `call to ${property}() of ${specifier}`);
          };
        },
      },
    ) as RemoteModule<M>;
  }

  /**
   * Runs export `name` of tendril's services module (`tendril:toolkit`,
   * shipped on first use) in this context with `args`: how
   * `context.exec()`, `copy()` and the other services reach their remote half.
   * Senders and Channels among `args` are leased and closed as a call's are.
   * @param what how errors name the call, e.g. `'exec ls'`.
   */
  [CALL_TOOLKIT](name: string, args: unknown[], options: CallOptions, what: string): Promise<unknown> {
    const references: object[] = [];
    let call: CallPayload;
    try {
      checkCallOptions(options, what);
      call = { m: TOOLKIT_MODULE_ID, e: name, a: prepareValue(args, 'args', references) as unknown[] };
    } catch (error) {
      return Promise.reject(error);
    }
    return this.send(call, references, options, what);
  }

  /**
   * Calls `method` of the service `name` registered in this context (see
   * docs/services.md) with `args`, and resolves with its result (awaited).
   * Given the typed name `registerService` returns (or `serviceName<S>()`),
   * the method's name and arguments are checked and the result is typed;
   * given a plain string, the call is untyped. Arguments travel as a call's
   * do: Senders and Channels among them close when the call settles.
   *
   * ```ts
   * const sum = await context.callService(MATH, 'add', 1, 2); // Promise<number>
   * ```
   * @throws ServiceError when the context offers no such service
   *   (`ERR_TENDRIL_SERVICE_UNKNOWN`), the service has no such method
   *   (`..._METHOD`), the arguments fail its `validate` check
   *   (`..._ARGUMENTS`), its policy does not admit this context
   *   (`..._REFUSED`, "refused by policy"), or its queue is full (`..._BUSY`).
   * @throws CallError (or a TendrilError's own class) when the method throws.
   * @throws as `call`: ChannelError, UnsupportedValueError, MessageTooLargeError.
   */
  callService<N extends string, M extends ServiceMethodOf<N>>(
    name: N,
    method: M,
    ...args: ServiceArgs<N, M>
  ): Promise<ServiceResult<N, M>> {
    return this.callServiceWith({}, name, method, ...args);
  }

  /**
   * `callService` with per-call options: a timeout in milliseconds and an
   * `AbortSignal`. Besides the errors of `callService`, rejects with
   * `TimeoutError` when the timeout passes and with the signal's reason
   * when it aborts; the method itself runs on.
   */
  callServiceWith<N extends string, M extends ServiceMethodOf<N>>(
    options: ServiceCallOptions,
    name: N,
    method: M,
    ...args: ServiceArgs<N, M>
  ): Promise<ServiceResult<N, M>> {
    const what = `call to ${String(method)}() of service '${String(name)}'`;
    const references: object[] = [];
    let request: ServiceRequest;
    try {
      checkServiceCallOptions(options, 'context.callServiceWith()');
      if (typeof name !== 'string' || typeof method !== 'string') {
        throw new TypeError(`${what}: the service and method names must be strings`);
      }
      request = [name, method, prepareValue(args, 'args', references) as unknown[]];
    } catch (error) {
      return Promise.reject(error);
    }
    return this.send(request, references, options, what, CALL_SERVICE_SPEC) as Promise<ServiceResult<N, M>>;
  }

  /**
   * A proxy of the service `name` registered in this context, whose methods
   * call it: `await math.add(1, 2)` is `callService(name, 'add', 1, 2)`.
   * Typed from the implementation given a typed name, like `callService`.
   * The proxy is not a thenable: a method named `then` is reached through
   * `callService` only.
   * @param options timeout and signal applied to every call through the proxy.
   */
  service<N extends string>(name: N, options: ServiceCallOptions = {}): RemoteService<ServiceOf<N>> {
    checkServiceCallOptions(options, 'context.service()');
    return new Proxy(
      {},
      {
        get: (_target, property) => {
          // Not a thenable, and no symbol-keyed methods.
          if (typeof property !== 'string' || property === 'then') return undefined;
          return (...args: unknown[]) =>
            (this.callServiceWith as (o: ServiceCallOptions, n: string, m: string, ...a: unknown[]) => unknown)(
              options,
              name,
              property,
              ...args,
            );
        },
      },
    ) as RemoteService<ServiceOf<N>>;
  }

  /**
   * This context's module forwarding counters: round trips to its parent,
   * files received, and what it served its own children.
   * @param options `timeout` (default 30000 ms) and `signal` of the wait.
   * @throws ChannelError when the context is unreachable.
   * @throws TimeoutError past the timeout; the signal's reason when it aborts.
   */
  moduleStats(options: OperationOptions = {}): Promise<ImporterStats> {
    try {
      checkOperationOptions(options, 'context.moduleStats()');
    } catch (error) {
      return Promise.reject(error);
    }
    return ask(this.router, this.id, MODULE_STATS_SPEC, null, {
      what: 'module stats',
      timeout: options.timeout,
      signal: options.signal,
    });
  }

  /**
   * Measures the round trip to this context through every hop on the way:
   * a PING message there and its answer back, timed on the master's clock.
   * What tells a slow link from a dead one.
   * @returns the round trip in ms (fractional).
   * @throws ContextDisconnectedError when the context is gone or goes
   *   away meanwhile; TimeoutError after `options.timeout` ms (default:
   *   none); the signal's reason on abort; InvalidOptionError for bad options.
   */
  async ping(options: OperationOptions = {}): Promise<number> {
    checkOperationOptions(options, 'context.ping()');
    // Not performance.now(): not a global on Node 12, which a child may run.
    const started = process.hrtime.bigint();
    await ask(this.router, this.id, PING_SPEC, null, {
      what: 'ping',
      timeout: options.timeout,
      signal: options.signal,
    });
    return Number(process.hrtime.bigint() - started) / 1e6;
  }

  /** `send` for another context's `SEND_ISOLATED`: the prepared call, to this context. */
  [SEND_CALL](call: CallPayload, references: object[], options: CallOptions, what: string): Promise<unknown> {
    return this.send(call, references, options, what);
  }

  /**
   * Sends a checked call and resolves with its result. While the stream
   * toward the context has more than its high-water mark queued, or a
   * context on the way holds calls to it (ROUTE_PRESSURE), the call waits
   * here, not yet encoded: many calls with large arguments cost what their
   * arguments do, not that again in buffers. Its timeout and signal count
   * from the call, waiting included.
   */
  private async send(
    call: CallPayload | ServiceRequest,
    references: object[],
    options: CallOptions,
    what: string,
    spec: typeof CALL_FUNCTION_SPEC | typeof CALL_SERVICE_SPEC = CALL_FUNCTION_SPEC,
  ): Promise<unknown> {
    // tendril's own calls (exec, copy, tmpdir...) are never isolated: they keep state in the context.
    const toolkit = (call as CallPayload).m === TOOLKIT_MODULE_ID;
    if (spec === CALL_FUNCTION_SPEC && !toolkit && (options.isolate ?? this.router.isolateCalls)) {
      const isolated = (this as { [SEND_ISOLATED]?: Context[typeof SEND_CALL] })[SEND_ISOLATED];
      if (!isolated) {
        throw new InvalidOptionError('isolate', what, ISOLATE_ONLY_IN_MASTER, true);
      }
      return isolated.call(this, call as CallPayload, references, { ...options, isolate: false }, what);
    }
    if (options.fresh && spec === CALL_FUNCTION_SPEC) (call as CallPayload).r = 1;
    let timeout = options.timeout;
    let congested = this.router.whenWritable(this.id);
    if (congested) {
      const started = Date.now();
      const interruption = this.interruption(options, what);
      // A waiting call keeps the process alive, as one in flight does.
      this.router.hold();
      try {
        while (congested) {
          await Promise.race([congested, interruption.promise]);
          // Checked again right before sending: calls woken together go one at a time.
          congested = this.router.whenWritable(this.id);
        }
      } finally {
        interruption.dispose();
        this.router.release();
      }
      if (timeout !== undefined) timeout = Math.max(0, timeout - (Date.now() - started));
    }
    const pending = this.router.request(this.id, spec.handle, encodePrepared(call), {
      timeout,
      signal: options.signal,
      what,
      ...(spec === CALL_FUNCTION_SPEC && {
        onStop: (replyTo: number, kind: 'timeout' | 'abort') => this.cancel(replyTo, kind, timeout),
        // tendril's own remote halves stop on their signal: the advice is for a user's function.
        ...(!toolkit && { timeoutAdvice: CALL_TIMEOUT_ADVICE }),
      }),
    });
    const leases = this.lease(references);
    let reply: Message;
    try {
      reply = await pending;
    } catch (error) {
      // The call never reached the function: nothing there will close them.
      if (error instanceof ChannelError || error instanceof MessageTooLargeError) {
        for (const holder of leases) holder.unlease(this.id);
      }
      throw error;
    }
    return openReply(this.router, this.id, spec, reply);
  }

  /** Tells the context to abort the signal of the call whose reply was to come to `replyTo`. */
  private cancel(replyTo: number, kind: 'timeout' | 'abort', timeout: number | undefined): void {
    const request: CancelCallRequest = [replyTo, kind, kind === 'timeout' && timeout !== undefined ? timeout : null];
    try {
      this.router.send(
        Message.encoded(
          { dst: this.id, src: this.router.id, auth: this.router.id, handle: CANCEL_CALL_SPEC.handle, replyTo: 0 },
          request,
        ),
      );
    } catch {
      // The context is gone: nothing runs there to stop.
    }
  }

  /**
   * A promise that rejects when the call's timeout passes (`TimeoutError`)
   * or its signal aborts (with the signal's reason), for a call that waits
   * before it is sent; `dispose()` stops both.
   */
  private interruption(options: CallOptions, what: string): { promise: Promise<never>; dispose: () => void } {
    const { timeout, signal } = options;
    let timer: ReturnType<typeof setTimeout> | undefined;
    let onAbort: (() => void) | undefined;
    const promise = new Promise<never>((_resolve, reject) => {
      if (timeout !== undefined) {
        timer = setTimeout(() => reject(new TimeoutError(what, this.name, timeout)), timeout);
      }
      if (signal) {
        onAbort = () => reject(signal.reason);
        if (signal.aborted) onAbort();
        else signal.addEventListener('abort', onAbort, { once: true });
      }
    });
    promise.catch(() => {});
    return {
      promise,
      dispose: () => {
        if (timer) clearTimeout(timer);
        if (onAbort) signal?.removeEventListener('abort', onAbort);
      },
    };
  }

  /** Tells the receivers of the Senders and Channels a call carries to wait for this context to close them. */
  private lease(references: object[]): LeaseHolder[] {
    const holders: LeaseHolder[] = [];
    for (const reference of references) {
      const holder = (reference as { [LOCAL_RECEIVER]?: LeaseHolder })[LOCAL_RECEIVER];
      if (!holder) continue;
      holder.lease(this.id);
      holders.push(holder);
    }
    return holders;
  }

  private prepareCall(
    fn: AnyFunction,
    args: unknown[],
    base: string | URL | undefined,
    references: object[],
    forJob = false,
  ): CallPayload & { i?: string[] } {
    const calls = callPreparationOf(this.router);
    const { source, preload, captured, usesModules, imports, location } = calls.prepare(fn);
    if (captured.length > 0) {
      throw new CapturedVariableError(captured, fn.name ? `function '${fn.name}'` : 'an anonymous function', this.name);
    }
    const call: CallPayload & { i?: string[] } = { f: source, a: prepareValue(args, 'args', references) as unknown[] };
    // A job resolves its preload option from the base even when the function names no module.
    if (base !== undefined || usesModules || forJob) {
      const from = calls.resolveBase(base, fn);
      if (from !== undefined) call.b = from;
    }
    if (preload.length > 0) call.p = preload;
    if (location) call.l = location;
    if (forJob && imports && imports.length > 0) call.i = imports;
    return call;
  }

  /**
   * Runs `fn` in this context without waiting for, or receiving, a result.
   * An exception it throws is written to the context's output, which
   * arrives as a log record.
   * @throws UnsupportedValueError, TypeError, MessageTooLargeError as for `call`, synchronously.
   */
  callNoReply<F extends AnyFunction>(fn: F, ...args: Parameters<F>): void {
    const references: object[] = [];
    const payload = encodePrepared(this.prepareCall(fn, args, undefined, references));
    this.router.send(
      new Message(
        {
          dst: this.id,
          src: this.router.id,
          auth: this.router.id,
          handle: CALL_FUNCTION_SPEC.handle,
          replyTo: 0,
          flags: 0,
        },
        payload,
      ),
    );
    this.lease(references);
  }

  /**
   * Shuts the context down: it stops its own children, then exits. After
   * `options.grace` ms its parent sends SIGTERM, then SIGKILL, and reaps it.
   * Resolves once it is gone; pending calls to it reject with
   * `ContextDisconnectedError`. Shutting down a context that is already
   * gone resolves at once.
   *
   * Whatever its parent does, this settles within twice the grace plus
   * `SHUTDOWN_MARGIN` (5 s): when the parent is another context (an
   * intermediate) that has not said the context is gone by then (it is
   * hung, frozen or hostile), the context is treated as gone here all the
   * same: pending calls to it reject with `ContextDisconnectedError`
   * saying so, `disconnect` is emitted, and this resolves.
   */
  async shutdown(options: ShutdownOptions = {}): Promise<void> {
    const grace = milliseconds(
      optionsObject(options, 'context.shutdown()', SHUTDOWN_OPTIONS).grace,
      'grace',
      'context.shutdown()',
      undefined,
    );
    const why = 'it was shut down (context.shutdown())';
    this.router.expectDeparture(this.id, why);
    // This context's own broker stops its own children (signals, then SIGKILL): only another context can stall.
    const bound =
      this.parentId === this.router.id ? undefined : 2 * (grace ?? DEFAULT_SHUTDOWN_GRACE) + SHUTDOWN_MARGIN;
    try {
      await ask(
        this.router,
        this.parentId,
        STOP_CHILD_SPEC,
        [this.id, grace === undefined ? null : Math.round(grace)],
        { what: 'shutdown', timeout: bound },
      );
    } catch (error) {
      if (error instanceof TimeoutError && bound !== undefined) {
        this.router.forgetRoute(
          this.id,
          `${why}; its parent '${this.router.nameOf(this.parentId)}' did not say it had stopped within ${bound} ms, so it is taken as gone (it may still run there)`,
        );
        return;
      }
      // The parent itself went away: then so did this context.
      if (!(error instanceof ContextDisconnectedError)) throw error;
    }
  }

  /** `'Context(<id>, <name>)'`. */
  toString(): string {
    return `Context(${this.id}, ${this.name})`;
  }
}

/**
 * Makes the handle of a context that became reachable: the master's switch
 * and the listener client are given one by the layer above them, so the
 * handles they give the program are the public `Context` (with the
 * toolkit's methods) without the core knowing that class.
 */
export type ContextFactory<C extends Context = Context> = (
  router: SwitchLike,
  id: number,
  name: string,
  parentId: number,
  info: ContextInfo,
) => C;

/**
 * `fn` and `args` as a call to `context` ships them, for a job
 * (src/toolkit/jobs): with the base resolved even when `fn` names no
 * module, and its literal `import()` specifiers as `i`, to be loaded
 * before it detaches. Must be called synchronously from the method the
 * program called (the default base is found from the stack).
 */
export function prepareJobCall(
  context: Context,
  fn: AnyFunction,
  args: unknown[],
  base: string | URL | undefined,
  references: object[],
): CallPayload & { i?: string[] } {
  return (context as unknown as { prepareCall: Context['prepareCall'] }).prepareCall(fn, args, base, references, true);
}

/** The message switch a context handle sends through: for tendril's services, which open Receivers and Channels beside their calls. */
export function routerOf(context: Context): MessageSwitch {
  return (context as unknown as { router: MessageSwitch }).router;
}

/** The options of a call (`CallOptions`), of an operation or a service call (`OperationOptions`), of `shutdown` (`ShutdownOptions`). */
const CALL_OPTIONS = new Set(['timeout', 'signal', 'base', 'isolate', 'fresh']);
const SHUTDOWN_OPTIONS = new Set(['grace']);

/**
 * Checks the options of a service call.
 * @throws InvalidOptionError naming the bad option.
 */
function checkServiceCallOptions(options: ServiceCallOptions, where: string): void {
  checkOperationOptions(options, where);
}

/**
 * Checks the options of a call.
 * @throws InvalidOptionError naming the bad option.
 */
function checkCallOptions(options: CallOptions, where: string): void {
  optionsObject(options, where, CALL_OPTIONS);
  milliseconds(options.timeout, 'timeout', where, undefined);
  abortSignal(options.signal, 'signal', where);
  location(options.base, 'base', where);
  boolean(options.isolate, 'isolate', where);
  boolean(options.fresh, 'fresh', where);
}
