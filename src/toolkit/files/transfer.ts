/**
 * The master's half of `context.copy()`, `context.fetch()` and
 * `router.copy()`: reads or writes on this side, and drives the remote
 * half (remote.ts) through a Channel.
 */
import { basename } from 'node:path';
import { Channel } from '../../core/channel.js';
import { CALL_TOOLKIT, Context, routerOf } from '../../core/context.js';
import { ChannelError, InvalidOptionError } from '../../core/errors.js';
import { abortSignal, knownOptions, MAX_TIMER, milliseconds, optionsObject } from '../../core/options.js';
import { ABANDON, CALL_SETTLED } from '../../core/sender.js';
import type { MessageSwitch } from '../../core/switch.js';
import { Cancellation } from '../cancellation.js';
import { FileTransferError, fileError } from './errors.js';
import {
  blame,
  checkOutcome,
  DEFAULT_STALL_TIMEOUT,
  isCounts,
  Leg,
  runLegs,
  type Settled,
  type TargetRef,
} from './fan-out.js';
import { Progress, type TransferProgress } from './progress.js';
import type { Output, TransferCounts, Value } from './protocol.js';
import type { RemoteSinkOptions } from './remote.js';
import { sendPath } from './send.js';
import { receiveInto, type SinkOptions } from './sink.js';

/** Options of `context.copy()`, `context.fetch()` and `router.copy()`. */
export interface TransferOptions {
  /**
   * Keep owner and group too (`true`, or `{ owner: true }`), when the
   * writing side runs as root; otherwise they are those of the writing
   * account. Modes and modification times are always kept. Default false.
   */
  preserve?: boolean | { owner?: boolean };
  /** Permission bits of the written file (a single file only), instead of the source's, e.g. `0o600`. */
  mode?: number;
  /**
   * Called every 200 ms while the transfer runs, and once at its end,
   * with bytes moved, total bytes and the rate; exceptions it throws are
   * ignored.
   */
  onProgress?: (progress: TransferProgress) => void;
  /**
   * Stops the transfer: it rejects with the signal's reason once the
   * writing side has removed its temporary file, or `STOP_GRACE` (2 s)
   * after the abort when that side does not say so (hung, or hostile):
   * nothing waits on a context longer than that. `router.copy()` then
   * resolves with every target's outcome rejected with the reason.
   */
  signal?: AbortSignal;
  /**
   * Stops the transfer after this many ms, as `signal` does, with a
   * `TimeoutError` (for `router.copy()`, every target's outcome rejected
   * with it). Default: no limit (`router.copy()` still fails a target
   * that stalls: `stallTimeout`).
   */
  timeout?: number;
  /**
   * `fetch()` only: take a directory (a tree), as `scp -r` and `cp -r`
   * ask. Default false: `fetch()` takes one regular file (a symlink at
   * `remotePath` is followed there, as `cp` and `scp` do); a directory
   * fails with `EISDIR`, and a context that sends a tree or a symlink
   * anyway is refused (`ERR_TENDRIL_BAD_ENTRY`) before anything is
   * written. With it, `remotePath` is taken as it is, and symlinks (the
   * root too, when `remotePath` is one) are written as links pointing
   * wherever the context says, never followed while writing. A tree lands
   * at `localPath` when nothing is there, else (an existing directory, or
   * a path ending with `/`) in `localPath/<base name of remotePath>`: the
   * master names it, never the context.
   */
  recursive?: boolean;
  /**
   * `fetch()` only, with `recursive`: merge the tree into a directory that
   * is already where it lands (its files replaced, others kept). Default
   * false: the fetch fails with `EEXIST` before anything is written.
   */
  merge?: boolean;
  /**
   * `router.copy()` only: milliseconds a target may take no data (or,
   * once the data has ended, give no answer) before it fails alone with
   * `ERR_TENDRIL_STALLED`, so that it cannot hold back the others. A
   * context that tees the copy to its own children is given twice that
   * for data (it waits that long on each of them), and that times its
   * targets plus two for its answer. Default 30000 (30 s).
   */
  stallTimeout?: number;
}

