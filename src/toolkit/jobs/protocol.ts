/**
 * What the halves of a job exchange: the master's request to start one,
 * the state its supervisor keeps on the target's disk, and what a context
 * reports to the master. Types, constants and the master's checks of what
 * a context sends (untrusted); no IO.
 */
import type { RemoteErrorInfo } from '../../core/errors.js';
import { ownHead } from '../../core/own-copy.js';
import type { CallPayload } from '../../core/protocol/call-function.js';

/** Where a job is in its life. `lost`: its supervisor died without saying how it ended (SIGKILL, a reboot). */
export type JobState = 'starting' | 'running' | 'succeeded' | 'failed' | 'timed-out' | 'cancelled' | 'lost';

/** The states a job ends in. */
export const FINAL_STATES: ReadonlySet<JobState> = new Set(['succeeded', 'failed', 'timed-out', 'cancelled', 'lost']);
const STATES: ReadonlySet<string> = new Set([...FINAL_STATES, 'starting', 'running']);

/** A job's ID: 24 lower-case hex digits (96 random bits), safe as a file name. */
export const JOB_ID = /^[0-9a-f]{24}$/;

/** How the master asks a context to start a job (the remote `jobStart` export's argument). */
export interface JobSpec {
  /** A function job (`call`) or a command job (`command`). */
  kind: 'function' | 'command';
  /** A label for listings; not unique. */
  name: string | null;
  /** Kill the job's process group after this many ms; null: never. */
  timeout: number | null;
  /** Remove a finished job's directory this many ms after it ended. */
  keep: number;
  /** Between SIGTERM and SIGKILL of the job's process group, in ms. */
  grace: number;
  /** Bytes of each output stream kept (the tail, past it). */
  maxOutput: number;
  /** Working directory; null: the context's. */
  cwd: string | null;
  /** Variables added to the context's environment. */
  env: Record<string, string> | null;
  /** A function job: the shipped function (as a call carries it), its arguments, and specifiers to load before it detaches. */
  call?: CallPayload & { i?: string[] };
  /** Specifiers a function job loads with a computed `require()` or `import()`. */
  preload?: string[];
  /** A command job: the program and its arguments, or with `shell` a command line. */
  command?: { file: string; args: string[]; shell: boolean | string };
}

/** What the supervisor (and, before it, the context that starts it) writes to the job's `state` file, as JSON. */
export interface JobRecord {
  /** The format's version. */
  v: 1;
  /** The job's ID (its directory's name). */
  id: string;
  /** Its name, if it was given one. */
  name: string | null;
  /** A function job or a command job. */
  kind: 'function' | 'command';
  /** Where it is; `lost` is never written, only concluded by a reader. */
  state: Exclude<JobState, 'lost'>;
  /** When the job was asked for, in ms since the epoch (target's clock), as the others. */
  createdAt: number;
  /** When its process started. */
  startedAt: number | null;
  /** When it ended. */
  endedAt: number | null;
  /** Its timeout in ms; null: none. */
  timeout: number | null;
  /** How long it is kept after it ended, in ms. */
  keep: number;
  /** Bytes of each output stream kept. */
  maxOutput: number;
  /** Between SIGTERM and SIGKILL of the job's group, in ms. */
  grace: number;
  /** The supervisor's PID and start time (clock ticks since boot, /proc/<pid>/stat), and the boot it ran in. */
  supervisor: { pid: number; start: string | null } | null;
  /** The boot (Linux's boot_id) the supervisor ran in. */
  bootId: string | null;
  /** The job's process: also its process group's leader; and its start time, as the supervisor's. */
  pid: number | null;
  /** The start time of `pid`, as the supervisor's. */
  pidStart: string | null;
  /** The exit code of the job's process. */
  exitCode: number | null;
  /** The signal that ended the job's process. */
  signal: string | null;
  /** Why it failed when not by its own doing (it could not start, it exited without a result). */
  error: string | null;
  /** Bytes written to each output stream, and bytes of each dropped from the front of its file (past `maxOutput`). */
  output: { stdout: number; stderr: number; droppedStdout: number; droppedStderr: number };
  /** The inode of each output file whose front `output` counts as dropped: a reader's check that both are of one time. */
  inodes: { stdout: number; stderr: number } | null;
}

