/**
 * The `Context` a program holds: the core's handle on a context (calls,
 * modules, services, shutdown: src/core/context.ts) with the toolkit's
 * methods, commands and files, each a thin delegation to the module that
 * implements it. Declared here, below the `Router` facade, because the
 * toolkit's own types (pool leases, fleets, the listener client) hand it
 * to the program; the connection methods make it through the factory the
 * facade gives the master's switch.
 */
import type { Readable } from 'node:stream';
import { CALL_TOOLKIT, type CallOptions, Context as CoreContext, SEND_ISOLATED } from '../core/context.js';
import { checkOperationOptions, type OperationOptions } from '../core/options.js';
import type { CallPayload } from '../core/protocol/call-function.js';
import type { Command } from './commands/command.js';
import { type CommandTag, exec as execIn, tag as tagIn } from './commands/exec.js';
import type { ExecOptions } from './commands/options.js';
import type { TemplateValue } from './commands/template.js';
import {
  createReadStream,
  createWriteStream,
  type FileWriteStream,
  type ReadStreamOptions,
  type WriteStreamOptions,
} from './files/streams.js';
import { copy, fetch, type TransferOptions, type TransferResult } from './files/transfer.js';
import { sendIsolated } from './isolation.js';
import type { CommandJobResult } from './jobs/errors.js';
import type { Job } from './jobs/job.js';
import type { JobStatus } from './jobs/protocol.js';
import { type CommandJobOptions, execJob, type FunctionJobOptions, jobOf, jobsOf, startJob } from './jobs/start.js';

// biome-ignore lint/suspicious/noExplicitAny: parameter types are inferred from the caller's function.
type AnyFunction = (...args: any[]) => unknown;

/**
 * A handle on a context (a Node interpreter in the tree): call functions
 * and modules in it, run commands, move files, and shut it down. Made by
 * `router.local()` and the other connection methods, `router.pool`, a
 * fleet and the listener client; a program does not construct one.
 */
export class Context extends CoreContext {
  /**
   * This context's temporary directory on its host: made on first use
   * with mode 0700 under the target's temporary directory (`os.tmpdir()`
   * there), shared by every call (code in the context gets it from
   * `thisContext().tmpdir()`), and removed when the context exits: at
   * shutdown, when the master goes away, on SIGTERM (not SIGKILL).
   * @param options `timeout` (ms) and `signal` of the wait. Default: no limit.
   * @returns its absolute path on the target.
   * @throws CallError when it cannot be made there; ContextDisconnectedError when the context is gone.
   * @throws TimeoutError past the timeout; the signal's reason when it aborts.
   */
  tmpdir(options: OperationOptions = {}): Promise<string> {
    let given: OperationOptions;
    try {
      given = checkOperationOptions(options, 'context.tmpdir()');
    } catch (error) {
      return Promise.reject(error);
    }
    return this[CALL_TOOLKIT](
      'contextTmpdir',
      [],
      { timeout: given.timeout, signal: given.signal },
      'tmpdir',
    ) as Promise<string>;
  }

  /** Sends a call prepared for this context to a fresh interpreter of its (`CallOptions.isolate`). */
  [SEND_ISOLATED](call: CallPayload, references: object[], options: CallOptions, what: string): Promise<unknown> {
    return sendIsolated(this, call, references, options, what);
  }

  /**
   * Runs `file` in this context with `args` as its argument vector (no
   * shell, so nothing needs quoting; `shell: true` opts in), in a process
   * group of its own that is killed on `timeout`, `signal`, `kill()`, and
   * when the context shuts down or loses the master.
   *
   * ```ts
   * const { stdout } = await context.exec('uname', ['-r']);
   * ```
   *
   * @returns a `Command`: await it for its `CommandResult`, or read
   *   `command.lines()`, `stdout` and `stderr` while it runs.
   * @throws InvalidOptionError (synchronously) for a bad file, argument or option.
   * @throws CommandError (as its rejection) when it fails and `reject` is not false:
   *   a non-zero exit, a signal, a timeout, an abort, over `maxBuffer`, or not started.
   * @throws ContextDisconnectedError / ChannelError (as its rejection) when the context goes away.
   */
  exec(file: string, args?: readonly string[], options?: ExecOptions & { encoding?: 'utf8' }): Command<string>;
  /** `exec` with `encoding: 'buffer'`: stdout and stderr are Buffers. */
  exec(
    file: string,
    args: readonly string[] | undefined,
    options: ExecOptions & { encoding: 'buffer' },
  ): Command<Buffer>;
  /** `exec` without arguments. */
  exec(file: string, options: ExecOptions & { encoding?: 'utf8' }): Command<string>;
  /** `exec` without arguments, with `encoding: 'buffer'`. */
  exec(file: string, options: ExecOptions & { encoding: 'buffer' }): Command<Buffer>;
  exec(
    file: string,
    argsOrOptions?: readonly string[] | ExecOptions,
    options?: ExecOptions,
  ): Command<string> | Command<Buffer> {
    return execIn(this, file, argsOrOptions, options) as Command<string> | Command<Buffer>;
  }

