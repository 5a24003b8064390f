/**
 * The remote half of jobs, run in the context the master holds: starting
 * a job (its modules gathered, its request written, its supervisor
 * started through `sh`), and reading, waiting for, following, cancelling
 * and removing the jobs of this account on this target. Each is one call
 * on the existing connection.
 */
import { spawn } from 'node:child_process';
import * as fs from 'node:fs';
import { join } from 'node:path';
import { StringDecoder } from 'node:string_decoder';
import { callOrigin } from '../../core/call-base.js';
import { callSignal } from '../../core/call-signal.js';
import { decode, encode } from '../../core/codec.js';
import { type ModuleUse, TOOLKIT_MODULE_ID } from '../../core/importer.js';
import { openRegularFile, readRange, readRegularFile } from '../../core/regular-file.js';
import { contextRuntime } from '../../core/runtime.js';
import type { Sender } from '../../core/sender.js';
import { killGroup } from '../process-groups.js';
import {
  FINAL_STATES,
  JOB_OUTPUT_CHUNK,
  JOB_STDERR,
  JOB_STDOUT,
  type JobOutcome,
  type JobRecord,
  type JobSpec,
  statusOf,
} from './protocol.js';
import { type JobRequest, STARTED } from './request.js';
import { JOB_STAGE } from './stage.js';
import {
  CANCEL_FILE,
  isLost,
  JobLookupError,
  jobDirectory,
  jobsDirectory,
  newJobId,
  REQUEST_FILE,
  RESULT_FILE,
  readRecord,
  removeJobDirectory,
  STDERR_FILE,
  STDOUT_FILE,
  SUPERVISOR_LOG,
  sameProcess,
  writeAtomically,
  writeRecord,
} from './state.js';

/** How long a supervisor may take to say the job runs, in ms. */
const START_TIMEOUT = 120_000;
/** How often a waiting or following call looks at a job's files, in ms. */
const POLL_MS = 100;

let jobsRoot: string | undefined;
/** This account's jobs directory, checked once per process (see `jobsDirectory`). */
function jobs(): string {
  jobsRoot ??= jobsDirectory();
  return jobsRoot;
}

/** Starts a job as `spec` says and resolves with its status once its process runs. */
export async function jobStart(spec: JobSpec): Promise<Record<string, unknown>> {
  // The caller's signal (or timeout) stops the start: before anything is written, or by abandoning the job.
  const signal = callSignal();
  const runtime = contextRuntime();
  const importer = runtime.importer;
  if (!importer) throw new Error('jobs are started in child contexts only');
  const root = jobs();
  prune(root);
  const toolkitFrom = callOrigin(runtime.moduleBase);
  const uses: ModuleUse[] = [{ from: toolkitFrom, spec: TOOLKIT_MODULE_ID, kind: 'import' }];
  if (spec.call) {
    const from = spec.call.b ?? toolkitFrom;
    for (const name of spec.call.p ?? []) uses.push({ from, spec: name, kind: 'require' });
    for (const name of spec.call.i ?? []) uses.push({ from, spec: name, kind: 'import' });
    for (const name of spec.preload ?? []) {
      uses.push({ from, spec: name, kind: 'require' }, { from, spec: name, kind: 'import' });
    }
  }
  // Everything the job loads is here before it detaches: nobody serves modules to it afterwards.
  const modules = await importer.snapshot(uses);
  if (signal.aborted) throw signal.reason;
  const id = newJobId();
  // Made whole under a name no reader takes for a job, then renamed: a failure here leaves no half job.
  const building = join(root, `.${id}.new`);
  fs.mkdirSync(building, 0o700);
  const directory = join(root, id);
  try {
    const request: JobRequest = { modules, toolkitFrom, id, spec, moduleBase: runtime.moduleBase };
    writeAtomically(building, REQUEST_FILE, encode(request));
    writeRecord(building, {
      v: 1,
      id,
      name: spec.name,
      kind: spec.kind,
      state: 'starting',
      createdAt: Date.now(),
      startedAt: null,
      endedAt: null,
      timeout: spec.timeout,
      keep: spec.keep,
      maxOutput: spec.maxOutput,
      grace: spec.grace,
      supervisor: null,
      bootId: null,
      pid: null,
      pidStart: null,
      exitCode: null,
      signal: null,
      error: null,
      output: { stdout: 0, stderr: 0, droppedStdout: 0, droppedStderr: 0 },
      inodes: null,
    });
    fs.renameSync(building, directory);
  } catch (error) {
    removeJobDirectory(building);
    throw error;
  }
  try {
    await launch(directory, runtime.coreSource.source, signal);
  } catch (error) {
    // A supervisor that comes late must not start the job: the master was told it failed.
    abandon(directory);
    throw Object.assign(new Error(`job ${id}: ${(error as Error).message}`), { code: 'ERR_TENDRIL_JOB_START' });
  }
  return statusOf(readRecord(directory), false);
}

