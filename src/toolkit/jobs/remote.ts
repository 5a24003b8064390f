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
import { decode, encode } from '../../core/codec.js';
import { type ModuleUse, TOOLKIT_MODULE_ID } from '../../core/importer.js';
import { contextRuntime } from '../../core/runtime.js';
import type { Sender } from '../../core/sender.js';
import {
  FINAL_STATES,
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
  groupAlive,
  isLost,
  JobLookupError,
  jobDirectory,
  jobsDirectory,
  killGroup,
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
/** Most text sent in one output message. */
const OUTPUT_CHUNK = 256 * 1024;

let jobsRoot: string | undefined;
/** This account's jobs directory, checked once per process (see `jobsDirectory`). */
function jobs(): string {
  jobsRoot ??= jobsDirectory();
  return jobsRoot;
}

/** Starts a job as `spec` says and resolves with its status once its process runs. */
export async function jobStart(spec: JobSpec): Promise<Record<string, unknown>> {
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
  const id = newJobId();
  const directory = join(root, id);
  fs.mkdirSync(directory, 0o700);
  const request: JobRequest = { modules, toolkitFrom, id, spec, moduleBase: runtime.moduleBase };
  writeAtomically(directory, REQUEST_FILE, encode(request));
  const record: JobRecord = {
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
    supervisor: null,
    bootId: null,
    pid: null,
    pidStart: null,
    exitCode: null,
    signal: null,
    error: null,
    output: { stdout: 0, stderr: 0, droppedStdout: 0, droppedStderr: 0 },
    inodes: null,
  };
  writeRecord(directory, record);
  await launch(directory, runtime.coreSource.source);
  return statusOf(readRecord(directory), false);
}

/**
 * Starts the supervisor through `sh`, in the background, so it is never
 * this context's child (its parent is gone before the job runs) and lives
 * on in a session of its own; waits for it to say the job runs.
 */
function launch(directory: string, coreSource: Uint8Array): Promise<void> {
  const log = fs.openSync(join(directory, SUPERVISOR_LOG), 'a', 0o600);
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
    const finish = (why?: string) => {
      clearTimeout(timer);
      said.removeAllListeners();
      (said as unknown as { destroy(): void }).destroy();
      if (why === undefined) {
        resolve();
        return;
      }
      let logged = '';
      try {
        logged = fs.readFileSync(join(directory, SUPERVISOR_LOG), 'utf8').slice(-2000).trim();
      } catch {
        // Nothing logged.
      }
      reject(
        Object.assign(new Error(`the job's supervisor failed to start the job: ${why}${logged ? `\n${logged}` : ''}`), {
          code: 'ERR_TENDRIL_JOB_START',
        }),
      );
    };
    said.on('data', (chunk: Buffer) => {
      text += chunk.toString();
      if (text === STARTED) finish();
    });
    said.on('error', () => {});
    said.on('end', () => {
      if (text !== STARTED) finish(text.replace(/^failed /, '').trim() || 'it exited before the job ran');
    });
    child.on('error', (error) => finish(`/bin/sh could not be run: ${error.message}`));
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
      const stats = fs.statSync(directory);
      list.push({
        id,
        kind: 'function',
        state: 'lost',
        createdAt: stats.mtimeMs,
        error: (error as Error).message,
      });
    }
  }
  return list.sort((a, b) => (a.createdAt as number) - (b.createdAt as number));
}

