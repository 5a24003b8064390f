import { TendrilError } from '../../core/errors.js';
import type { JobStatus } from './protocol.js';

/** What went wrong with a job (`JobError.code`). */
export type JobErrorCode =
  /** The ID is not one of this account's jobs on this target (removed, expired, another account's, or not an ID). */
  | 'ERR_TENDRIL_JOB_NOT_FOUND'
  /** The job's state or result file cannot be read as one. */
  | 'ERR_TENDRIL_JOB_CORRUPT'
  /** `remove()` of a job that still runs. */
  | 'ERR_TENDRIL_JOB_RUNNING'
  /** The job could not be started (its supervisor said why). */
  | 'ERR_TENDRIL_JOB_START'
  /** The account has no directory only it may write to keep jobs in. */
  | 'ERR_TENDRIL_JOB_STATE_DIRECTORY'
  /** `result()`: the function threw (`cause` is what it threw), the command exited non-zero, or the process died. */
  | 'ERR_TENDRIL_JOB_FAILED'
  /** `result()`: the job passed its timeout and was killed. */
  | 'ERR_TENDRIL_JOB_TIMED_OUT'
  /** `result()`: the job was cancelled. */
  | 'ERR_TENDRIL_JOB_CANCELLED'
  /** `result()`: the job's supervisor died without recording how it ended (SIGKILL, a reboot). */
  | 'ERR_TENDRIL_JOB_LOST'
  /** The context reported something that is not a job's status or output. */
  | 'ERR_TENDRIL_JOB_MALFORMED';

/**
 * A job could not be started, found or read, or (from `result()`) did not
 * succeed. The message names the job, the context and what to do; `code`
 * says which (see `JobErrorCode`); `status` is the job's status where it
 * was read, and `result` a command job's output and exit status. The
 * message is escaped for a terminal, as every tendril error's is (it
 * quotes the job's stderr and what the target recorded); `status` and
 * `result` are as the context reported them, unescaped.
 */
export class JobError extends TendrilError {
  /** Which kind of failure (see `JobErrorCode`). */
  declare readonly code: JobErrorCode;
  /** The job's ID. */
  readonly jobId: string;
  /** The context the job was reached through. */
  readonly contextName: string;
  /** The job's status, when it was read. */
  readonly status: JobStatus | undefined;
  /** A command job's output and how it exited, when it ended. */
  readonly result: CommandJobResult | undefined;

  /**
   * @param code what went wrong.
   * @param message what happened (the job and context are added).
   * @param details the job, the context, and what is known of it.
   */
  constructor(
    code: JobErrorCode,
    message: string,
    details: { jobId: string; contextName: string; status?: JobStatus; result?: CommandJobResult; cause?: unknown },
  ) {
    super(
      `job ${details.jobId} in context '${details.contextName}': ${message}`,
      code,
      details.cause === undefined ? undefined : { cause: details.cause },
    );
    this.jobId = details.jobId;
    this.contextName = details.contextName;
    this.status = details.status;
    this.result = details.result;
  }
}

/** What a command job (`execJob`) gives: its kept output and how it exited. */
export interface CommandJobResult {
  /** Its standard output as text (the last `maxOutput` bytes). */
  stdout: string;
  /** Its standard error as text (the last `maxOutput` bytes). */
  stderr: string;
  /** Its exit code; undefined when a signal ended it. */
  exitCode: number | undefined;
  /** The signal that ended it, e.g. `'SIGTERM'`; undefined when it exited. */
  signal: string | undefined;
}