/**
 * Starts the supervisor through `sh`, in the background, so it is never
 * this context's child (its parent is gone before the job runs) and lives
 * on in a session of its own; waits for it to say the job runs.
 */
function launch(directory: string, coreSource: Uint8Array, signal: AbortSignal): Promise<void> {
  const log = openRegularFile(join(directory, SUPERVISOR_LOG), { append: true }).fd;
  let child: ReturnType<typeof spawn>;
  try {
    child = spawn(
      '/bin/sh',
      ['-c', '"$0" -e "$1" tendril-job supervisor "$2" &', process.execPath, JOB_STAGE, directory],
      { detached: true, stdio: ['ignore', 'ignore', log, 'pipe', 'pipe'] },
    );
  } finally {
    fs.closeSync(log);
  }
  return new Promise((resolve, reject) => {
    const core = child.stdio[3] as NodeJS.WritableStream;
    const said = child.stdio[4] as NodeJS.ReadableStream;
    core.on('error', () => {});
    core.end(coreSource);
    let text = '';
    const timer = setTimeout(() => finish(`it did not say it runs within ${START_TIMEOUT} ms`), START_TIMEOUT);
    const onAbort = () => finish('the caller stopped waiting for the start (its signal or timeout)');
    const finish = (why?: string) => {
      clearTimeout(timer);
      signal.removeEventListener('abort', onAbort);
      said.removeAllListeners();
      (said as unknown as { destroy(): void }).destroy();
      if (why === undefined) {
        resolve();
        return;
      }
      const logged = fileTail(join(directory, SUPERVISOR_LOG), 2000).trim();
      reject(new Error(`the job's supervisor failed to start it: ${why}${logged ? `\n${logged}` : ''}`));
    };
    said.on('data', (chunk: Buffer) => {
      text += chunk.toString();
      if (text === STARTED) finish();
      // A whole `failed` line is the answer: a job that kept the pipe open must not make this wait.
      else if (text.startsWith('failed ') && text.endsWith('\n')) finish(text.slice('failed '.length).trim());
    });
    said.on('error', () => {});
    said.on('end', () => {
      if (text !== STARTED) finish(text.replace(/^failed /, '').trim() || 'it exited before the job ran');
    });
    child.on('error', (error) => finish(`/bin/sh could not be run: ${error.message}`));
    if (signal.aborted) onAbort();
    else signal.addEventListener('abort', onAbort, { once: true });
  });
}

/** The status of job `id` of this account. */
export function jobStatus(id: string): Record<string, unknown> {
  const record = readRecord(jobDirectory(jobs(), id));
  return statusOf(record, isLost(record));
}

/** Every job of this account on this target, oldest first; expired ones are removed first. */
export function jobList(): Record<string, unknown>[] {
  const root = jobs();
  prune(root);
  const list: Record<string, unknown>[] = [];
  for (const id of fs.readdirSync(root)) {
    let directory: string;
    try {
      directory = jobDirectory(root, id);
    } catch {
      continue;
    }
    try {
      const record = readRecord(directory);
      list.push(statusOf(record, isLost(record)));
    } catch (error) {
      let createdAt: number;
      try {
        createdAt = fs.statSync(directory).mtimeMs;
      } catch {
        continue;
      }
      list.push({ id, kind: 'function', state: 'lost', createdAt, error: (error as Error).message });
    }
  }
  return list.sort((a, b) => (a.createdAt as number) - (b.createdAt as number));
}

/**
 * Waits until job `id` has ended (or is lost), at most `waitMs`, then
 * reports how; a job still running by then is reported with its status
 * only, and the master asks again (so a master that gave up leaves no
 * endless poller here).
 */
export async function jobResult(id: string, waitMs: number): Promise<JobOutcome> {
  // A master that stopped waiting (its timeout, its signal) leaves nothing polling here.
  const signal = callSignal();
  const directory = jobDirectory(jobs(), id);
  const deadline = Date.now() + Math.max(0, Math.min(Number(waitMs) || 0, MAX_RESULT_WAIT));
  let record = readRecord(directory);
  while (!FINAL_STATES.has(record.state) && !isLost(record) && Date.now() < deadline && !signal.aborted) {
    await delay(POLL_MS);
    record = readRecord(directory);
  }
  const status = statusOf(record, isLost(record)) as unknown as JobOutcome['status'];
  if (!FINAL_STATES.has(status.state)) return { status };
  if (record.kind === 'command') {
    return {
      status,
      stdout: keptOutput(directory, STDOUT_FILE, record.maxOutput),
      stderr: keptOutput(directory, STDERR_FILE, record.maxOutput),
    };
  }
  if (record.state !== 'succeeded' && record.state !== 'failed') return { status };
  let data: Buffer;
  try {
    // No larger than a reply may be: a result file past that was not the worker's.
    data = readRegularFile(join(directory, RESULT_FILE), { maxBytes: contextRuntime().router.maxMessageSize });
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ENOENT') return { status };
    throw new JobLookupError(
      `the result file of job ${id} cannot be read: ${(error as Error).message}`,
      'ERR_TENDRIL_JOB_CORRUPT',
    );
  }
  let value: unknown;
  try {
    value = decode(data.subarray(1));
  } catch (error) {
    throw new JobLookupError(
      `the result file of job ${id} is corrupted: ${(error as Error).message}`,
      'ERR_TENDRIL_JOB_CORRUPT',
    );
  }
  return data[0] === 1 ? { status, value } : { status, error: value as JobOutcome['error'] };
}