/** What a transfer moved. */
export interface TransferResult {
  /** Regular files written. */
  files: number;
  /** Directories created or merged into (the root included). */
  directories: number;
  /** Symlinks written (as links; never followed). */
  links: number;
  /** File data bytes written. */
  bytes: number;
  /** Milliseconds from the call to its end. */
  durationMs: number;
  /** SHA-256 (hex) of the file's bytes, when the transfer was a single file. */
  sha256?: string;
}

/** One target's end of `router.copy()`: like `Promise.allSettled`'s, with its context. */
export type CopyOutcome =
  | { context: Context; status: 'fulfilled'; value: TransferResult }
  | { context: Context; status: 'rejected'; reason: Error };

interface Checked {
  owner: boolean;
  mode: number | undefined;
  onProgress: ((progress: TransferProgress) => void) | undefined;
  signal: AbortSignal | undefined;
  timeout: number | undefined;
  recursive: boolean;
  merge: boolean;
  stallTimeout: number;
}

/** The options a transfer takes (`TransferOptions`). */
const TRANSFER_OPTIONS = new Set([
  'preserve',
  'mode',
  'onProgress',
  'signal',
  'timeout',
  'recursive',
  'merge',
  'stallTimeout',
]);

function checkOptions(options: TransferOptions | undefined, where: string): Checked {
  const o = optionsObject(options, where);
  knownOptions(o, TRANSFER_OPTIONS, where);
  const { preserve, mode, onProgress, signal, recursive, merge } = o;
  if (preserve !== undefined && typeof preserve !== 'boolean' && (typeof preserve !== 'object' || preserve === null)) {
    throw new InvalidOptionError('preserve', where, 'a boolean or { owner: boolean }', preserve);
  }
  if (mode !== undefined && (!Number.isInteger(mode) || mode < 0 || mode > 0o7777)) {
    throw new InvalidOptionError('mode', where, 'permission bits from 0 to 0o7777', mode);
  }
  if (onProgress !== undefined && typeof onProgress !== 'function') {
    throw new InvalidOptionError('onProgress', where, 'a function', onProgress);
  }
  if (recursive !== undefined && typeof recursive !== 'boolean') {
    throw new InvalidOptionError('recursive', where, 'a boolean', recursive);
  }
  if (merge !== undefined && typeof merge !== 'boolean') {
    throw new InvalidOptionError('merge', where, 'a boolean', merge);
  }
  abortSignal(signal, 'signal', where);
  const timeout = milliseconds(o.timeout, 'timeout', where, undefined);
  const stallTimeout = milliseconds(o.stallTimeout, 'stallTimeout', where, DEFAULT_STALL_TIMEOUT, 1);
  const owner = preserve === true || (typeof preserve === 'object' && preserve?.owner === true);
  return {
    owner,
    mode,
    onProgress,
    signal,
    timeout,
    recursive: recursive === true,
    merge: merge === true,
    stallTimeout,
  };
}

function checkPath(path: unknown, option: string, where: string): string {
  if (typeof path !== 'string' || path.length === 0 || path.indexOf('\0') >= 0) {
    throw new InvalidOptionError(option, where, 'a non-empty path', path);
  }
  return path;
}

/** A promise that rejects with the signal's reason when it aborts, and its disposal. */
function abortion(signal: AbortSignal): { promise: Promise<never>; dispose: () => void } {
  let dispose: () => void = () => undefined;
  const promise = new Promise<never>((_resolve, reject) => {
    if (signal.aborted) return reject(signal.reason);
    const onAbort = () => reject(signal.reason);
    signal.addEventListener('abort', onAbort, { once: true });
    dispose = () => signal.removeEventListener('abort', onAbort);
  });
  promise.catch(() => undefined);
  return { promise, dispose: () => dispose() };
}

