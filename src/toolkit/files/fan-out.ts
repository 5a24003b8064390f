/**
 * Copying one source to several contexts: the source is read once and
 * each value goes to every target (a tee), at the pace of the slowest
 * (each send waits for its target's window). Runs in the master for its
 * own children and in an intermediate context for its children, so one
 * stream crosses each hop above the intermediate. Node 12 builtins and
 * src/core only.
 */
import { Channel } from '../../core/channel.js';
import { CALL_TOOLKIT, Context } from '../../core/context.js';
import { ChannelError, type RemoteErrorInfo, remoteError, TendrilError, toRemoteErrorInfo } from '../../core/errors.js';
import { ABANDON } from '../../core/sender.js';
import type { MessageSwitch } from '../../core/switch.js';
import { FileTransferError } from './errors.js';
import { type Output, sendValue, type TransferCounts, type Value } from './protocol.js';
import type { SinkOptions } from './sink.js';

/** How each target of a fan-out ended, as it travels back from an intermediate. */
export type Outcome = { ok: true; result: TransferCounts } | { ok: false; error: RemoteErrorInfo };

/** A target named by ID and name (what an intermediate needs to reach its child). */
export interface TargetRef {
  /** Its context ID; the intermediate takes it as `Number(id)` and routes to it like any call. */
  id: number;
  /** Its name, for errors; the intermediate takes it as `String(name)`. */
  name: string;
}

/** All targets of a tee failed: each has its own error. */
class AllTargetsFailed extends Error {}

/** How long `router.copy` waits on a target that takes no data, or gives no answer once the data has ended, by default: 30 s. */
export const DEFAULT_STALL_TIMEOUT = 30_000;

/**
 * What a leg's call takes as its `signal`: the part of AbortSignal a call
 * uses. Intermediate contexts may run Node 12, which has no AbortController.
 */
class StopSignal {
  aborted = false;
  reason: unknown = undefined;
  private readonly listeners: (() => void)[] = [];

  addEventListener(_type: 'abort', listener: () => void): void {
    if (!this.aborted) this.listeners.push(listener);
  }

  removeEventListener(_type: 'abort', listener: () => void): void {
    const index = this.listeners.indexOf(listener);
    if (index >= 0) this.listeners.splice(index, 1);
  }

  abort(reason: unknown): void {
    if (this.aborted) return;
    this.aborted = true;
    this.reason = reason;
    for (const listener of this.listeners.splice(0)) listener();
  }
}

/** How long a leg may go without progress before it is failed alone (see `Leg`); unset: no limit. */
export interface StallLimits {
  /** Most ms one send to it may wait (for its hello, or for credit). */
  data: number;
  /** Most ms its call may take to answer once its channel has closed. */
  answer: number;
}

/** How one leg's call ended: its value, or why it failed. */
export type Settled<R> = { ok: true; value: R } | { ok: false; error: unknown };

/**
 * One output of a fan-out: a Channel to a service call in `context`, and
 * the call. A leg can be given up on alone (`abort`): its channel is
 * abandoned (the target is told, and drops its partial file; sends waiting
 * for it reject), its call is no longer waited for, and its outcome is the
 * reason. With `limits`, a leg that makes no progress for that long is
 * given up on as stalled (`ERR_TENDRIL_STALLED`), so one target cannot
 * hold back the others. Once its call has settled, its channel is let go
 * of the same way: a target cannot keep values queued here after it.
 */
export class Leg<R> {
  /** This end of the channel the data goes out on; the call there reads the other. */
  readonly channel: Channel<Value, unknown>;
  private readonly call: Promise<R>;
  /** Why it was given up on, once it was: its outcome. */
  stopped: unknown = undefined;
  /** A send to it failed: its call says why. */
  failed = false;
  private readonly stop = new StopSignal();

