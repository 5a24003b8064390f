/**
 * The signal a running call is stopped through. When the caller's
 * timeout passes or its signal aborts, the master sends CANCEL_CALL (see
 * protocol/cancel-call.ts) and the call's signal aborts here: code that
 * passed it to `fetch`, timers, child processes or streams stops.
 * Nothing can stop code that never yields (a busy synchronous loop); an
 * isolated call (`isolate: true`) is killed instead.
 *
 * The controller is made only when the function asks for its signal, so
 * a call that never does pays for nothing but a map entry.
 */

import { type CallExecOptions, type CallExecResult, execForCall } from './call-exec.js';

/** What a shipped function sees as `this` (and an arrow function as its lexical `this`). */
export interface CallThis {
  /**
   * Aborts when the caller's `timeout` passes or its `signal` aborts (the
   * master sends the stop; it arrives as fast as a reply would). Pass it
   * to `fetch`, `setTimeout` of `timers/promises`, `child_process`,
   * streams, or check `signal.aborted` in a loop. Its `reason` is an
   * Error named `TimeoutError` or `AbortError`. On Node before 15 it is
   * a minimal stand-in with `aborted`, `reason`, `onabort`,
   * `addEventListener`, `removeEventListener` and `throwIfAborted`.
   */
  readonly signal: AbortSignal;
  /**
   * Runs `file` with `args` (no shell) on the context's host, in a process
   * group of its own, tied to this call: when the call is stopped (its
   * timeout, its signal), the group is killed (SIGTERM, then SIGKILL after
   * `options.grace`) and this rejects with the signal's reason.
   *
   * ```js
   * await context.callWith({ timeout: 60_000 }, async function () {
   *   const { stdout } = await this.exec('apt-get', ['-y', 'upgrade']);
   *   return stdout;
   * });
   * ```
   * @param args its arguments. Default none.
   * @returns its output (the last `maxBuffer` bytes of each stream), exit code and signal; a
   *   non-zero exit resolves too.
   * @throws TypeError for a bad file or argument; the spawn error (ENOENT...) when it cannot start;
   *   the signal's reason when the call was stopped.
   */
  exec(file: string, args?: readonly string[], options?: CallExecOptions): Promise<CallExecResult>;
}

/** Why a call was stopped, as the master said: its timeout (with the limit in ms) or its signal. */
export type StopKind = 'timeout' | 'abort';

/** A minimal AbortSignal for Node before 15, which has none. */
class FallbackSignal {
  aborted = false;
  reason: unknown = undefined;
  onabort: ((event: { type: string }) => void) | null = null;
  private listeners: { fn: (event: { type: string }) => void; once: boolean }[] = [];

  addEventListener(type: string, fn: (event: { type: string }) => void, options?: { once?: boolean }): void {
    if (type !== 'abort' || typeof fn !== 'function') return;
    if (this.listeners.some((entry) => entry.fn === fn)) return;
    this.listeners.push({ fn, once: options?.once === true });
  }

  removeEventListener(type: string, fn: (event: { type: string }) => void): void {
    if (type === 'abort') this.listeners = this.listeners.filter((entry) => entry.fn !== fn);
  }

  throwIfAborted(): void {
    if (this.aborted) throw this.reason;
  }

  fire(reason: unknown): void {
    if (this.aborted) return;
    this.aborted = true;
    this.reason = reason;
    const event = { type: 'abort' };
    const listeners = this.listeners;
    this.listeners = listeners.filter((entry) => !entry.once);
    for (const handler of [this.onabort, ...listeners.map((entry) => entry.fn)]) {
      if (!handler) continue;
      try {
        handler.call(this, event);
      } catch (error) {
        // As an EventTarget does: a listener's throw is reported, not passed to the one aborting.
        process.nextTick(() => {
          throw error;
        });
      }
    }
  }
}