/** Calls `then` when `signal` aborts (at once if it has); returns the listener's disposal. */
function whenAborted(signal: AbortSignal, then: () => void): () => void {
  if (signal.aborted) {
    then();
    return () => undefined;
  }
  signal.addEventListener('abort', then, { once: true });
  return () => signal.removeEventListener('abort', then);
}

function sinkArgs(checked: Checked): RemoteSinkOptions {
  return checked.mode === undefined ? { owner: checked.owner } : { owner: checked.owner, mode: checked.mode };
}

function resultOf(counts: TransferCounts, started: number): TransferResult {
  const result: TransferResult = {
    files: counts.files,
    directories: counts.directories,
    links: counts.links,
    bytes: counts.bytes,
    durationMs: Date.now() - started,
  };
  if (counts.sha256 !== undefined) result.sha256 = counts.sha256;
  return result;
}

/** The counts a child returned, checked. */
function checkedCounts(value: unknown, context: Context, path: string): TransferCounts {
  if (isCounts(value)) return value;
  throw checkedCountsError(context, path);
}

/**
 * `sendPath` from the master into `out`, stopped by `cancel`. A failure
 * here stops the operation too, so that waiting for the targets to say
 * they dropped their partial file is bounded.
 */
function sourceOf(
  core: MessageSwitch,
  localPath: string,
  checked: Checked,
  progress: Progress,
  cancel: Cancellation,
): (out: Output) => Promise<void> {
  return async (out) => {
    const sending = sendPath(localPath, out, core.name, {
      owner: checked.owner,
      onBytes: progress.add,
      onBegin: progress.begin,
    });
    // When the stop wins, the send that was waiting fails once the channel closes.
    sending.catch(() => undefined);
    const stopped = abortion(cancel.signal);
    try {
      await Promise.race([sending, stopped.promise]);
    } catch (error) {
      cancel.fail(error);
      throw error;
    } finally {
      stopped.dispose();
    }
  };
}

/** `context.copy()`. */
export async function copy(
  context: Context,
  localPath: string,
  remotePath: string,
  options?: TransferOptions,
): Promise<TransferResult> {
  const started = Date.now();
  const where = 'context.copy()';
  checkPath(localPath, 'localPath', where);
  checkPath(remotePath, 'remotePath', where);
  const checked = checkOptions(options, where);
  const core = routerOf(context);
  const progress = new Progress(checked.onProgress);
  const what = `copy to '${remotePath}'`;
  const cancel = new Cancellation({
    signal: checked.signal,
    timeout: checked.timeout,
    what,
    contextName: context.name,
  });
  const leg = new Leg<unknown>(core, context, 'filesReceive', [remotePath, sinkArgs(checked)], what, remotePath);
  // Past the grace, the context's answer is no longer waited for.
  const letGo = whenAborted(cancel.abandon, () => leg.abort(cancel.reason));
  try {
    const result = await cancel.settle(
      (async () => {
        const { sourceError, settled } = await runLegs([leg], sourceOf(core, localPath, checked, progress, cancel));
        const outcome = settled[0] as Settled<unknown>;
        if (!outcome.ok) throw sourceError ?? outcome.error;
        if (sourceError !== undefined) throw sourceError;
        return resultOf(checkedCounts(outcome.value, context, remotePath), started);
      })(),
    );
    progress.finish(true);
    return result;
  } finally {
    progress.finish(false);
    letGo();
  }
}

/**
 * How the master's sink treats what a child sends for `fetch(remotePath)`:
 * the child may not name what it sends (it must be `remotePath`'s own
 * name), send a tree or a symlink unless asked for a tree (`recursive`),
 * merge it into a directory that is there unless asked to (`merge`), leave
 * a size unsaid, or give modes the user did not ask for; a tree lands as
 * `cp -r` puts it.
 */
