/**
 * Stopping an operation whatever the other side does: the one mechanism
 * behind every `signal` and `timeout` option of an operation that waits on
 * another context (a transfer, a command, a file stream).
 *
 * When the caller's signal aborts or the timeout passes, `signal` fires:
 * the operation passes it on (to the remote side, its channels, its
 * sub-operations) so that they stop and clean up. The other side then
 * gets `grace` ms to say it has (a transfer's temporary file removed, a
 * command's process group killed). If it has not by then — it is hostile,
 * hung, or its link is gone — `abandon` fires, the operation lets go of
 * everything it still waits on, and `settle()` rejects with the reason:
 * nothing waits on the other side longer than that.
 *
 * Master side only: it needs AbortController, which Node 12 lacks, so it
 * is not part of the core shipped to children.
 */
import { TimeoutError } from '../core/errors.js';
import { MAX_TIMER, STOP_GRACE } from '../core/options.js';

/** Options of a `Cancellation`. */
export interface CancellationOptions {
  /** The caller's signal, if any. */
  signal?: AbortSignal | undefined;
  /** Stop after this many ms, with a `TimeoutError`. */
  timeout?: number | undefined;
  /** The operation, for the `TimeoutError`: `"copy to '/srv/app'"`. */
  what: string;
  /** The context it waits on, for the `TimeoutError`. */
  contextName: string;
  /** ms the other side gets to clean up after the stop. Default `STOP_GRACE`. */
  grace?: number | undefined;
}

/**
 * How `settle()` ends an operation that reports a stop in its own terms
 * (a command: a `CommandError` carrying its result, saying it timed out or
 * was aborted) rather than with the stop's reason.
 */
export interface SettleOptions<T> {
  /**
   * Called when `abandon` fires before `work` has settled: the operation
   * settles with what it returns (or throws) instead of rejecting with the
   * stop's reason. Default: reject with the reason.
   */
  abandoned?: () => T | PromiseLike<T>;
  /**
   * Keep `work`'s own failure after the stop instead of replacing it with
   * the stop's reason: for work whose errors already say it was stopped.
   * Default false.
   */
  keepFailure?: boolean;
}

/** One operation's stop: see the file's comment. */
export class Cancellation {
  // The AbortControllers are made when first asked for: an operation that
  // runs to its end, as most do, never needs them (each costs about 10 µs
  // with its listeners, on every command).
  private stopController: AbortController | undefined;
  private abandonController: AbortController | undefined;
  private stopped = false;
  private stopReason: unknown;
  private abandoned = false;
  private readonly stopWatchers: (() => void)[] = [];
  private readonly abandonWatchers: (() => void)[] = [];
  private readonly grace: number;
  private timer: ReturnType<typeof setTimeout> | undefined;
  private graceTimer: ReturnType<typeof setTimeout> | undefined;
  private readonly onAbort: () => void;
  private readonly caller: AbortSignal | undefined;
  private settled = false;
  /** Stopped by `fail()`: the work's own failure is the outcome, not the stop's reason. */
  private failedHere = false;

  /** Starts `timeout` (capped at `MAX_TIMER`) now; an already aborted `options.signal` stops it at once. */
  constructor(options: CancellationOptions) {
    this.grace = Math.min(options.grace ?? STOP_GRACE, MAX_TIMER);
    this.caller = options.signal;
    this.onAbort = () => this.cancel(this.caller?.reason);
    if (options.signal?.aborted) this.cancel(options.signal.reason);
    else options.signal?.addEventListener('abort', this.onAbort, { once: true });
    const { timeout } = options;
    if (timeout !== undefined && !this.stopped) {
      this.timer = setTimeout(
        () => this.cancel(new TimeoutError(options.what, options.contextName, timeout)),
        Math.min(timeout, MAX_TIMER),
      );
      // While the operation waits on a call, the router keeps the process alive.
      this.timer.unref?.();
    }
  }

