/**
 * A job's supervisor: the first of its two processes, started by the
 * context through `sh` (so it was never the context's child) in a session
 * of its own. It starts the job's process in a session and process group
 * of their own, writes its output to the job's files (the tail past the
 * limit), kills the group at the timeout or on cancel, and records how the
 * job ended. It holds no connection: the context that started it may go
 * away at any time. Whatever fails here, the job is not left running
 * unwatched: its group is killed and the failure recorded.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import * as fs from 'node:fs';
import { join } from 'node:path';
import { openRegularFile } from '../../core/regular-file.js';
import { groupAlive, killGroup } from '../process-groups.js';
import { OutputFile } from './output-file.js';
import type { JobRecord } from './protocol.js';
import { type JobRequest, STARTED } from './request.js';
import { JOB_STAGE } from './stage.js';
import {
  bootId,
  CANCEL_FILE,
  processStart,
  RESULT_FILE,
  readRecord,
  STDERR_FILE,
  STDOUT_FILE,
  SUPERVISOR_LOG,
  writeRecord,
} from './state.js';

/** How long output of a process that has exited is still read (members of its group may hold the pipes), in ms. */
const DRAIN_MS = 200;
/** How long the worker may take to load before it has said it runs, in ms. */
const WORKER_START_TIMEOUT = 60_000;

/** How a job is being stopped: at its timeout, on cancel, or because it could not go on. */
type Ending = 'timed-out' | 'cancelled' | { failed: string };

