/**
 * The master's half of `context.copy()`, `context.fetch()` and
 * `router.copy()`: reads or writes on this side, and drives the remote
 * half (remote.ts) through a Channel.
 */
import { basename } from 'node:path';
import { Channel } from '../../core/channel.js';
import { CALL_SERVICE, Context, routerOf } from '../../core/context.js';
import { InvalidOptionError } from '../../core/errors.js';
import { abortSignal, optionsObject } from '../../core/options.js';
import type { Router as CoreRouter } from '../../core/router.js';
import { CALL_SETTLED } from '../../core/sender.js';
import { FileTransferError, fileError } from './errors.js';
import { blame, checkOutcome, isCounts, type Leg, openLeg, runLegs, type TargetRef } from './fan-out.js';
import { Progress, type TransferProgress } from './progress.js';
import { type Output, receiveInto, type SinkOptions, sendPath, type TransferCounts, type Value } from './protocol.js';
import type { RemoteSinkOptions } from './remote.js';

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
   * receiving side has removed its temporary file.
   */
  signal?: AbortSignal;
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
}

function checkOptions(options: TransferOptions | undefined, where: string): Checked {
  const o = optionsObject(options, where);
  const { preserve, mode, onProgress, signal } = o;
  if (preserve !== undefined && typeof preserve !== 'boolean' && (typeof preserve !== 'object' || preserve === null)) {
    throw new InvalidOptionError('preserve', where, 'a boolean or { owner: boolean }', preserve);
  }
  if (mode !== undefined && (!Number.isInteger(mode) || mode < 0 || mode > 0o7777)) {
    throw new InvalidOptionError('mode', where, 'permission bits from 0 to 0o7777', mode);
  }
  if (onProgress !== undefined && typeof onProgress !== 'function') {
    throw new InvalidOptionError('onProgress', where, 'a function', onProgress);
  }
  abortSignal(signal, 'signal', where);
  const owner = preserve === true || (typeof preserve === 'object' && preserve?.owner === true);
  return { owner, mode, onProgress, signal };
}

function checkPath(path: unknown, option: string, where: string): string {
  if (typeof path !== 'string' || path.length === 0 || path.indexOf('\0') >= 0) {
    throw new InvalidOptionError(option, where, 'a non-empty path', path);
  }
  return path;
}

/** A promise that rejects with the signal's reason when it aborts, and its disposal. */
function abortion(signal: AbortSignal | undefined): { promise: Promise<never>; dispose: () => void } {
  if (!signal) return { promise: new Promise<never>(() => undefined), dispose: () => undefined };
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

/** `sendPath` from the master into `out`, stopped by the signal. */
function sourceOf(
  core: CoreRouter,
  localPath: string,
  checked: Checked,
  progress: Progress,
  abort: Promise<never>,
): (out: Output) => Promise<void> {
  return (out) => {
    const sending = sendPath(localPath, out, core.name, {
      owner: checked.owner,
      onBytes: progress.add,
      onBegin: progress.begin,
    });
    // When the abort wins, the send that was waiting fails once the channel closes.
    sending.catch(() => undefined);
    return Promise.race([sending, abort]);
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
  const abort = abortion(checked.signal);
  try {
    const leg = openLeg<unknown>(
      core,
      context,
      'filesReceive',
      [remotePath, sinkArgs(checked)],
      `copy to '${remotePath}'`,
    );
    const { sourceError, settled } = await runLegs([leg], sourceOf(core, localPath, checked, progress, abort.promise));
    const outcome = settled[0] as { ok: true; value: unknown } | { ok: false; error: unknown };
    if (!outcome.ok) throw sourceError ?? outcome.error;
    if (sourceError !== undefined) throw sourceError;
    const result = resultOf(checkedCounts(outcome.value, context, remotePath), started);
    progress.finish(true);
    return result;
  } finally {
    progress.finish(false);
    abort.dispose();
  }
}

/**
 * How the master's sink treats what a child sends for `fetch(remotePath)`:
 * the child may not name the file (it must be `remotePath`'s own name),
 * nor give it modes the user did not ask for.
 */
export function fetchedFrom(remotePath: string, owner: boolean): SinkOptions {
  return { owner, name: basename(remotePath), untrusted: true };
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
  const abort = abortion(checked.signal);
  const channel = new Channel<unknown, Value>(core);
  const call = context[CALL_SERVICE](
    'filesSend',
    [channel.otherEnd(), remotePath, { owner: checked.owner }],
    {},
    `fetch of '${remotePath}'`,
  );
  call.catch(() => undefined);
  const sinkOptions: SinkOptions = {
    ...fetchedFrom(remotePath, checked.owner),
    onBytes: progress.add,
    onBegin: progress.begin,
  };
  if (checked.mode !== undefined) sinkOptions.mode = checked.mode;
  const sink = receiveInto(channel[Symbol.asyncIterator](), localPath, core.name, sinkOptions);
  sink.catch(() => undefined);
  try {
    let counts: TransferCounts;
    try {
      counts = await Promise.race([sink, abort.promise]);
    } catch (error) {
      // Stop the sender, let the sink remove its temporary file, then say why.
      channel[CALL_SETTLED]();
      await sink.catch(() => undefined);
      const remote = await call.then(
        () => undefined,
        (reason: unknown) => reason,
      );
      throw blame(error, remote);
    }
    await call;
    const result = resultOf(counts, started);
    progress.finish(true);
    return result;
  } finally {
    progress.finish(false);
    abort.dispose();
  }
}

/** A handle on a context the master knows only by ID (an intermediate it was not given). */
function handleOf(core: CoreRouter, id: number, known: Map<number, Context>): Context {
  const existing = known.get(id);
  if (existing) return existing;
  return new Context(core, id, core.nameOf(id), -1, { pid: 0, nodeVersion: '', hostname: '', platform: '', arch: '' });
}

/** `router.copy()`: one stream per intermediate, teed there to its children. */
export async function copyToMany(
  core: CoreRouter,
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
  const abort = abortion(checked.signal);
  const sink = sinkArgs(checked);
  const what = `copy to '${remotePath}'`;
  try {
    const legs: { leg: Leg<unknown>; targets: Context[]; direct: boolean }[] = [];
    for (const [parentId, targets] of groups) {
      if (parentId === core.id) {
        for (const target of targets) {
          legs.push({
            leg: openLeg(core, target, 'filesReceive', [remotePath, sink], what),
            targets: [target],
            direct: true,
          });
        }
      } else {
        const refs: TargetRef[] = targets.map((t) => ({ id: t.id, name: t.name }));
        const parent = handleOf(core, parentId, known);
        legs.push({
          leg: openLeg(core, parent, 'filesFanOut', [refs, remotePath, sink], what),
          targets,
          direct: false,
        });
      }
    }
    const { sourceError, settled } = await runLegs(
      legs.map((l) => l.leg),
      sourceOf(core, localPath, checked, progress, abort.promise),
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
      const outcome = settled[i] as { ok: true; value: unknown } | { ok: false; error: unknown };
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
    abort.dispose();
  }
}

function checkedCountsError(context: Context, path: string): Error {
  return new FileTransferError('ERR_TENDRIL_BAD_ENTRY', context.name, path, 'the context returned a malformed result');
}

function asError(reason: unknown, context: Context, path: string): Error {
  return reason instanceof Error ? reason : fileError(reason, context.name, path, 'cannot copy');
}
