/**
 * The master's handle on a job: its status, its result, its output as it
 * comes, cancel and remove, each one call on the context's connection.
 * Made by `context.startJob()`, `context.execJob()` and `context.job(id)`.
 */
import { CALL_TOOLKIT, type Context, routerOf } from '../../core/context.js';
import { CallError, type RemoteErrorInfo, remoteError, TimeoutError } from '../../core/errors.js';
import { checkOperationOptions, type OperationOptions } from '../../core/options.js';
import { Receiver } from '../../core/receiver.js';
import { Cancellation } from '../cancellation.js';
import { MAX_LINE } from '../commands/lines.js';
import { type CommandJobResult, JobError, type JobErrorCode } from './errors.js';
import { JOB_OUTPUT_CHUNK, JOB_STDERR, JOB_STDOUT, type JobStatus, parseJobStatus } from './protocol.js';

/** A line a job wrote, from `job.output()`. */
export interface JobOutputLine {
  /** Which of its streams. */
  stream: 'stdout' | 'stderr';
  /** The line, without its newline (the last one of a stream may have had none). */
  line: string;
}

/** Options of `job.result()`. */
export interface JobWaitOptions extends OperationOptions {
  /** Stop waiting (the job runs on) after this many ms, with `TimeoutError`. Default: wait until it ends. */
  timeout?: number;
  /** Stop waiting (the job runs on) when it aborts, with its reason. */
  signal?: AbortSignal;
}

/** How long one `jobResult` call waits on the target before it answers with the status, in ms. */
const RESULT_WAIT = 30_000;

/** The codes a context may name in a refusal about a job (anything else stays a `CallError`). */
const JOB_ERROR_CODES: ReadonlySet<string> = new Set([
  'ERR_TENDRIL_JOB_NOT_FOUND',
  'ERR_TENDRIL_JOB_CORRUPT',
  'ERR_TENDRIL_JOB_RUNNING',
  'ERR_TENDRIL_JOB_START',
  'ERR_TENDRIL_JOB_STATE_DIRECTORY',
]);

/**
 * A job: work started on a target in a process of its own that outlives
 * the connection. Every method is one call on the context's connection;
 * a new master re-attaches with `context.job(id)`.
 */
export class Job<T = unknown> {
  /** The job's ID on its target (24 hex digits). */
  readonly id: string;
  /** The context the job is reached through. */
  readonly context: Context;

  /** Made by `context.startJob()`, `execJob()` and `job(id)`; a program does not construct one. */
  constructor(context: Context, id: string) {
    this.context = context;
    this.id = id;
  }

  /**
   * Where the job is: `state` (`running`, `succeeded`, `failed`,
   * `timed-out`, `cancelled`, or `lost` when its supervisor died without
   * saying), start and end times, PID, output sizes.
   * @param options `timeout` (ms) and `signal` of the wait. Default: no limit.
   * @throws JobError `ERR_TENDRIL_JOB_NOT_FOUND` or `..._CORRUPT`.
   * @throws ContextDisconnectedError / ChannelError when the context is unreachable.
   * @throws TimeoutError past the timeout; the signal's reason when it aborts.
   */
  status(options: OperationOptions = {}): Promise<JobStatus> {
    return this.bounded(options, 'job.status()', `status of job ${this.id}`, async (signal) =>
      this.checkedStatus(await this.ask('jobStatus', [this.id], signal)),
    );
  }

  /**
   * Waits for the job to end and resolves with its function's result (or,
   * for a command job, its output and exit status). Waiting has no limit
   * unless `options.timeout` sets one; the job is never stopped by it.
   * @throws JobError `ERR_TENDRIL_JOB_FAILED` (the function threw: `cause`
   *   is what it threw, as a call's `CallError`; the command exited
   *   non-zero: `result` has its output), `..._TIMED_OUT`, `..._CANCELLED`,
   *   `..._LOST`, `..._NOT_FOUND`, `..._CORRUPT`.
   * @throws TimeoutError / the signal's reason when the wait ends first.
   */
  result(options: JobWaitOptions = {}): Promise<T> {
    return this.bounded(options, 'job.result()', `result of job ${this.id}`, (signal, deadline) =>
      this.waitForResult(signal, deadline, options.timeout),
    );
  }