/** Longest a `jobResult` call waits before it answers with the status, in ms. */
const MAX_RESULT_WAIT = 60_000;

/** The output kept in a job's file: its last `limit` bytes, read as such (the file may hold twice that). */
function keptOutput(directory: string, name: string, limit: number): string {
  return fileTail(join(directory, name), limit);
}

/**
 * The last `limit` bytes of the regular file at `path` as text; empty
 * when it is missing or is not a regular file (a FIFO is never waited on).
 */
function fileTail(path: string, limit: number): string {
  let opened: ReturnType<typeof openRegularFile>;
  try {
    opened = openRegularFile(path);
  } catch {
    return '';
  }
  try {
    const { size } = opened.stats;
    const length = Math.min(size, limit);
    return readRange(opened.fd, size - length, length).toString('utf8');
  } finally {
    fs.closeSync(opened.fd);
  }
}

/**
 * Cancels job `id`: a `cancel` file tells its supervisor (which then never
 * starts a job not yet started), and SIGTERM makes it kill the job's
 * process group (SIGTERM, then SIGKILL after the job's grace). Resolves
 * with the status once it has ended, or as it is after the grace and
 * CANCEL_MARGIN. A lost job's group is killed here, when its leader is
 * still the process that was started.
 */
export async function jobCancel(id: string): Promise<Record<string, unknown>> {
  // A master that stopped waiting: the cancel goes on (the file and SIGTERM), the polling ends.
  const signal = callSignal();
  const directory = jobDirectory(jobs(), id);
  let record = readRecord(directory);
  if (FINAL_STATES.has(record.state)) return statusOf(record, false);
  if (isLost(record)) {
    if (record.pid !== null && record.pidStart !== null && sameProcess(record.pid, record.pidStart, record.bootId)) {
      killGroup(record.pid, 'SIGKILL');
    }
    return statusOf(record, true);
  }
  writeAtomically(directory, CANCEL_FILE, '');
  const deadline = Date.now() + record.grace + CANCEL_MARGIN;
  let signalled = false;
  for (;;) {
    record = readRecord(directory);
    if (FINAL_STATES.has(record.state) || isLost(record) || Date.now() > deadline) break;
    if (signalled && signal.aborted) break;
    const supervisor = record.supervisor;
    // Until the supervisor has said who it is, it finds the file itself before it starts anything.
    if (!signalled && supervisor && sameProcess(supervisor.pid, supervisor.start, record.bootId)) {
      signalled = true;
      try {
        process.kill(supervisor.pid, 'SIGTERM');
      } catch {
        // It ended meanwhile: the record says how.
      }
    }
    await delay(POLL_MS / 2);
  }
  return statusOf(record, isLost(record));
}

/** Extra time `cancel()` waits beyond the job's grace, in ms. */
const CANCEL_MARGIN = 10_000;

/** Makes sure a job whose start failed never runs: its supervisor finds the cancel file, or gets SIGTERM. */
function abandon(directory: string): void {
  try {
    writeAtomically(directory, CANCEL_FILE, '');
    const record = readRecord(directory);
    if (record.supervisor && sameProcess(record.supervisor.pid, record.supervisor.start, record.bootId)) {
      process.kill(record.supervisor.pid, 'SIGTERM');
    }
  } catch {
    // Nothing more to do: the supervisor is gone or never came.
  }
}

/**
 * Removes job `id`'s directory.
 * @throws JobLookupError `ERR_TENDRIL_JOB_RUNNING` while it runs.
 */
export function jobRemove(id: string): void {
  const directory = jobDirectory(jobs(), id);
  let record: JobRecord | undefined;
  try {
    record = readRecord(directory);
  } catch {
    // A job whose state cannot be read: nothing says it runs, and it would otherwise stay for ever.
  }
  if (record && !FINAL_STATES.has(record.state)) {
    if (!isLost(record)) {
      throw new JobLookupError(`job ${id} is still ${record.state}; cancel it first`, 'ERR_TENDRIL_JOB_RUNNING');
    }
    if (record.pid !== null && record.pidStart !== null && sameProcess(record.pid, record.pidStart, record.bootId)) {
      throw new JobLookupError(
        `job ${id} is lost but its process still runs; cancel it first`,
        'ERR_TENDRIL_JOB_RUNNING',
      );
    }
  }
  removeJobDirectory(directory);
}