export function fetchedFrom(
  remotePath: string,
  options: { owner?: boolean; recursive?: boolean; merge?: boolean } = {},
): SinkOptions {
  return {
    owner: options.owner === true,
    name: basename(remotePath),
    untrusted: true,
    recursive: options.recursive === true,
    treeInto: true,
    merge: options.merge === true,
  };
}

/** `context.fetch()`. */
export async function fetch(
  context: Context,
  remotePath: string,
  localPath: string,
  options?: TransferOptions,
): Promise<TransferResult> {
  const started = Date.now();
  const where = 'context.fetch()';
  checkPath(remotePath, 'remotePath', where);
  checkPath(localPath, 'localPath', where);
  const checked = checkOptions(options, where);
  const core = routerOf(context);
  const progress = new Progress(checked.onProgress);
  const what = `fetch of '${remotePath}'`;
  const cancel = new Cancellation({
    signal: checked.signal,
    timeout: checked.timeout,
    what,
    contextName: context.name,
  });
  const channel = new Channel<unknown, Value>(core);
  // Closing this end tells the child (its sends fail) and ends the sink's input once what came is read.
  const stopReading = () => channel[CALL_SETTLED]();
  const unlisten = whenAborted(cancel.signal, stopReading);
  const call = context[CALL_TOOLKIT](
    'filesSend',
    [channel.otherEnd(), remotePath, { owner: checked.owner, recursive: checked.recursive }],
    { signal: cancel.abandon },
    what,
  );
  // The child's answer ends the transfer: what it sent before is read, nothing after (a
  // child whose call failed, or that answered, cannot keep the sink waiting).
  const answer = call.then(
    () => undefined,
    (reason: unknown) => reason,
  );
  void answer.then(stopReading);
  const holding = core.holding(context.id, what);
  const sinkOptions: SinkOptions = {
    ...fetchedFrom(remotePath, checked),
    holding,
    onBytes: progress.add,
    onBegin: progress.begin,
  };
  if (checked.mode !== undefined) sinkOptions.mode = checked.mode;
  const receiving = receiveInto(channel[Symbol.asyncIterator](), localPath, core.name, sinkOptions);
  // Once the sink has stopped (its input always ends: every way out closes the channel), it charges no
  // more and reads nothing more: what the child sent past the point it failed is dropped, not kept.
  const sinkDone = () => {
    holding.close();
    channel[ABANDON](new ChannelError(context.name, context.id, `the ${what} has ended`));
  };
  receiving.then(sinkDone, sinkDone);
  try {
    const result = await cancel.settle(
      (async () => {
        let counts: TransferCounts;
        try {
          counts = await receiving;
        } catch (error) {
          // Tell the child, and wait (the grace at most) for its answer: it may say why the data stopped.
          cancel.fail(error);
          throw blame(error, await answer);
        }
        await call;
        return resultOf(counts, started);
      })(),
    );
    progress.finish(true);
    return result;
  } finally {
    progress.finish(false);
    unlisten();
  }
}

/** A handle on a context the master knows only by ID (an intermediate it was not given). */
function handleOf(core: MessageSwitch, id: number, known: Map<number, Context>): Context {
  const existing = known.get(id);
  if (existing) return existing;
  return new Context(core, id, core.nameOf(id), -1, { pid: 0, nodeVersion: '', hostname: '', platform: '', arch: '' });
}

/** `ms` times `factor`, as a timer can take it. */
function scaled(ms: number, factor: number): number {
  return Math.min(ms * factor, MAX_TIMER);
}