/** An Error named `TimeoutError` or `AbortError` saying why the call was stopped. */
function stopReason(kind: StopKind, timeoutMs: number | undefined): Error {
  const message =
    kind === 'timeout'
      ? `the call's timeout of ${timeoutMs} ms passed in the caller, which stopped waiting for it`
      : "the caller's signal aborted the call";
  const error = new Error(message);
  error.name = kind === 'timeout' ? 'TimeoutError' : 'AbortError';
  (error as Error & { code: string }).code = kind === 'timeout' ? 'ERR_TENDRIL_TIMEOUT' : 'ABORT_ERR';
  return error;
}

/** One call in flight: its signal, made on first use. */
export class CallStop {
  private this_: CallThis | undefined;

  /** The function's `this`: a plain object, so stack frames read `Object.<anonymous>`, not a minified class name; made on first use. */
  get self(): CallThis {
    if (this.this_) return this.this_;
    const stop = this;
    this.this_ = {
      get signal() {
        return stop.signal;
      },
      exec: (file, args = [], options = {}) => execForCall(file, args, options, stop.signal),
    };
    return this.this_;
  }

  private controller: AbortController | undefined;
  private fallback: FallbackSignal | undefined;
  private reason: Error | undefined;

  /** The call's signal (see `CallThis.signal`), made on first use; already aborted when the call was stopped before. */
  get signal(): AbortSignal {
    if (this.fallback) return this.fallback as unknown as AbortSignal;
    if (this.controller) return this.controller.signal;
    if (typeof AbortController === 'function') {
      this.controller = new AbortController();
      if (this.reason) abortWith(this.controller, this.reason);
      return this.controller.signal;
    }
    this.fallback = new FallbackSignal();
    if (this.reason) this.fallback.fire(this.reason);
    return this.fallback as unknown as AbortSignal;
  }

  /** Aborts the call's signal (now, or as it is made). */
  stop(kind: StopKind, timeoutMs: number | undefined): void {
    if (this.reason) return;
    this.reason = stopReason(kind, timeoutMs);
    if (this.controller) abortWith(this.controller, this.reason);
    else this.fallback?.fire(this.reason);
  }
}

/** `controller.abort(reason)`: Node 15 to 17.1 take no reason, so it is set on the signal by hand there. */
function abortWith(controller: AbortController, reason: Error): void {
  controller.abort(reason);
  const signal = controller.signal as { reason?: unknown };
  if (signal.reason === undefined) {
    try {
      Object.defineProperty(signal, 'reason', { value: reason, configurable: true });
    } catch {
      // Left without a reason; `aborted` still tells.
    }
  }
}

/** The call whose function is running synchronously right now (see `callSignal`). */
let running: CallStop | undefined;

/** Calls `fn` on `self` with `args`, with `stop` as the running call, for `callSignal()`. */
export function runAs(
  stop: CallStop,
  fn: (...args: unknown[]) => unknown,
  self: unknown,
  args: unknown[] | undefined,
): unknown {
  const outer = running;
  running = stop;
  try {
    return args === undefined ? fn.call(self) : fn.apply(self, args);
  } finally {
    running = outer;
  }
}

/**
 * The signal of the call running now, for code in a context (a function
 * shipped with `context.call()`, an export called through
 * `context.import()`): it aborts when the caller's timeout passes or its
 * signal aborts (see `CallThis.signal`). Calls run concurrently, so only
 * the call's synchronous start can tell which call it is in: call it
 * before the function's first `await` and keep the result.
 *
 * ```js
 * const signal = require('tendril/child').callSignal();
 * await fetch(url, { signal });
 * ```
 * @throws Error outside a call's synchronous start (after an `await`, in a
 *   timer), saying so.
 */
export function callSignal(): AbortSignal {
  if (!running) {
    throw new Error(
      "callSignal() must be called while a call's function starts, before its first await (calls run concurrently, so later it cannot tell which call it is in): call it first thing and keep the signal",
    );
  }
  return running.signal;
}