  /**
   * @param router the router of this context.
   * @param context the target (or the intermediate that tees to targets).
   * @param service the service function called there, with the channel's end first and then `args`.
   * @param what the call, for errors: `"copy to '/srv/app'"`.
   * @param path the path written there, for errors.
   * @param limits when to fail it as stalled; unset: never.
   */
  constructor(
    router: MessageSwitch,
    private readonly context: Context,
    service: string,
    args: unknown[],
    what: string,
    private readonly path: string,
    /** When it is failed as stalled (the tee reads `data`, `settled()` `answer`); unset: never. */
    readonly limits?: StallLimits,
  ) {
    this.channel = new Channel<Value, unknown>(router);
    this.call = context[CALL_TOOLKIT](
      service,
      [this.channel.otherEnd(), ...args],
      { signal: this.stop as unknown as AbortSignal },
      what,
    ) as Promise<R>;
    // Once the call has settled, nobody there reads what is sent and nothing it sends is read: a context
    // that keeps its end open cannot keep values queued here. (Its outcome is collected later, never
    // unhandled meanwhile.)
    const letGo = () => this.channel[ABANDON](new ChannelError(context.name, context.id, `the ${what} has ended`));
    this.call.then(letGo, letGo);
  }

  /** Still sent to: no send failed, not given up on. */
  get live(): boolean {
    return !this.failed && this.stopped === undefined;
  }

  /** Gives up on this leg, with `reason` as its outcome (see the class). */
  abort(reason: unknown): void {
    if (this.stopped !== undefined) return;
    this.stopped = reason;
    const error =
      reason instanceof TendrilError
        ? reason
        : new ChannelError(this.context.name, this.context.id, `the transfer was stopped: ${String(reason)}`);
    this.channel[ABANDON](error);
    this.stop.abort(reason);
  }

  /** Gives up on this leg for making no progress for `ms` (see the class). */
  stall(ms: number, doing: string): void {
    this.abort(
      new FileTransferError(
        'ERR_TENDRIL_STALLED',
        this.context.name,
        this.path,
        `stopped taking data: ${doing} for ${ms} ms (stallTimeout); the copy to it was given up so that the other targets could go on`,
      ),
    );
  }

  /** The call's outcome, once its channel has closed; with limits, a call that does not answer in time is given up on. */
  settled(): Promise<Settled<R>> {
    const limit = this.limits?.answer;
    const timer =
      limit === undefined || this.stopped !== undefined
        ? undefined
        : setTimeout(() => this.stall(limit, 'no answer once the data had ended'), limit);
    const done = () => {
      if (timer) clearTimeout(timer);
    };
    return this.call.then(
      (value): Settled<R> => {
        done();
        return { ok: true, value };
      },
      (error: unknown): Settled<R> => {
        done();
        return { ok: false, error: this.stopped ?? error };
      },
    );
  }
}

/**
 * Sends each value to every leg still working, and waits for all of them:
 * the slowest paces. A leg whose send fails is dropped (its own call says
 * why), and so is one whose send waits longer than its limit (stalled);
 * when none is left, `send` rejects.
 */
export class Tee implements Output {
  /** @param legs the outputs, each already calling its target. */
  constructor(private readonly legs: Leg<unknown>[]) {}

  /**
   * Resolves once every live leg has taken `value` (or failed, or stalled).
   * @throws Error when no leg is left: every target failed, each with its own error.
   */
  async send(value: Value, release?: () => void): Promise<void> {
    const sends: Promise<void>[] = [];
    const timers: ReturnType<typeof setTimeout>[] = [];
    // Released once every leg it went to has read it; a leg that fails never says so.
    let reading = 1;
    const readBy = release && (() => --reading === 0 && release());
    for (const leg of this.legs) {
      if (!leg.live) continue;
      let sent: Promise<void>;
      try {
        if (readBy) reading++;
        sent = sendValue(leg.channel, value, readBy);
      } catch {
        leg.failed = true;
        continue;
      }
      let waiting = true;
      sends.push(
        sent.then(
          () => {
            waiting = false;
          },
          () => {
            waiting = false;
            leg.failed = true;
          },
        ),
      );
      const limit = leg.limits?.data;
      // Given up on, its channel is abandoned: the waiting send rejects, and the others go on.
      if (limit !== undefined) {
        timers.push(setTimeout(() => waiting && leg.stall(limit, 'nothing taken'), limit));
      }
    }
    if (sends.length === 0) throw new AllTargetsFailed('every target of the copy failed');
    readBy?.();
    try {
      await Promise.all(sends);
    } finally {
      for (const timer of timers) clearTimeout(timer);
    }
  }
}

/**
 * Runs `source` into a tee of `legs`, closes them (after `end` when the
 * source finished, so targets keep what they received; before it
 * otherwise, so they drop their partial file), and waits for every call.
 * @returns the source's own failure (not one caused by all targets
 *   failing), and each call's settlement.
 */
