/**
 * Copying one source to several contexts: the source is read once and
 * each value goes to every target (a tee), at the pace of the slowest
 * (each send waits for its target's window). Runs in the master for its
 * own children and in an intermediate context for its children, so one
 * stream crosses each hop above the intermediate. Node 12 builtins and
 * src/core only.
 */
import { Channel } from '../../core/channel.js';
import { CALL_SERVICE, Context } from '../../core/context.js';
import { ChannelError, type RemoteErrorInfo, remoteError, toRemoteErrorInfo } from '../../core/errors.js';
import type { Router } from '../../core/router.js';
import { FileTransferError } from './errors.js';
import type { Output, SinkOptions, TransferCounts, Value } from './protocol.js';

/** How each target of a fan-out ended, as it travels back from an intermediate. */
export type Outcome = { ok: true; result: TransferCounts } | { ok: false; error: RemoteErrorInfo };

/** A target named by ID and name (what an intermediate needs to reach its child). */
export interface TargetRef {
  id: number;
  name: string;
}

/** All targets of a tee failed: each has its own error. */
class AllTargetsFailed extends Error {}

/**
 * Sends each value to every output still working, and waits for all of
 * them: the slowest paces. An output whose send fails is dropped (its own
 * call says why); when none is left, `send` rejects.
 */
export class Tee implements Output {
  private readonly failed: boolean[];

  constructor(private readonly outputs: Output[]) {
    this.failed = outputs.map(() => false);
  }

  async send(value: Value): Promise<void> {
    const sends: Promise<void>[] = [];
    this.outputs.forEach((output, i) => {
      if (this.failed[i]) return;
      let sent: Promise<void>;
      try {
        sent = output.send(value);
      } catch {
        this.failed[i] = true;
        return;
      }
      sends.push(
        sent.catch(() => {
          this.failed[i] = true;
        }),
      );
    });
    if (sends.length === 0) throw new AllTargetsFailed('every target of the copy failed');
    await Promise.all(sends);
  }
}

/** One output of a fan-out: a Channel to a service call, and the call. */
export interface Leg<R> {
  channel: Channel<Value, unknown>;
  call: Promise<R>;
}

/** Opens a channel to `service` in `context` with `args` after the channel end. */
export function openLeg<R>(router: Router, context: Context, service: string, args: unknown[], what: string): Leg<R> {
  const channel = new Channel<Value, unknown>(router);
  const call = context[CALL_SERVICE](service, [channel.otherEnd(), ...args], {}, what) as Promise<R>;
  // Settled later, by whoever collects the results; never unhandled meanwhile.
  call.catch(() => undefined);
  return { channel, call };
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
): Promise<{ sourceError: unknown; settled: ({ ok: true; value: R } | { ok: false; error: unknown })[] }> {
  let sourceError: unknown;
  try {
    await source(new Tee(legs.map((leg) => leg.channel)));
  } catch (error) {
    if (!(error instanceof AllTargetsFailed)) sourceError = error;
  }
  for (const leg of legs) leg.channel.close();
  const settled = await Promise.all(
    legs.map((leg) =>
      leg.call.then(
        (value) => ({ ok: true as const, value }),
        (error: unknown) => ({ ok: false as const, error }),
      ),
    ),
  );
  return { sourceError, settled };
}

/**
 * In an intermediate context: receives one transfer on `input` and
 * copies it to each of `targets` (its children), each written by its own
 * `filesReceive`. One target failing does not stop the others.
 */
export async function teeToChildren(
  router: Router,
  input: Channel<unknown, unknown>,
  targets: TargetRef[],
  remotePath: string,
  options: SinkOptions,
): Promise<Outcome[]> {
  const legs = targets.map((target) =>
    openLeg<TransferCounts>(
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