/** Runs the supervisor of the job in `directory`; `coreSource` is handed to a function job's worker. */
export function supervise(directory: string, request: JobRequest, coreSource: Uint8Array): void {
  const { spec } = request;
  let ending: Ending | undefined;
  let exited = false;
  let child: ChildProcess | undefined;
  let killTimer: ReturnType<typeof setTimeout> | undefined;
  // First, so a cancel that comes while this starts is kept rather than ending it unrecorded.
  process.on('SIGTERM', () =>
    stop(cancelAsked() ? 'cancelled' : { failed: 'its supervisor was sent SIGTERM (by the system?)' }),
  );
  process.on('SIGINT', () => {});
  process.on('SIGHUP', () => {});
  const reportFd = closeOnExec(4);

  let record: JobRecord = readRecord(directory);
  let stdout: OutputFile | undefined;
  let stderr: OutputFile | undefined;
  const save = (changes: Partial<JobRecord>) => {
    record = {
      ...record,
      ...changes,
      output: {
        stdout: stdout?.written ?? 0,
        stderr: stderr?.written ?? 0,
        droppedStdout: stdout?.dropped ?? 0,
        droppedStderr: stderr?.dropped ?? 0,
      },
      inodes: stdout && stderr ? { stdout: stdout.inode, stderr: stderr.inode } : null,
    };
    writeRecord(directory, record);
  };
  let reported = false;
  const report = (text: string) => {
    if (reported) return;
    reported = true;
    try {
      fs.writeSync(reportFd, text);
      fs.closeSync(reportFd);
    } catch {
      // The context that waited for it is gone; the state file says the same.
    }
  };
  const finish = (changes: Partial<JobRecord>) => {
    stdout?.close();
    stderr?.close();
    save({ ...changes, endedAt: Date.now() });
    report(`failed ${changes.error ?? changes.state}\n`);
    process.exit(0);
  };
  process.on('uncaughtException', (error) => {
    log(directory, `the supervisor failed: ${error?.stack ?? error}`);
    if (child?.pid !== undefined && !exited) killGroup(child.pid, 'SIGKILL');
    try {
      finish({ state: 'failed', error: `its supervisor failed (the job was killed): ${error?.message ?? error}` });
    } catch {
      process.exit(1);
    }
  });

  function cancelAsked(): boolean {
    return fs.existsSync(join(directory, CANCEL_FILE));
  }

  function stop(why: Ending): void {
    if (ending || exited) return;
    ending = why;
    if (child?.pid === undefined) {
      // Not started yet: nothing to kill.
      if (record.state === 'starting' && child === undefined) finish(endingChanges(why));
      return;
    }
    const pid = child.pid;
    killGroup(pid, 'SIGTERM');
    killTimer = setTimeout(() => {
      if (!exited) killGroup(pid, 'SIGKILL');
    }, spec.grace);
  }

  try {
    process.title = `tendril-job ${record.name ?? record.id}`;
  } catch {
    // Cosmetic.
  }
  stdout = new OutputFile(directory, STDOUT_FILE, spec.maxOutput, () => save({}));
  stderr = new OutputFile(directory, STDERR_FILE, spec.maxOutput, () => save({}));
  save({ supervisor: { pid: process.pid, start: processStart(process.pid) }, bootId: bootId() });
  if (cancelAsked()) {
    finish({ state: 'cancelled' });
    return;
  }

  const env = { ...process.env, ...(spec.env ?? {}) };
  const cwd = spec.cwd ?? process.cwd();
  try {
    if (spec.kind === 'command' && spec.command) {
      const { file, args, shell } = spec.command;
      child = spawn(file, args, { cwd, env, detached: true, shell, stdio: ['ignore', 'pipe', 'pipe'] });
    } else {
      child = spawn(process.execPath, ['-e', JOB_STAGE, 'tendril-job', 'worker', directory], {
        cwd,
        env,
        detached: true,
        stdio: ['ignore', 'pipe', 'pipe', 'pipe', 'pipe'],
      });
      const core = child.stdio[3] as NodeJS.WritableStream;
      // A worker that dies before it has read the core (cancelled, killed) must not take this process with it.
      core.on('error', () => {});
      core.end(coreSource);
    }
  } catch (error) {
    finish({ state: 'failed', error: `the job could not be started: ${(error as Error).message}` });
    return;
  }
  const started = child;

  const running = () => {
    save({
      state: 'running',
      startedAt: Date.now(),
      pid: started.pid ?? null,
      pidStart: started.pid === undefined ? null : processStart(started.pid),
    });
    report(STARTED);
    if (spec.timeout !== null) setTimeout(() => stop('timed-out'), spec.timeout).unref?.();
  };
  const keep = (stream: 'stdout' | 'stderr') => (chunk: Buffer) => {
    try {
      (stream === 'stdout' ? stdout : stderr)?.write(chunk);
    } catch (error) {
      // A full disk: the job goes on, this stream's output is no longer kept.
      log(directory, `${stream} no longer kept: ${(error as Error).message}`);
      if (stream === 'stdout') stdout = undefined;
      else stderr = undefined;
    }
  };
  started.stdout?.on('data', keep('stdout'));
  started.stderr?.on('data', keep('stderr'));
  started.stdout?.on('error', () => {});
  started.stderr?.on('error', () => {});
  started.on('error', (error) => {
    if (record.state !== 'starting' || exited) return;
    exited = true;
    finish({ state: 'failed', error: `the job could not be started: ${error.message}` });
  });
  // The pid is there as soon as the program was found (the 'spawn' event is missing before Node 15.1).
  if (spec.kind === 'command') {
    if (started.pid !== undefined) running();
  } else {
    const ready = started.stdio[4] as NodeJS.ReadableStream;
    let said = '';
    ready.on('data', (chunk: Buffer) => {
      said += chunk.toString();
      if (said === STARTED && record.state === 'starting' && !ending) running();
    });
    ready.on('error', () => {});
    setTimeout(() => {
      if (record.state === 'starting') stop({ failed: `its process did not start within ${WORKER_START_TIMEOUT} ms` });
    }, WORKER_START_TIMEOUT).unref?.();
  }

  started.on('exit', (code, signal) => {
    exited = true;
    if (killTimer) clearTimeout(killTimer);
    setTimeout(() => {
      started.stdout?.destroy();
      started.stderr?.destroy();
      // A job killed at its timeout or on cancel takes its whole group: what ignored SIGTERM goes now.
      if (ending && started.pid !== undefined && groupAlive(started.pid)) killGroup(started.pid, 'SIGKILL');
      finish(ended(code, signal));
    }, DRAIN_MS);
  });

  function ended(code: number | null, signal: NodeJS.Signals | null): Partial<JobRecord> {
    const how = { exitCode: code, signal };
    if (ending) return { ...how, ...endingChanges(ending) };
    if (spec.kind === 'command') return { ...how, state: code === 0 ? 'succeeded' : 'failed' };
    if (record.state === 'starting') {
      return {
        ...how,
        state: 'failed',
        error: `the job's process exited (${describe(code, signal)}) before it started`,
      };
    }
    let ok: boolean | undefined;
    try {
      // The worker writes `ok` first: one byte says how it ended (see worker.ts).
      const { fd } = openRegularFile(join(directory, RESULT_FILE));
      try {
        const flag = Buffer.alloc(1);
        if (fs.readSync(fd, flag, 0, 1, 0) === 1) ok = flag[0] === 1;
      } finally {
        fs.closeSync(fd);
      }
    } catch {
      // No result: the process ended without returning (process.exit, a crash, a signal).
    }
    if (ok === undefined) {
      return {
        ...how,
        state: 'failed',
        error: `the job's process exited (${describe(code, signal)}) before its function returned`,
      };
    }
    return { ...how, state: ok ? 'succeeded' : 'failed' };
  }
}

function endingChanges(ending: Ending): Partial<JobRecord> {
  return typeof ending === 'string' ? { state: ending } : { state: 'failed', error: ending.failed };
}

function describe(code: number | null, signal: NodeJS.Signals | null): string {
  return signal ? `killed by ${signal}` : `exit code ${code}`;
}

/**
 * `fd` as a descriptor the job does not inherit: what came through `sh` is
 * not close-on-exec, and a job (or a daemon it starts) holding the
 * context's report pipe would keep it waiting. Linux reopens it through
 * /proc (Node opens with O_CLOEXEC); elsewhere it stays as it is.
 */
function closeOnExec(fd: number): number {
  try {
    const copy = fs.openSync(`/proc/self/fd/${fd}`, 'w');
    fs.closeSync(fd);
    return copy;
  } catch {
    return fd;
  }
}

/** Appends a line to the job's supervisor.log (a regular file: a FIFO there is never waited on). */
function log(directory: string, text: string): void {
  try {
    const { fd } = openRegularFile(join(directory, SUPERVISOR_LOG), { append: true });
    try {
      fs.writeSync(fd, `${new Date().toISOString()} ${text}\n`);
    } finally {
      fs.closeSync(fd);
    }
  } catch {
    // Nowhere to say it.
  }
}