/** Waits until job `id` has ended (or is lost), then reports how. */
export async function jobResult(id: string): Promise<JobOutcome> {
  const directory = jobDirectory(jobs(), id);
  let record = readRecord(directory);
  while (!FINAL_STATES.has(record.state) && !isLost(record)) {
    await delay(POLL_MS);
    record = readRecord(directory);
  }
  const status = statusOf(record, isLost(record)) as unknown as JobOutcome['status'];
  if (record.kind === 'command') {
    return { status, stdout: keptOutput(directory, STDOUT_FILE), stderr: keptOutput(directory, STDERR_FILE) };
  }
  if (record.state !== 'succeeded' && record.state !== 'failed') return { status };
  let data: Buffer;
  try {
    data = fs.readFileSync(join(directory, RESULT_FILE));
  } catch {
    return { status };
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

/** The output kept in a job's file, at most the job's limit (the tail). */
function keptOutput(directory: string, name: string): string {
  const { spec } = decode(fs.readFileSync(join(directory, REQUEST_FILE))) as JobRequest;
  try {
    const data = fs.readFileSync(join(directory, name));
    return data.subarray(Math.max(0, data.length - spec.maxOutput)).toString('utf8');
  } catch {
    return '';
  }
}

/**
 * Cancels job `id`: its supervisor is sent SIGTERM and kills the job's
 * process group (SIGTERM, then SIGKILL after the job's grace). Resolves
 * with the status once it has ended. A lost job's group is killed here,
 * when its leader is still the process that was started.
 */
export async function jobCancel(id: string): Promise<Record<string, unknown>> {
  const directory = jobDirectory(jobs(), id);
  let record = readRecord(directory);
  if (FINAL_STATES.has(record.state)) return statusOf(record, false);
  if (isLost(record)) {
    if (record.pid !== null && sameProcess(record.pid, record.pidStart, record.bootId)) {
      killGroup(record.pid, 'SIGKILL');
    }
    return statusOf(record, true);
  }
  const supervisor = record.supervisor;
  if (supervisor) process.kill(supervisor.pid, 'SIGTERM');
  while (!FINAL_STATES.has(record.state) && !isLost(record)) {
    await delay(POLL_MS / 2);
    record = readRecord(directory);
  }
  return statusOf(record, isLost(record));
}

/**
 * Removes job `id`'s directory.
 * @throws JobLookupError `ERR_TENDRIL_JOB_RUNNING` while it runs.
 */
export function jobRemove(id: string): void {
  const directory = jobDirectory(jobs(), id);
  const record = readRecord(directory);
  if (!FINAL_STATES.has(record.state) && !isLost(record)) {
    throw new JobLookupError(`job ${id} is still ${record.state}; cancel it first`, 'ERR_TENDRIL_JOB_RUNNING');
  }
  if (isLost(record) && record.pid !== null && groupAlive(record.pid)) {
    if (sameProcess(record.pid, record.pidStart, record.bootId)) {
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
  const directory = jobDirectory(jobs(), id);
  const streams = [
    { tag: JOB_STDOUT, name: STDOUT_FILE, read: 0, decoder: new StringDecoder('utf8') },
    { tag: JOB_STDERR, name: STDERR_FILE, read: 0, decoder: new StringDecoder('utf8') },
  ];
  for (;;) {
    let record = readRecord(directory);
    const ended = FINAL_STATES.has(record.state) || isLost(record);
    let any = false;
    for (const stream of streams) {
      let fd: number;
      try {
        fd = fs.openSync(join(directory, stream.name), 'r');
      } catch {
        continue;
      }
      try {
        // Opened first, then the count read: a count newer than the file is seen (its inode differs) and waited out.
        let stats = fs.fstatSync(fd);
        record = readRecord(directory);
        const inode = record.inodes?.[stream.tag === JOB_STDOUT ? 'stdout' : 'stderr'];
        if (inode !== undefined && inode !== stats.ino) {
          any = true;
          continue;
        }
        stats = fs.fstatSync(fd);
        const dropped = stream.tag === JOB_STDOUT ? record.output.droppedStdout : record.output.droppedStderr;
        // The supervisor dropped the front of the file (past maxOutput) before this read it: say so.
        let offset = stream.read - dropped;
        if (offset < 0) {
          await sender.send([stream.tag, `[... ${-offset} bytes of output dropped ...]\n`]);
          stream.read = dropped;
          offset = 0;
        }
        while (offset < stats.size) {
          const buffer = Buffer.alloc(Math.min(OUTPUT_CHUNK, stats.size - offset));
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
    if (ended && !any) break;
    if (!any) await delay(POLL_MS);
  }
  for (const stream of streams) {
    const rest = stream.decoder.end();
    if (rest) await sender.send([stream.tag, rest]);
  }
}

/** Removes finished jobs past their `keep`, and lost ones that long after their state was last written. */
function prune(root: string): void {
  const now = Date.now();
  for (const id of fs.readdirSync(root)) {
    try {
      const directory = jobDirectory(root, id);
      const record = readRecord(directory);
      const ended = FINAL_STATES.has(record.state)
        ? record.endedAt
        : isLost(record)
          ? fs.statSync(join(directory, 'state')).mtimeMs
          : null;
      if (ended !== null && ended + record.keep < now) removeJobDirectory(directory);
    } catch {
      // Not a job, or one whose state cannot be read: left for the program to see.
    }
  }
}

function delay(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}