  /** Fires when the operation is to stop: the caller's signal aborted or its timeout passed. */
  get signal(): AbortSignal {
    this.stopController ??= controller(this.stopped, this.stopReason);
    return this.stopController.signal;
  }

  /** Fires `grace` ms after `signal` when the operation has not settled: let go of the other side. */
  get abandon(): AbortSignal {
    this.abandonController ??= controller(this.abandoned, this.stopReason);
    return this.abandonController.signal;
  }

  /** Why the operation stopped, once it has; undefined before. */
  get reason(): unknown {
    return this.stopped ? this.stopReason : undefined;
  }

  /** Calls `watcher` once when the operation is to stop (as `signal` fires), at once if it has. */
  onStop(watcher: () => void): void {
    if (this.stopped) watcher();
    else this.stopWatchers.push(watcher);
  }

  /** Stops the operation now, with `reason` (as the caller's signal would). */
  cancel(reason: unknown): void {
    if (this.stopped || this.settled) return;
    this.clearTimer();
    this.stopped = true;
    this.stopReason = reason;
    this.stopController?.abort(reason);
    for (const watcher of this.stopWatchers.splice(0)) watcher();
    this.graceTimer = setTimeout(() => this.giveUp(), this.grace);
    this.graceTimer.unref?.();
  }

  private giveUp(): void {
    this.abandoned = true;
    this.abandonController?.abort(this.stopReason);
    for (const watcher of this.abandonWatchers.splice(0)) watcher();
  }

  /**
   * Stops the operation because it failed on this side with `error` (the
   * other side sent something refused, or the local half failed): the
   * other side is told as by `cancel`, and gets `grace` ms to clean up
   * before `abandon` fires; `settle()` then rejects with the work's own
   * failure (which may say more, such as the other side's own error), or
   * with `error` if `abandon` fires first.
   */
  fail(error: unknown): void {
    if (this.stopped || this.settled) return;
    this.failedHere = true;
    this.cancel(error);
  }

  /**
   * `work`'s outcome, with one difference once the operation has stopped:
   * a failure then (the other side saw the stop) is the stop's reason, and
   * if `work` has not settled when `abandon` fires, the promise rejects
   * with that reason there and then (`work`'s own outcome, when it comes,
   * is ignored). Work that succeeds despite the stop resolves: it was done.
   * Settling disposes of the timers and the listener on the caller's signal.
   * @param options to settle in the operation's own terms instead (see `SettleOptions`).
   */
  settle<T>(work: Promise<T>, options: SettleOptions<T> = {}): Promise<T> {
    const { abandoned, keepFailure = false } = options;
    return new Promise<T>((resolve, reject) => {
      let done = false;
      const finish = (outcome: () => void) => {
        if (done) return;
        done = true;
        const index = this.abandonWatchers.indexOf(onAbandon);
        if (index !== -1) this.abandonWatchers.splice(index, 1);
        this.dispose();
        outcome();
      };
      const onAbandon = () =>
        finish(() => {
          if (!abandoned) return reject(this.reason);
          try {
            resolve(abandoned());
          } catch (error) {
            reject(error);
          }
        });
      if (this.abandoned) return onAbandon();
      this.abandonWatchers.push(onAbandon);
      work.then(
        (value) => finish(() => resolve(value)),
        (error: unknown) =>
          finish(() => reject(this.stopped && !keepFailure && !this.failedHere ? this.reason : error)),
      );
    });
  }

  /** Stops the timers and the listener on the caller's signal; the operation is over. */
  dispose(): void {
    this.settled = true;
    this.clearTimer();
    if (this.graceTimer) clearTimeout(this.graceTimer);
    this.caller?.removeEventListener('abort', this.onAbort);
  }

  private clearTimer(): void {
    if (this.timer) clearTimeout(this.timer);
    this.timer = undefined;
  }
}

/** An AbortController, already aborted with `reason` when `aborted`. */
function controller(aborted: boolean, reason: unknown): AbortController {
  const made = new AbortController();
  if (aborted) made.abort(reason);
  return made;
}