  /**
   * Runs a command written as a template: the text is split on
   * whitespace and each `${value}` is one argument (an array is several),
   * never interpreted by a shell, so a value with spaces or quotes stays
   * one argument as it is.
   *
   * ```ts
   * const { stdout } = await context.$`ls -la ${dir}`;
   * ```
   * @throws TypeError (synchronously) for a value that is not a string, number or array of them.
   */
  $(strings: TemplateStringsArray, ...values: TemplateValue[]): Command<string>;
  /** A tag with options: `` context.$({ cwd: '/srv' })`ls` ``. */
  $(options: ExecOptions & { encoding: 'buffer' }): CommandTag<Buffer>;
  /** A tag with options: `` context.$({ cwd: '/srv' })`ls` ``. */
  $(options: ExecOptions & { encoding?: 'utf8' }): CommandTag<string>;
  $(first: TemplateStringsArray | ExecOptions, ...values: TemplateValue[]): unknown {
    return tagIn(this, first, values);
  }

  /**
   * Copies a file, a directory tree or a symlink from the master to this
   * context, streamed in chunks under flow control and verified (size and
   * SHA-256 of the bytes written against those read). Modes and mtimes
   * are kept; symlinks are copied as links, never followed. Each file is
   * written to a temporary name beside its real one and renamed, so a
   * failed or stopped transfer never leaves a half file under the real
   * name.
   *
   * Where it goes: a file (or link) is written at `remotePath`, or inside
   * it under its own name when `remotePath` is an existing directory or
   * ends with `/`. A directory's contents go into `remotePath`, created
   * if missing and merged into if it exists (files there are replaced,
   * others kept): copying `a/` to `b` twice gives the same `b`, unlike
   * `cp -r`.
   *
   * ```ts
   * const result = await context.copy('dist/app.tar.gz', '/srv/app/app.tar.gz', { onProgress: console.log });
   * console.log(result.sha256);
   * ```
   * @param localPath the file, directory or symlink on the master.
   * @param remotePath where it goes in this context (see above).
   * @param options `preserve` (owner and group, when writing as root), `mode`, `onProgress`, `signal`, `timeout`.
   * @throws FileTransferError naming the context and the path, with `code`
   *   `'ENOENT'`, `'EACCES'`, `'ENOSPC'`... or `'ERR_TENDRIL_HASH_MISMATCH'`.
   * @throws InvalidOptionError for a bad option; the signal's reason when
   *   it aborts, `TimeoutError` past `timeout` (once the context has
   *   removed its temporary file, or `STOP_GRACE`, 2 s, later if it does
   *   not answer).
   */
  copy(localPath: string, remotePath: string, options?: TransferOptions): Promise<TransferResult> {
    return copy(this, localPath, remotePath, options);
  }

  /**
   * Copies a file (or, with `recursive`, a directory tree) from this
   * context to the master: `copy` the other way, with the same checks and
   * temporary names. The master decides what it takes. Without
   * `recursive`, one regular file: a symlink at `remotePath` is followed
   * in the context (as `cp` and `scp` do for a file), and a context that
   * sends a symlink or a tree anyway is refused before anything is
   * written, so it cannot leave a link to one of the master's own files
   * where the program reads its data; a directory fails with `EISDIR`.
   * With `recursive: true`, `remotePath` is taken as it is, and its
   * symlinks (the root too, when it is one) are written as links that
   * point wherever the context says (an absolute path, `..`), never
   * followed while writing: a program that reads the fetched tree reads
   * through them, so check them (`lstat`) if that matters. A tree lands
   * at `localPath` when nothing is there, else (an existing directory, or
   * a path ending with `/`) in `localPath/<base name of remotePath>`, and
   * merges into a directory already there only with `merge: true`
   * (otherwise `EEXIST`, before anything is written). What the context
   * sends is checked as untrusted: the name must be that of `remotePath`,
   * paths must be relative and stay in the tree (no `..`, no absolute
   * path, nothing written through a symlink), entries come once, in
   * order, counts are bounded, sizes must be announced and are never
   * exceeded, and what the master remembers is charged to the context's
   * account (`maxHeldBytes`).
   * @param remotePath the file in this context (a symlink to one is followed); with `recursive`, the directory, file or symlink.
   * @param localPath where it goes on the master.
   * @param options as `copy`'s, and `recursive`, `merge`.
   * @throws as `copy`; FileTransferError `'EISDIR'` (a directory without
   *   `recursive`), `'ERR_TENDRIL_NOT_A_FILE'` (neither a file, a
   *   directory nor a symlink: a FIFO, a device...), `'EEXIST'` (a tree
   *   onto a directory without `merge`), `'ERR_TENDRIL_BAD_ENTRY'` or
   *   `'ERR_TENDRIL_SIZE_MISMATCH'` (the context sent what it may not: a
   *   symlink or a tree where a file was asked for, among others);
   *   HeldBytesError past `maxHeldBytes`.
   */
  fetch(remotePath: string, localPath: string, options?: TransferOptions): Promise<TransferResult> {
    return fetch(this, remotePath, localPath, options);
  }

