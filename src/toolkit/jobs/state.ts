/**
 * A job's state on the target's disk: the per-account directory of jobs,
 * one directory per job, files written atomically, and whether the process
 * that should be writing them is still the one that was started. Used by
 * the context (to start, poll, cancel and remove jobs) and by the job's own
 * processes.
 */
import { randomBytes } from 'node:crypto';
import * as fs from 'node:fs';
import * as os from 'node:os';
import { join } from 'node:path';
import { privateDirectory, UnsafePlaceError } from '../../core/private-directory.js';
import { readRegularFile } from '../../core/regular-file.js';
import { closed } from '../../core/target-code-cache.js';
import { FINAL_STATES, JOB_ID, type JobRecord } from './protocol.js';

/** A job's files, in its directory. */
export const REQUEST_FILE = 'request';
/** The job's state (`JobRecord`, JSON), written by its supervisor. */
export const STATE_FILE = 'state';
/** A function job's result, written by its worker. */
export const RESULT_FILE = 'result';
/** The job's standard output (its tail, past `maxOutput`). */
export const STDOUT_FILE = 'stdout';
/** The job's standard error (its tail, past `maxOutput`). */
export const STDERR_FILE = 'stderr';
/** Written by `cancel()`: the supervisor takes a SIGTERM as a cancel only with it, and never starts a job it finds. */
export const CANCEL_FILE = 'cancel';
/** Where the supervisor's own errors go. */
export const SUPERVISOR_LOG = 'supervisor.log';

/** A job's ID or its directory does not hold what it should: a client error, never a path. */
export class JobLookupError extends Error {
  /** `ERR_TENDRIL_JOB_NOT_FOUND`, `ERR_TENDRIL_JOB_CORRUPT`, `ERR_TENDRIL_JOB_STATE_DIRECTORY`. */
  readonly code: string;
  /**
   * @param message what is wrong, naming the job or the path.
   * @param code one of the codes above.
   */
  constructor(message: string, code: string) {
    super(message);
    this.code = code;
  }
}

/**
 * The directory this account's jobs live in, created (0700) if missing:
 * `$XDG_STATE_HOME/tendril/jobs` when that is set to an absolute path,
 * else `<home>/.local/state/tendril/jobs`, with the home from the account
 * database (so sudo's choice of HOME does not move it). No account but
 * root and this one may be able to change a directory on the way, and
 * those made below the home (or XDG_STATE_HOME) are this account's alone
 * (core/private-directory.ts), used by their physical path: another
 * account could otherwise swap in what a job runs.
 * @throws JobLookupError `ERR_TENDRIL_JOB_STATE_DIRECTORY` when that does not hold.
 */
export function jobsDirectory(): string {
  const xdg = process.env.XDG_STATE_HOME;
  // The account database only when needed: a UID without an entry (common in containers) may set XDG_STATE_HOME.
  const [root, parts] = xdg?.startsWith('/')
    ? [xdg, ['tendril', 'jobs']]
    : [os.userInfo().homedir, ['.local', 'state', 'tendril', 'jobs']];
  try {
    // From / down, no other account may be able to rename what lies on the way: it could put its own request in place.
    return privateDirectory(
      root,
      parts,
      'the jobs directory',
      'jobs keep their state in a directory only this account may write',
    );
  } catch (error) {
    const why = error instanceof UnsafePlaceError ? error.message : (error as Error).message;
    throw new JobLookupError(`cannot keep jobs under ${root}: ${why}`, 'ERR_TENDRIL_JOB_STATE_DIRECTORY');
  }
}

/** A new job ID: 96 random bits. */
export function newJobId(): string {
  return randomBytes(12).toString('hex');
}

/**
 * The directory of job `id`, checked: the ID must have the shape of one
 * (so `../x` is never a path) and be a job of this account's.
 * @throws JobLookupError `ERR_TENDRIL_JOB_NOT_FOUND`.
 */
export function jobDirectory(jobs: string, id: unknown): string {
  if (typeof id !== 'string' || !JOB_ID.test(id)) {
    throw new JobLookupError(
      `${JSON.stringify(String(id)).slice(0, 80)} is not a job ID (24 hex digits, as startJob gave)`,
      'ERR_TENDRIL_JOB_NOT_FOUND',
    );
  }
  const directory = join(jobs, id);
  let stats: fs.Stats;
  try {
    stats = fs.lstatSync(directory);
  } catch {
    throw new JobLookupError(
      `no job ${id} in ${jobs} (removed, expired, or started by another account)`,
      'ERR_TENDRIL_JOB_NOT_FOUND',
    );
  }
  if (!closed(stats, process.getuid?.() ?? 0)) {
    throw new JobLookupError(`${directory} is not a job directory of this account's`, 'ERR_TENDRIL_JOB_CORRUPT');
  }
  return directory;
}

/**
 * Writes `data` to `directory/name` so that a reader sees the old file or
 * the new one, whole, even across a crash: a temporary file, fsync,
 * rename, fsync of the directory.
 */
export function writeAtomically(directory: string, name: string, data: string | Uint8Array): void {
  const temp = join(directory, `.${name}.${process.pid}.${randomBytes(4).toString('hex')}`);
  const fd = fs.openSync(temp, fs.constants.O_WRONLY | fs.constants.O_CREAT | fs.constants.O_EXCL, 0o600);
  try {
    const bytes = typeof data === 'string' ? Buffer.from(data) : data;
    for (let written = 0; written < bytes.length; ) written += fs.writeSync(fd, bytes, written);
    fs.fsyncSync(fd);
  } catch (error) {
    fs.closeSync(fd);
    removeFile(temp);
    throw error;
  }
  fs.closeSync(fd);
  fs.renameSync(temp, join(directory, name));
  syncDirectory(directory);
}

