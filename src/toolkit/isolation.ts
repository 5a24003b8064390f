/**
 * Isolated calls (`CallOptions.isolate`): each runs in a fresh interpreter
 * the context starts with the `local` method (its child, on the same
 * machine and account, with the context's Node), shut down when the call
 * ends and killed outright when the call is stopped. Starting Node takes
 * tens of milliseconds, so one spare is kept started per context: an
 * isolated call takes it and the next spare starts at once, off the
 * call's path.
 */
import type { CommonOptions } from '../connection/bootstrap.js';
import { local } from '../connection/local.js';
import type { ConnectionMethod } from '../connection/method.js';
import {
  CALL_TOOLKIT,
  type CallOptions,
  type Context,
  ISOLATE_ONLY_IN_MASTER,
  routerOf,
  SEND_CALL,
} from '../core/context.js';
import { InvalidOptionError, TimeoutError } from '../core/errors.js';
import { STOP_GRACE } from '../core/options.js';
import type { CallPayload } from '../core/protocol/call-function.js';

/** What isolation needs of the master's switch: starting a context through another. */
interface Starter {
  connect<O extends CommonOptions>(
    method: ConnectionMethod<O>,
    options: O & { via?: Context },
    start?: { leaf?: boolean },
  ): Promise<Context>;
}

/** The spare interpreter of one context. */
class Spares {
  private spare: Promise<Context> | undefined;
  private started = 0;

  constructor(
    private readonly context: Context,
    private readonly starter: Starter,
  ) {}

  /** The spare, or a new interpreter when there is none, or the spare failed to start or has gone since. */
  take(): Promise<Context> {
    const spare = this.spare;
    this.spare = undefined;
    if (!spare) return this.start();
    return spare.then(
      (ready) => (routerOf(ready).departureOf(ready.id) ? this.start() : ready),
      () => this.start(),
    );
  }

  /**
   * Starts the next spare, once an isolated call has ended: not while it
   * runs, as starting a process briefly blocks the context it would reach
   * the call through.
   */
  refill(): void {
    if (this.spare) return;
    this.spare = this.start();
    // A failure shows when the spare is taken.
    this.spare.catch(() => {});
  }

  private start(): Promise<Context> {
    this.started += 1;
    // A leaf: an isolated call starts no contexts, so its interpreter costs its context one ID, not a block.
    return this.starter.connect(
      local,
      { via: this.context, name: `${this.context.name}.isolated-${this.started}` },
      { leaf: true },
    );
  }
}

const spares = new WeakMap<Context, Spares>();

/** What an isolated call's `TimeoutError` says the timeout did. */
const ISOLATED_TIMEOUT_ADVICE = 'the isolated interpreter running it was killed, with everything it was doing';

/**
 * Sends `call`, prepared for `context`, to a fresh interpreter of its, and
 * resolves or rejects as the call does; the interpreter is shut down when
 * the call ends, and killed (SIGKILL after no grace) before a stopped call
 * rejects, so its code has stopped by then.
 */
export async function sendIsolated(
  context: Context,
  call: CallPayload,
  references: object[],
  options: CallOptions,
  what: string,
): Promise<unknown> {
  const starter = routerOf(context) as unknown as Partial<Starter>;
  if (typeof starter.connect !== 'function') {
    throw new InvalidOptionError('isolate', what, ISOLATE_ONLY_IN_MASTER, true);
  }
  let entry = spares.get(context);
  if (!entry) {
    entry = new Spares(context, starter as Starter);
    spares.set(context, entry);
  }
  // The call's own stop, told apart from a TimeoutError the function itself may throw.
  const stop = new AbortController();
  const timedOut =
    options.timeout === undefined
      ? undefined
      : new TimeoutError(what, context.name, options.timeout, ISOLATED_TIMEOUT_ADVICE);
  const timer = timedOut && setTimeout(() => stop.abort(timedOut), options.timeout);
  const onAbort = () => stop.abort(options.signal?.reason);
  if (options.signal?.aborted) onAbort();
  else options.signal?.addEventListener('abort', onAbort, { once: true });
  const taken = entry.take();
  let worker: Context | undefined;
  try {
    worker = await untilAborted(taken, stop.signal);
    return await worker[SEND_CALL](call, references, { ...options, timeout: undefined, signal: stop.signal }, what);
  } catch (error) {
    if (worker && stop.signal.aborted && error === stop.signal.reason) {
      // Not until it is gone: a stopped isolated call has stopped when it rejects.
      await Promise.race([kill(context, worker), delay(STOP_GRACE)]);
    }
    throw error;
  } finally {
    if (timer) clearTimeout(timer);
    options.signal?.removeEventListener('abort', onAbort);
    // Its job done, it exits; nobody waits for that. One the call gave up waiting for goes too, once started.
    if (worker) worker.shutdown().catch(() => {});
    else
      taken.then(
        (late) => late.shutdown().catch(() => {}),
        () => {},
      );
    entry.refill();
  }
}

/**
 * Kills an isolated call's interpreter and what its code started (from
 * the context that started it, which sees its process tree), then has
 * the context reap it.
 */
async function kill(context: Context, worker: Context): Promise<void> {
  try {
    await context[CALL_TOOLKIT]('killTree', [worker.info.pid], { timeout: STOP_GRACE }, 'kill of an isolated call');
  } catch {
    // The context is gone, and its children with it.
  }
  await worker.shutdown({ grace: 0 }).catch(() => {});
}

/** `promise`, or the signal's reason if it aborts first. */
function untilAborted<T>(promise: Promise<T>, signal: AbortSignal): Promise<T> {
  if (signal.aborted) return Promise.reject(signal.reason);
  return new Promise<T>((resolve, reject) => {
    const onAbort = () => reject(signal.reason);
    signal.addEventListener('abort', onAbort, { once: true });
    promise.then(
      (value) => {
        signal.removeEventListener('abort', onAbort);
        resolve(value);
      },
      (error: unknown) => {
        signal.removeEventListener('abort', onAbort);
        reject(error);
      },
    );
  });
}

function delay(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms).unref?.());
}