  private async waitForResult(
    signal: AbortSignal | undefined,
    deadline: number | undefined,
    timeout: number | undefined,
  ): Promise<T> {
    let outcome: Record<string, unknown> | null;
    let status: JobStatus;
    // The context waits a while and answers with the status if the job still runs: ask again, until it ends.
    // The caller's deadline ends the wait where it is (the ask's signal), not a round later.
    for (;;) {
      const left = deadline === undefined ? undefined : Math.max(0, deadline - Date.now());
      const wait = Math.min(RESULT_WAIT, left ?? RESULT_WAIT);
      outcome = (await this.ask('jobResult', [this.id, wait], signal)) as Record<string, unknown> | null;
      if (typeof outcome !== 'object' || outcome === null) throw this.malformed('a result that is not an object');
      status = this.checkedStatus(outcome.status);
      if (status.state !== 'running' && status.state !== 'starting') break;
      if (left !== undefined && left <= wait) {
        throw new TimeoutError(`result of job ${this.id}`, this.context.name, timeout as number);
      }
    }
    const details = { jobId: this.id, contextName: this.context.name, status };
    let command: CommandJobResult | undefined;
    if (status.kind === 'command') {
      if (typeof outcome.stdout !== 'string' || typeof outcome.stderr !== 'string') {
        throw this.malformed('a command result without its output');
      }
      command = { stdout: outcome.stdout, stderr: outcome.stderr, exitCode: status.exitCode, signal: status.signal };
    }
    switch (status.state) {
      case 'succeeded':
        return (command ?? outcome.value) as T;
      case 'timed-out':
        throw new JobError(
          'ERR_TENDRIL_JOB_TIMED_OUT',
          `it passed its timeout of ${status.timeout} ms and was killed`,
          {
            ...details,
            result: command,
          },
        );
      case 'cancelled':
        throw new JobError('ERR_TENDRIL_JOB_CANCELLED', 'it was cancelled', { ...details, result: command });
      case 'lost':
        throw new JobError('ERR_TENDRIL_JOB_LOST', status.error ?? 'its supervisor is gone', details);
      case 'failed': {
        if (command) {
          const how = status.signal ? `killed by ${status.signal}` : `exit code ${status.exitCode}`;
          throw new JobError('ERR_TENDRIL_JOB_FAILED', `the command failed (${how})${tail(command.stderr)}`, {
            ...details,
            result: command,
          });
        }
        if (outcome.error !== undefined) {
          const cause = remoteError(outcome.error as RemoteErrorInfo, this.context.name, this.context.id);
          throw new JobError('ERR_TENDRIL_JOB_FAILED', `its function threw: ${(cause as Error).message}`, {
            ...details,
            cause,
          });
        }
        throw new JobError('ERR_TENDRIL_JOB_FAILED', status.error ?? 'it failed', details);
      }
      default:
        throw this.malformed(`a result of a job in state ${status.state}`);
    }
  }

  /**
   * The job's output, line by line, from the start of what is kept (see
   * `maxOutput`), then as it comes, ending once the job has ended. Under
   * flow control: while the loop does not ask for more, the context
   * stops reading the job's files. Breaking out of the loop stops it.
   * @param options `timeout`: ms the whole following may take; `signal`:
   *   ends it. Either ends the loop with its error (the job runs on).
   *   Default: no limit.
   * @throws JobError `ERR_TENDRIL_JOB_NOT_FOUND`, `..._MALFORMED`.
   * @throws TimeoutError past the timeout; the signal's reason when it aborts.
   */
  async *output(options: OperationOptions = {}): AsyncGenerator<JobOutputLine, void, undefined> {
    const given = checkOperationOptions(options, 'job.output()');
    const receiver = new Receiver<unknown>(routerOf(this.context));
    const cancel =
      given.timeout === undefined && given.signal === undefined
        ? undefined
        : new Cancellation({
            ...given,
            what: `output of job ${this.id}`,
            contextName: this.context.name,
            grace: 0,
          });
    // A stop ends the loop where it waits: the receiver closes, and the stop's reason is thrown below.
    cancel?.onStop(() => receiver.close());
    const sending = this.ask('jobOutput', [this.id, receiver.toSender()], cancel?.signal);
    sending.catch(() => {});
    const partial = ['', ''];
    const names = ['stdout', 'stderr'] as const;
    try {
      for await (const value of receiver) {
        if (
          !Array.isArray(value) ||
          value.length !== 2 ||
          (value[0] !== JOB_STDOUT && value[0] !== JOB_STDERR) ||
          typeof value[1] !== 'string'
        ) {
          throw this.malformed('output that is not [stream, text]');
        }
        // A context sends its output in pieces (JOB_OUTPUT_CHUNK): one of megabytes of short lines would stall this
        // loop, and each line kept would hold all of it.
        if (value[1].length > 2 * JOB_OUTPUT_CHUNK) {
          throw this.malformed(`output in a piece of ${value[1].length} characters, more than a context sends at once`);
        }
        const index = value[0] === JOB_STDOUT ? 0 : 1;
        // Only the new text is split: a long unfinished line is not scanned again for each message.
        const lines = value[1].split('\n');
        lines[0] = `${partial[index]}${lines[0]}`;
        let rest = lines.pop() as string;
        for (const line of lines) yield { stream: names[index], line };
        while (rest.length > MAX_LINE) {
          yield { stream: names[index], line: rest.slice(0, MAX_LINE) };
          rest = rest.slice(MAX_LINE);
        }
        partial[index] = rest;
      }
      if (cancel?.reason !== undefined) throw cancel.reason;
      await sending;
      for (const index of [0, 1]) if (partial[index]) yield { stream: names[index], line: partial[index] as string };
    } finally {
      cancel?.dispose();
      receiver.close();
    }
  }