function syncDirectory(directory: string): void {
  try {
    // Without blocking or following: a FIFO or a link put where the directory was is not waited on.
    const { O_RDONLY, O_DIRECTORY = 0, O_NONBLOCK = 0, O_NOFOLLOW = 0 } = fs.constants;
    const fd = fs.openSync(directory, O_RDONLY | O_DIRECTORY | O_NONBLOCK | O_NOFOLLOW);
    try {
      fs.fsyncSync(fd);
    } finally {
      fs.closeSync(fd);
    }
  } catch {
    // Not every file system lets a directory be synced; the rename stands.
  }
}

/** Writes a job's state file. */
export function writeRecord(directory: string, record: JobRecord): void {
  writeAtomically(directory, STATE_FILE, `${JSON.stringify(record)}\n`);
}

/**
 * Largest state file read, in bytes: a record is under 2 KiB (its name is
 * at most 200 characters, its error a line); a larger one was not written
 * by a supervisor.
 */
const MAX_STATE_FILE = 1024 * 1024;

/**
 * Reads a job's state file: a regular file, not a link, at most
 * `MAX_STATE_FILE` bytes (another process of the account may have put a
 * FIFO, a link or a huge file in its place; none of them blocks or
 * floods the context).
 * @throws JobLookupError `ERR_TENDRIL_JOB_CORRUPT` when it is missing or is not a job's state.
 */
export function readRecord(directory: string): JobRecord {
  const path = join(directory, STATE_FILE);
  let text: string;
  try {
    text = readRegularFile(path, { maxBytes: MAX_STATE_FILE }).toString('utf8');
  } catch (error) {
    throw new JobLookupError(
      `the state of the job in ${directory} cannot be read: ${(error as Error).message}`,
      'ERR_TENDRIL_JOB_CORRUPT',
    );
  }
  let record: JobRecord;
  try {
    record = JSON.parse(text) as JobRecord;
  } catch (error) {
    throw new JobLookupError(
      `the state file ${path} is corrupted: ${(error as Error).message}`,
      'ERR_TENDRIL_JOB_CORRUPT',
    );
  }
  if (
    typeof record !== 'object' ||
    record === null ||
    record.v !== 1 ||
    typeof record.id !== 'string' ||
    typeof record.state !== 'string' ||
    typeof record.createdAt !== 'number' ||
    typeof record.output !== 'object'
  ) {
    throw new JobLookupError(`the state file ${path} is corrupted: it is not a job's state`, 'ERR_TENDRIL_JOB_CORRUPT');
  }
  return record;
}

/** This boot's ID (Linux), to tell a PID of an earlier boot from one of this. */
export function bootId(): string | null {
  try {
    return fs.readFileSync('/proc/sys/kernel/random/boot_id', 'utf8').trim();
  } catch {
    return null;
  }
}

/** When process `pid` started, in clock ticks since boot (Linux /proc); null when it cannot be read or the process has ended (a zombie). */
export function processStart(pid: number): string | null {
  try {
    const stat = fs.readFileSync(`/proc/${pid}/stat`, 'utf8');
    // The command name (field 2) may hold spaces and parentheses: count fields after its last ')'.
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    // A zombie has ended: it only waits to be reaped.
    return fields[0] === 'Z' ? null : (fields[19] ?? null);
  } catch {
    return null;
  }
}

/** Whether `pid` is still the process that started at `start` in boot `boot`. */
export function sameProcess(pid: number, start: string | null, boot: string | null): boolean {
  if (boot !== null && bootId() !== boot) return false;
  if (start !== null) return processStart(pid) === start;
  try {
    process.kill(pid, 0);
    return true;
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === 'EPERM';
  }
}

/** Whether a job that has not ended has lost its supervisor (killed, or the host rebooted). */
export function isLost(record: JobRecord): boolean {
  if (FINAL_STATES.has(record.state)) return false;
  // A supervisor gets START_TIMEOUT (120 s) to say it runs: past that, with none recorded, none will come.
  if (!record.supervisor) return Date.now() - record.createdAt > 180_000;
  return !sameProcess(record.supervisor.pid, record.supervisor.start, record.bootId);
}

function removeFile(path: string): void {
  try {
    fs.unlinkSync(path);
  } catch {
    // Already gone.
  }
}

/**
 * Removes a job's directory: its files (a link is removed, never
 * followed), then the directory. Written out because fs.rmSync is missing
 * on the Node 12 to 14.13 a context may run.
 */
export function removeJobDirectory(directory: string): void {
  let names: string[];
  try {
    names = fs.readdirSync(directory);
  } catch {
    return;
  }
  for (const name of names) removeFile(join(directory, name));
  try {
    fs.rmdirSync(directory);
  } catch (error) {
    // A temporary file written meanwhile: once more, then it is left for the next prune.
    if ((error as NodeJS.ErrnoException).code !== 'ENOTEMPTY') throw error;
    for (const name of fs.readdirSync(directory)) removeFile(join(directory, name));
    fs.rmdirSync(directory);
  }
}