/** A job as the master sees it: `context.jobs()`, `job.status()`. Times in ms since the epoch, by the target's clock. */
export interface JobStatus {
  /** The job's ID: give it to `context.job(id)` to re-attach. */
  id: string;
  /** The name given to `startJob` / `execJob`, if any. */
  name: string | undefined;
  /** `'function'` (startJob) or `'command'` (execJob). */
  kind: 'function' | 'command';
  /** Where it is: `running`, then how it ended; `lost` when its supervisor died without saying (SIGKILL, reboot). */
  state: JobState;
  /** When it was asked for. */
  createdAt: number;
  /** When its process started; undefined before. */
  startedAt: number | undefined;
  /** When it ended; undefined while it runs (and for a lost job). */
  endedAt: number | undefined;
  /** Its process's PID on the target (the leader of its process group); undefined before it started. */
  pid: number | undefined;
  /** Its timeout in ms; undefined: none. */
  timeout: number | undefined;
  /** A command's exit code, or the function process's when it exited without a result; else undefined. */
  exitCode: number | undefined;
  /** The signal that ended its process, e.g. `'SIGKILL'`; else undefined. */
  signal: string | undefined;
  /** Why it failed when not by its own doing (could not start, exited without a result, lost). */
  error: string | undefined;
  /** Bytes it wrote to stdout and stderr, and how many of those were dropped from the front of the kept output. */
  output: { stdout: number; stderr: number; droppedStdout: number; droppedStderr: number };
}

/** How a job ended, as `jobResult` reports it. */
export interface JobOutcome {
  /** The job's status once it ended. */
  status: JobStatus;
  /** A function job that succeeded: its result. */
  value?: unknown;
  /** A function job that threw: what it threw. */
  error?: RemoteErrorInfo;
  /** A command job: its kept standard output. */
  stdout?: string;
  /** A command job: its kept standard error. */
  stderr?: string;
}

/** Tags of output chunks on `jobOutput`'s Sender: `[stream, text]`. */
export const JOB_STDOUT = 1;
/** Tags an output chunk of the job's stderr. */
export const JOB_STDERR = 2;

/**
 * Most bytes of output a context reads for one output message (its text
 * has at most as many characters, and a partial UTF-8 character held back
 * from the one before): a piece of more text than twice that is not a
 * context's, and is refused as malformed.
 */
export const JOB_OUTPUT_CHUNK = 256 * 1024;

/** Longest name, error text or signal name taken from a context's report. */
const MAX_TEXT = 64 * 1024;

/**
 * Checks a job's status as a context reported it (untrusted).
 * @returns the status, or a string saying what is wrong with it.
 */
export function parseJobStatus(value: unknown): JobStatus | string {
  if (typeof value !== 'object' || value === null || Array.isArray(value)) return 'not an object';
  const v = value as Record<string, unknown>;
  if (typeof v.id !== 'string' || !JOB_ID.test(v.id)) return 'a malformed id';
  if (typeof v.state !== 'string' || !STATES.has(v.state)) return 'an unknown state';
  if (v.kind !== 'function' && v.kind !== 'command') return 'an unknown kind';
  const time = (key: string) =>
    typeof v[key] === 'number' && Number.isFinite(v[key]) ? (v[key] as number) : undefined;
  // Copied when cut: a slice would keep the whole string the context sent alive with the status.
  const text = (key: string) => (typeof v[key] === 'string' ? ownHead(v[key] as string, MAX_TEXT) : undefined);
  const pid = time('pid');
  const out = typeof v.output === 'object' && v.output !== null ? (v.output as Record<string, unknown>) : {};
  const count = (key: string) => (typeof out[key] === 'number' && (out[key] as number) >= 0 ? (out[key] as number) : 0);
  const createdAt = time('createdAt');
  if (createdAt === undefined) return 'no createdAt';
  return {
    id: v.id,
    name: text('name'),
    kind: v.kind,
    state: v.state as JobState,
    createdAt,
    startedAt: time('startedAt'),
    endedAt: time('endedAt'),
    pid: pid !== undefined && Number.isInteger(pid) && pid > 0 ? pid : undefined,
    timeout: time('timeout'),
    exitCode: time('exitCode'),
    signal: text('signal'),
    error: text('error'),
    output: {
      stdout: count('stdout'),
      stderr: count('stderr'),
      droppedStdout: count('droppedStdout'),
      droppedStderr: count('droppedStderr'),
    },
  };
}

/** A job's status from its record, with `lost` when its supervisor is gone, as a context reports it. */
export function statusOf(record: JobRecord, lost: boolean): Record<string, unknown> {
  return {
    id: record.id,
    name: record.name,
    kind: record.kind,
    state: lost ? 'lost' : record.state,
    createdAt: record.createdAt,
    startedAt: record.startedAt,
    endedAt: record.endedAt,
    pid: record.pid,
    timeout: record.timeout,
    exitCode: record.exitCode,
    signal: record.signal,
    error: lost
      ? (record.error ??
        'its supervisor is gone without recording how the job ended (killed with SIGKILL, or the host rebooted)')
      : record.error,
    output: record.output,
  };
}