/** `router.copy()`: one stream per intermediate, teed there to its children. */
export async function copyToMany(
  core: MessageSwitch,
  localPath: string,
  remotePath: string,
  contexts: Context[],
  options?: TransferOptions,
): Promise<CopyOutcome[]> {
  const started = Date.now();
  const where = 'router.copy()';
  checkPath(localPath, 'localPath', where);
  checkPath(remotePath, 'remotePath', where);
  if (!Array.isArray(contexts) || contexts.some((c) => typeof c?.id !== 'number')) {
    throw new InvalidOptionError('contexts', where, 'an array of contexts', contexts);
  }
  const checked = checkOptions(options, where);
  if (contexts.length === 0) return [];
  const known = new Map(contexts.map((c) => [c.id, c]));
  // Targets grouped by the context that started them: the master's own children get a stream each, others one per parent.
  const groups = new Map<number, Context[]>();
  for (const context of contexts) {
    const group = groups.get(context.parentId) ?? [];
    if (!group.includes(context)) group.push(context);
    groups.set(context.parentId, group);
  }
  const progress = new Progress(checked.onProgress);
  const sink = sinkArgs(checked);
  const what = `copy to '${remotePath}'`;
  const stall = checked.stallTimeout;
  const cancel = new Cancellation({ signal: checked.signal, timeout: checked.timeout, what, contextName: core.name });
  const legs: { leg: Leg<unknown>; targets: Context[]; direct: boolean }[] = [];
  for (const [parentId, targets] of groups) {
    if (parentId === core.id) {
      for (const target of targets) {
        const leg = new Leg(core, target, 'filesReceive', [remotePath, sink], what, remotePath, {
          data: stall,
          answer: stall,
        });
        legs.push({ leg, targets: [target], direct: true });
      }
    } else {
      const refs: TargetRef[] = targets.map((t) => ({ id: t.id, name: t.name }));
      const parent = handleOf(core, parentId, known);
      // It waits up to `stall` on each of its children before it fails them: so much more for it.
      const leg = new Leg(
        core,
        parent,
        'filesFanOut',
        [refs, remotePath, sink, { stallTimeout: stall }],
        what,
        remotePath,
        { data: scaled(stall, 2), answer: scaled(stall, targets.length + 2) },
      );
      legs.push({ leg, targets, direct: false });
    }
  }
  const letGo = whenAborted(cancel.abandon, () => {
    for (const { leg } of legs) leg.abort(cancel.reason);
  });
  try {
    const { sourceError, settled } = await runLegs(
      legs.map((l) => l.leg),
      sourceOf(core, localPath, checked, progress, cancel),
    );
    const outcomes = new Map<Context, CopyOutcome>();
    const fail = (context: Context, error: unknown) => {
      outcomes.set(context, {
        context,
        status: 'rejected',
        reason: asError(blame(error, sourceError), context, remotePath),
      });
    };
    legs.forEach(({ targets, direct }, i) => {
      const outcome = settled[i] as Settled<unknown>;
      if (!outcome.ok) {
        for (const target of targets) fail(target, outcome.error);
        return;
      }
      if (direct) {
        const target = targets[0] as Context;
        if (isCounts(outcome.value)) {
          outcomes.set(target, { context: target, status: 'fulfilled', value: resultOf(outcome.value, started) });
        } else fail(target, checkedCountsError(target, remotePath));
        return;
      }
      const list = Array.isArray(outcome.value) && outcome.value.length === targets.length ? outcome.value : [];
      targets.forEach((target, j) => {
        const checkedOutcome = checkOutcome(list[j], { id: target.id, name: target.name });
        if (checkedOutcome.ok) {
          outcomes.set(target, {
            context: target,
            status: 'fulfilled',
            value: resultOf(checkedOutcome.result, started),
          });
        } else fail(target, checkedOutcome.error);
      });
    });
    progress.finish(true);
    return contexts.map((context) => outcomes.get(context) as CopyOutcome);
  } finally {
    progress.finish(false);
    letGo();
    cancel.dispose();
  }
}

function checkedCountsError(context: Context, path: string): Error {
  return new FileTransferError('ERR_TENDRIL_BAD_ENTRY', context.name, path, 'the context returned a malformed result');
}

function asError(reason: unknown, context: Context, path: string): Error {
  return reason instanceof Error ? reason : fileError(reason, context.name, path, 'cannot copy');
}