export async function runLegs<R>(
  legs: Leg<R>[],
  source: (out: Output) => Promise<void>,
): Promise<{ sourceError: unknown; settled: Settled<R>[] }> {
  let sourceError: unknown;
  try {
    await source(new Tee(legs as Leg<unknown>[]));
  } catch (error) {
    if (!(error instanceof AllTargetsFailed)) sourceError = error;
  }
  for (const leg of legs) leg.channel.close();
  const settled = await Promise.all(legs.map((leg) => leg.settled()));
  return { sourceError, settled };
}

/** Options an intermediate's fan-out takes from the master. */
export interface FanOutOptions {
  /** Each child's stall limit in ms (see `StallLimits`); unset: none. */
  stallTimeout?: number;
}

/**
 * In an intermediate context: receives one transfer on `input` and
 * copies it to each of `targets` (its children), each written by its own
 * `filesReceive`. One target failing, or stalling past `stallTimeout`,
 * does not stop the others.
 */
export async function teeToChildren(
  router: MessageSwitch,
  input: Channel<unknown, unknown>,
  targets: TargetRef[],
  remotePath: string,
  options: SinkOptions,
  fanOut: FanOutOptions = {},
): Promise<Outcome[]> {
  const { stallTimeout } = fanOut;
  const limits = stallTimeout === undefined ? undefined : { data: stallTimeout, answer: stallTimeout };
  const legs = targets.map(
    (target) =>
      new Leg<TransferCounts>(
        router,
        new Context(router, target.id, target.name, router.id, {
          pid: 0,
          nodeVersion: '',
          hostname: '',
          platform: '',
          arch: '',
        }),
        'filesReceive',
        [remotePath, options],
        `copy to ${remotePath}`,
        remotePath,
        limits,
      ),
  );
  const { sourceError, settled } = await runLegs(legs, async (out) => {
    for await (const value of input) {
      await out.send(value as Value);
      if (typeof value === 'object' && value !== null && (value as { t?: unknown }).t === 'end') return;
    }
    throw new FileTransferError(
      'ERR_TENDRIL_TRANSFER_INTERRUPTED',
      router.name,
      remotePath,
      'the transfer stopped before its end (the sending side failed, was aborted, or went away)',
    );
  });
  return settled.map(
    (outcome): Outcome =>
      outcome.ok
        ? { ok: true, result: outcome.value }
        : { ok: false, error: toRemoteErrorInfo(blame(outcome.error, sourceError)) },
  );
}

/** True for the error of a target whose sending side stopped early. */
function isInterrupted(error: unknown): boolean {
  return error instanceof FileTransferError && error.code === 'ERR_TENDRIL_TRANSFER_INTERRUPTED';
}

/**
 * The error to report for a receiving side that failed with `error`: the
 * sending side's own failure when the receiver only saw the transfer stop
 * (its channel closed, or the data ended early), else `error` itself.
 */
export function blame(error: unknown, sourceError: unknown): unknown {
  return sourceError !== undefined && (isInterrupted(error) || error instanceof ChannelError) ? sourceError : error;
}

/** An outcome from an intermediate, checked (it is untrusted), as a result or an error. */
export function checkOutcome(
  value: unknown,
  target: TargetRef,
): { ok: true; result: TransferCounts } | { ok: false; error: Error } {
  const outcome = value as Outcome | undefined;
  if (outcome && outcome.ok === true && isCounts(outcome.result)) return { ok: true, result: outcome.result };
  if (outcome && outcome.ok === false && typeof outcome.error === 'object' && outcome.error !== null) {
    return { ok: false, error: remoteError(outcome.error, target.name, target.id) };
  }
  return {
    ok: false,
    error: new FileTransferError('ERR_TENDRIL_BAD_ENTRY', target.name, '', 'its intermediate sent a malformed result'),
  };
}

/** Whether `value` has the shape of `TransferCounts` (checked: it comes from a child). */
export function isCounts(value: unknown): value is TransferCounts {
  if (typeof value !== 'object' || value === null) return false;
  const counts = value as TransferCounts;
  const count = (n: unknown) => typeof n === 'number' && Number.isSafeInteger(n) && n >= 0;
  return (
    count(counts.files) &&
    count(counts.directories) &&
    count(counts.links) &&
    count(counts.bytes) &&
    (counts.sha256 === undefined || (typeof counts.sha256 === 'string' && /^[0-9a-f]{64}$/.test(counts.sha256)))
  );
}