  /**
   * Cancels the job: its whole process group gets SIGTERM, then SIGKILL
   * after its `grace`. Resolves with its status once it has ended
   * (`cancelled`, or how it ended if it already had), at most the job's
   * grace and 10 s after the context got the cancel.
   * @param options `timeout` (ms) and `signal` of the wait for it to have
   *   ended: the cancel, once it reached the context, goes on. Default: no limit.
   * @throws JobError `ERR_TENDRIL_JOB_NOT_FOUND`, `..._CORRUPT`.
   * @throws TimeoutError past the timeout; the signal's reason when it aborts.
   */
  cancel(options: OperationOptions = {}): Promise<JobStatus> {
    return this.bounded(options, 'job.cancel()', `cancel of job ${this.id}`, async (signal) =>
      this.checkedStatus(await this.ask('jobCancel', [this.id], signal)),
    );
  }

  /**
   * Removes the job's directory (state, result, output) from the target.
   * @param options `timeout` (ms) and `signal` of the wait. Default: no limit.
   * @throws JobError `ERR_TENDRIL_JOB_RUNNING` while it runs (cancel it first), `..._NOT_FOUND`.
   * @throws TimeoutError past the timeout; the signal's reason when it aborts.
   */
  remove(options: OperationOptions = {}): Promise<void> {
    return this.bounded(options, 'job.remove()', `removal of job ${this.id}`, async (signal) => {
      await this.ask('jobRemove', [this.id], signal);
    });
  }

  /** `'Job(<id>, <context name>)'`. */
  toString(): string {
    return `Job(${this.id}, ${this.context.name})`;
  }

  /**
   * Runs `work` under the caller's `timeout` and `signal` (checked first):
   * `work` passes the signal it is given to its asks, so a stop ends the
   * ask in flight at once (and the context is told), and the promise
   * rejects with the stop's reason: a `TimeoutError` naming `what`, or
   * the caller's signal's reason.
   */
  private bounded<R>(
    options: OperationOptions,
    where: string,
    what: string,
    work: (signal: AbortSignal | undefined, deadline: number | undefined) => Promise<R>,
  ): Promise<R> {
    let given: OperationOptions;
    try {
      given = checkOperationOptions(options, where);
    } catch (error) {
      return Promise.reject(error);
    }
    if (given.timeout === undefined && given.signal === undefined) return work(undefined, undefined);
    const deadline = given.timeout === undefined ? undefined : Date.now() + given.timeout;
    const cancel = new Cancellation({ ...given, what, contextName: this.context.name, grace: 0 });
    return cancel.settle(work(cancel.signal, deadline));
  }

  private async ask(name: string, args: unknown[], signal: AbortSignal | undefined): Promise<unknown> {
    try {
      return await this.context[CALL_TOOLKIT](name, args, signal ? { signal } : {}, `${name} ${this.id}`);
    } catch (error) {
      throw jobErrorOf(error, this.id, this.context.name);
    }
  }

  private checkedStatus(value: unknown): JobStatus {
    const status = parseJobStatus(value);
    if (typeof status === 'string') throw this.malformed(`a status with ${status}`);
    if (status.id !== this.id) throw this.malformed(`the status of another job (${status.id})`);
    return status;
  }

  private malformed(what: string): JobError {
    return new JobError('ERR_TENDRIL_JOB_MALFORMED', `the context reported ${what}`, {
      jobId: this.id,
      contextName: this.context.name,
    });
  }
}

/** A context's refusal about a job (a plain error with a job code) as a `JobError`; anything else as it is. */
export function jobErrorOf(error: unknown, jobId: string, contextName: string): unknown {
  if (error instanceof CallError && error.remoteCode !== undefined && JOB_ERROR_CODES.has(error.remoteCode)) {
    return new JobError(error.remoteCode as JobErrorCode, error.remoteMessage, { jobId, contextName, cause: error });
  }
  return error;
}

function tail(stderr: string): string {
  const text = stderr.trim();
  return text ? `: ${text.length > 2000 ? `...${text.slice(-2000)}` : text}` : '';
}