/**
 * Sends job `id`'s output on `sender` as `[stream, text]` values, from
 * the start of what is kept, then as it comes, until the job has ended
 * and all of it is sent. Waits for the Sender's window: a master that
 * does not read slows only this.
 */
export async function jobOutput(id: string, sender: Sender<[number, string]>): Promise<void> {
  const signal = callSignal();
  const directory = jobDirectory(jobs(), id);
  const streams = [
    { tag: JOB_STDOUT, name: STDOUT_FILE, read: 0, decoder: new StringDecoder('utf8') },
    { tag: JOB_STDERR, name: STDERR_FILE, read: 0, decoder: new StringDecoder('utf8') },
  ];
  let mismatches = 0;
  while (!sender.closed && !signal.aborted) {
    let record = readRecord(directory);
    const ended = FINAL_STATES.has(record.state) || isLost(record);
    let any = false;
    let behind = false;
    for (const stream of streams) {
      let fd: number;
      let stats: fs.Stats;
      try {
        // Never blocks: another process of the account may have put a FIFO there.
        ({ fd, stats } = openRegularFile(join(directory, stream.name)));
      } catch {
        continue;
      }
      try {
        // Opened first, then the count read: a count newer than the file (its inode differs) is waited out,
        // unless the job has ended (a supervisor that died between the two never ends the mismatch).
        record = readRecord(directory);
        const inode = record.inodes?.[stream.tag === JOB_STDOUT ? 'stdout' : 'stderr'];
        if (inode !== undefined && inode !== stats.ino && !ended && mismatches < MAX_MISMATCHES) {
          behind = true;
          continue;
        }
        const dropped = stream.tag === JOB_STDOUT ? record.output.droppedStdout : record.output.droppedStderr;
        // The supervisor dropped the front of the file (past maxOutput) before this read it: say so.
        let offset = stream.read - dropped;
        if (offset < 0) {
          const rest = stream.decoder.end();
          if (rest) await sender.send([stream.tag, rest]);
          await sender.send([stream.tag, `[... ${-offset} bytes of output dropped ...]\n`]);
          stream.read = dropped;
          offset = 0;
        }
        while (offset < stats.size) {
          const buffer = Buffer.alloc(Math.min(JOB_OUTPUT_CHUNK, stats.size - offset));
          const got = fs.readSync(fd, buffer, 0, buffer.length, offset);
          if (got <= 0) break;
          offset += got;
          stream.read += got;
          any = true;
          const text = stream.decoder.write(buffer.subarray(0, got));
          if (text) await sender.send([stream.tag, text]);
        }
      } finally {
        fs.closeSync(fd);
      }
    }
    mismatches = behind ? mismatches + 1 : 0;
    if (ended && !any && !behind) break;
    if (!any) await delay(behind ? 10 : POLL_MS);
  }
  for (const stream of streams) {
    const rest = stream.decoder.end();
    if (rest && !sender.closed) await sender.send([stream.tag, rest]);
  }
}

/** Tries `jobOutput` waits for a rotated file to be renamed into place before reading what is there. */
const MAX_MISMATCHES = 100;

/**
 * Removes finished jobs past their `keep`; lost ones, and ones whose state
 * cannot be read, that long after their directory last changed; and
 * directories of starts that died half way.
 */
function prune(root: string): void {
  const now = Date.now();
  for (const name of fs.readdirSync(root)) {
    try {
      if (/^\.[0-9a-f]{24}\.new$/.test(name)) {
        if (now - fs.statSync(join(root, name)).mtimeMs > STALE_START) removeJobDirectory(join(root, name));
        continue;
      }
      const directory = jobDirectory(root, name);
      const changed = fs.statSync(directory).mtimeMs;
      let record: JobRecord;
      try {
        record = readRecord(directory);
      } catch {
        if (now - changed > DEFAULT_KEEP) removeJobDirectory(directory);
        continue;
      }
      const ended = FINAL_STATES.has(record.state) ? record.endedAt : isLost(record) ? changed : null;
      if (ended !== null && ended + record.keep < now) removeJobDirectory(directory);
    } catch {
      // Gone meanwhile, or not a job: left as it is.
    }
  }
}

/** A half-made job's directory is removed after this long, in ms. */
const STALE_START = 3600_000;
/** How long a job whose state cannot be read is kept, in ms: startJob's default `keep`. */
const DEFAULT_KEEP = 7 * 24 * 3600_000;

function delay(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}
