import { callOrigin } from './call-base.js';
import { compileFunction, type FunctionFactory, isShippedFrame } from './function-source.js';
import type { Importer } from './importer.js';
import { CALL_FUNCTION_SPEC, type CallPayload } from './protocol/call-function.js';
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
  const firstFrame = /\n\s+at [^\n]*/.exec(error.stack ?? '')?.[0] ?? '';
  if (!isShippedFrame(firstFrame)) return;
  error.message +=
    ': functions passed to call() travel as source text and cannot see variables of the scope they were written in; pass values as arguments, and write globals of this context as globalThis.<name>';
}

/** Bases whose `require` and `import` are kept; past it the table starts again. */
const MAX_LOADERS = 64;

/**
 * Runs shipped functions in this context. Calls run concurrently: an async
 * function awaiting IO does not hold up the next call.
 */
export class Dispatcher {
  /** The `require` and `import` each base gives calls, like a module's own, kept for the next call. */
  private readonly loaders = new Map<string, [NodeJS.Require, (spec: string) => Promise<unknown>]>();

  /**
   * @param importer loads the modules calls need.
   * @param defaultBase directory `require()` resolves from when a call names none.
   * @param onUnreported called with errors of calls that expect no reply (callNoReply).
   */
  constructor(
    router: MessageSwitch,
    private readonly importer: Importer,
    private readonly defaultBase: string,
    private readonly onUnreported: (error: unknown) => void,
  ) {
    serve(router, CALL_FUNCTION_SPEC, (call) => explained(() => this.run(call)), {
      onUnanswered: (error) => this.onUnreported(error),
      // A Sender or Channel passed to a call ends with it, so the loop
      // reading the other end always ends, even when the function threw.
      onSettled: (message) => {
        for (const reference of message.references) (reference as { [CALL_SETTLED](): void })[CALL_SETTLED]();
      },
    });
  }

  private run(call: CallPayload): unknown {
    return call.m !== undefined ? this.callExport(call, call.m, String(call.e)) : this.callFunction(call);
  }

  private callFunction(call: CallPayload): unknown {
    const factory = compileFunction(String(call.f), call.l);
    const from = call.b ?? callOrigin(this.defaultBase);
    const preload = call.p ?? [];
    // Literal require()s are fetched up front, in one round trip, so the function need not block on them.
    if (preload.length > 0) {
      return this.importer.prefetch(from, preload, 'require').then(() => this.invoke(factory, from, call.a));
    }
    return this.invoke(factory, from, call.a);
  }

  /** Calls a compiled function with the `require` and `import` of `from`, made once per base. */
  private invoke(factory: FunctionFactory, from: string, args: unknown[] | undefined): unknown {
    let loaders = this.loaders.get(from);
    if (!loaders) {
      if (this.loaders.size >= MAX_LOADERS) this.loaders.clear();
      loaders = [this.importer.requireFrom(from), this.importer.importFrom(from)];
      this.loaders.set(from, loaders);
    }
    return factory(loaders[0], loaders[1]).apply(undefined, args);
  }

  private async callExport(call: CallPayload, path: string, name: string): Promise<unknown> {
    // An absolute path stands for itself; a specifier resolves from the call's base.
    const from = path.startsWith('/') ? path : (call.b ?? callOrigin(this.defaultBase));
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
}

/** `run()`'s result, with a ReferenceError it throws or rejects with explained (see `explainReferenceError`). */
function explained(run: () => unknown): unknown {
  let result: unknown;
  try {
    result = run();
  } catch (error) {
    explainReferenceError(error);
    throw error;
  }
  if (result !== null && typeof result === 'object' && typeof (result as PromiseLike<unknown>).then === 'function') {
    return Promise.resolve(result).catch((error: unknown) => {
      explainReferenceError(error);
      throw error;
    });
  }
  return result;
}