  /**
   * A Node Readable of a file in this context, in chunks, under flow
   * control: a paused reader pauses the reading there. The context
   * cannot send more than the size it announced; size and SHA-256 are
   * checked at the end, and a `FileTransferError` is emitted when they
   * differ (or the file cannot be read), even if the context then keeps
   * its call open (`destroy()` waits for it `STOP_GRACE`, 2 s, at most).
   * @param path a regular file in this context (a symlink to one is followed there).
   * @param options `signal`: destroys the stream when it aborts.
   */
  createReadStream(path: string, options?: ReadStreamOptions): Readable {
    return createReadStream(this, path, options);
  }

  /**
   * A Node Writable to a file in this context. The file appears under
   * `path` only once `end()` has finished (written to a temporary name,
   * verified, renamed); `destroy()` or a failure leaves nothing, and
   * `destroy()` closes the stream once the context has removed its
   * temporary file, or `STOP_GRACE` (2 s) later if it does not answer.
   * Its `result` gives the bytes and SHA-256 written once it has finished.
   * @param path the file to write (replaced if it exists).
   * @param options `mode` (default `0o644`); `signal`: destroys the stream when it aborts.
   */
  createWriteStream(path: string, options?: WriteStreamOptions): FileWriteStream {
    return createWriteStream(this, path, options);
  }

  /**
   * Starts `fn(...args)` as a job: in a new Node process on this context's
   * target, in a session and process group of its own, that outlives the
   * connection (and this master). Everything `fn` loads (its literal
   * `require()`/`import()` with their static closures, and `options.preload`)
   * is sent before it detaches. Resolves once the job runs. Its state,
   * result and output are kept in the account's jobs directory on the
   * target (docs/jobs.md) until `keep` after it ends.
   *
   * ```ts
   * const job = await context.startJob({ timeout: 30 * 60_000, name: 'migrate' }, migrate, '2026-11');
   * console.log(job.id); // give it to context.job(id) from a later program
   * ```
   * @param options `timeout` is required (ms, or `'none'`); `name`, `keep`,
   *   `grace`, `maxOutput`, `cwd`, `env`, `preload`, `base`; `signal` ends
   *   the wait for the start (with `AbortSignal.timeout(ms)`, a time limit).
   * @returns the job's handle; `await job.result()` gives `fn`'s result.
   * @throws InvalidOptionError (as its rejection) for a bad or missing option.
   * @throws CapturedVariableError, UnsupportedValueError, TypeError as `call`
   *   does, and a TypeError for Senders or Channels among `args`.
   * @throws JobError `ERR_TENDRIL_JOB_START` when the job could not be
   *   started, `..._STATE_DIRECTORY` when the account has no safe place for
   *   its state.
   * @throws the signal's reason when it aborts first (the context is told,
   *   and a job it had not yet started never runs).
   */
  startJob<F extends AnyFunction>(
    options: FunctionJobOptions,
    fn: F,
    ...args: Parameters<F>
  ): Promise<Job<Awaited<ReturnType<F>>>> {
    return startJob(this, options, fn, args);
  }

  /**
   * Starts a command as a job: `exec`'s detached twin. The command runs
   * in a session and process group of its own that outlive the
   * connection; its output goes to files on the target (the last
   * `maxOutput` bytes of each stream are kept).
   *
   * ```ts
   * const job = await context.execJob('apt-get', ['-y', 'dist-upgrade'], { timeout: 3600_000 });
   * const { stdout, exitCode } = await job.result();
   * ```
   * @param file the program (or, with `shell`, the command line).
   * @param args its arguments, passed as they are.
   * @param options as `startJob`'s (`timeout` required), and `shell`.
   * @returns the job's handle; `await job.result()` gives `{ stdout, stderr, exitCode, signal }`.
   * @throws InvalidOptionError (as its rejection) for a bad file, argument or option.
   * @throws JobError as `startJob`.
   */
  execJob(file: string, args: readonly string[], options: CommandJobOptions): Promise<Job<CommandJobResult>> {
    return execJob(this, file, args, options);
  }

  /**
   * A handle on job `id` of this context's account on its target: how a
   * later program re-attaches to a job an earlier one started. Nothing is
   * sent until a method of the handle is called; an ID that is not one of
   * this account's jobs then fails with `JobError` `ERR_TENDRIL_JOB_NOT_FOUND`.
   * @throws InvalidOptionError when `id` does not have the shape of a job ID.
   */
  job(id: string): Job {
    return jobOf(this, id);
  }

  /**
   * Every job of this context's account on its target, with its status,
   * oldest first. Jobs past their `keep` are removed first. A job whose
   * state file cannot be read is listed as `lost`, with `error` saying why.
   * @param options `timeout` (ms) and `signal` of the wait. Default: no limit.
   * @throws JobError `ERR_TENDRIL_JOB_STATE_DIRECTORY` when the account has no safe jobs directory.
   * @throws TimeoutError past the timeout; the signal's reason when it aborts.
   */
  jobs(options: OperationOptions = {}): Promise<JobStatus[]> {
    return jobsOf(this, options);
  }
}
