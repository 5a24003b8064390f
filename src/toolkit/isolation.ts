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
  connect<O extends CommonOptions>(method: ConnectionMethod<O>, options: O & { via?: Context }): Promise<Context>;
}

/** The spare interpreter of one context. */
class Spares {
  private spare: Promise<Context> | undefined;
  private started = 0;

  constructor(
    private readonly context: Context,
    private readonly starter: Starter,
  ) {}

  /** The spare, or a new interpreter when there is none. */
  take(): Promise<Context> {
    const taken = this.spare ?? this.start();
    this.spare = undefined;
    return taken;
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
    return this.starter.connect(local, {
      via: this.context,
      name: `${this.context.name}.isolated-${this.started}`,
    });
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
  const began = Date.now();
  const worker = await untilStopped(entry.take(), options, what, context.name);
  const timeout = options.timeout === undefined ? undefined : Math.max(0, options.timeout - (Date.now() - began));
  let stopped = false;
  const onAbort = () => {
    stopped = true;
  };
  options.signal?.addEventListener('abort', onAbort, { once: true });
  try {
    return await worker[SEND_CALL](call, references, { ...options, timeout }, what);
  } catch (error) {
    if (stopped || error instanceof TimeoutError) {
      // Not until it is gone: a stopped isolated call has stopped when it rejects.
      await Promise.race([kill(context, worker), delay(STOP_GRACE)]);
    }
    if (error instanceof TimeoutError && options.timeout !== undefined) {
      throw new TimeoutError(what, context.name, options.timeout, ISOLATED_TIMEOUT_ADVICE);
    }
    throw error;
  } finally {
    options.signal?.removeEventListener('abort', onAbort);
    // Its job done, it exits; nobody waits for that.
    worker.shutdown().catch(() => {});
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

/** `promise`, or the call's `TimeoutError` or abort reason if that comes first. */
function untilStopped<T>(promise: Promise<T>, options: CallOptions, what: string, contextName: string): Promise<T> {
  const { timeout, signal } = options;
  if (timeout === undefined && !signal) return promise;
  return new Promise<T>((resolve, reject) => {
    let timer: ReturnType<typeof setTimeout> | undefined;
    const onAbort = () => finish(() => reject(signal?.reason));
    const finish = (settle: () => void) => {
      if (timer) clearTimeout(timer);
      signal?.removeEventListener('abort', onAbort);
      settle();
    };
    if (signal?.aborted) return onAbort();
    signal?.addEventListener('abort', onAbort, { once: true });
    if (timeout !== undefined) {
      timer = setTimeout(() => finish(() => reject(new TimeoutError(what, contextName, timeout))), timeout);
    }
    promise.then(
      (value) => finish(() => resolve(value)),
      (error: unknown) => finish(() => reject(error)),
    );
  });
}

function delay(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms).unref?.());
}
