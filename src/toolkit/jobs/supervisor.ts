/**
 * A job's supervisor: the first of its two processes, started by the
 * context through `sh` (so it was never the context's child) in a session
 * of its own. It starts the job's process in a session and process group
 * of their own, writes its output to the job's files (the tail past the
 * limit), kills the group at the timeout or on cancel (SIGTERM to this
 * process), and records how the job ended. It holds no connection: the
 * context that started it may go away at any time.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import * as fs from 'node:fs';
import { join } from 'node:path';
import { OutputFile } from './output-file.js';
import type { JobRecord } from './protocol.js';
import type { JobRequest } from './request.js';
import { STARTED } from './request.js';
import { JOB_STAGE } from './stage.js';
import {
  bootId,
  groupAlive,
  killGroup,
  processStart,
  RESULT_FILE,
  readRecord,
  STDERR_FILE,
  STDOUT_FILE,
  writeRecord,
} from './state.js';

/** How long output of a process that has exited is still read (members of its group may hold the pipes), in ms. */
const DRAIN_MS = 200;
/** How long the worker may take to load before it has said it runs, in ms. */
const WORKER_START_TIMEOUT = 60_000;

/** Runs the supervisor of the job in `directory`; `coreSource` is handed to a function job's worker. */
export function supervise(directory: string, request: JobRequest, coreSource: Uint8Array): void {
  const { spec } = request;
  let record: JobRecord = readRecord(directory);
  const save = (changes: Partial<JobRecord>) => {
    record = {
      ...record,
      ...changes,
      output: outputCounts(),
      inodes: stdout && stderr ? { stdout: stdout.inode, stderr: stderr.inode } : null,
    };
    writeRecord(directory, record);
  };
  try {
    process.title = `tendril-job ${record.name ?? record.id}`;
  } catch {
    // Cosmetic.
  }
  const stdout = new OutputFile(directory, STDOUT_FILE, spec.maxOutput, () => save({}));
  const stderr = new OutputFile(directory, STDERR_FILE, spec.maxOutput, () => save({}));
  function outputCounts(): JobRecord['output'] {
    return {
      stdout: stdout?.written ?? 0,
      stderr: stderr?.written ?? 0,
      droppedStdout: stdout?.dropped ?? 0,
      droppedStderr: stderr?.dropped ?? 0,
    };
  }
  save({ supervisor: { pid: process.pid, start: processStart(process.pid) }, bootId: bootId() });

  let reported = false;
  const report = (text: string) => {
    if (reported) return;
    reported = true;
    try {
      fs.writeSync(4, text);
      fs.closeSync(4);
    } catch {
      // The context that waited for it is gone; the state file says the same.
    }
  };

  const env = { ...process.env, ...(spec.env ?? {}) };
  const cwd = spec.cwd ?? process.cwd();
  let child: ChildProcess;
  try {
    if (spec.kind === 'command' && spec.command) {
      const { file, args, shell } = spec.command;
      child = spawn(file, args, {
        cwd,
        env,
        detached: true,
        shell: shell === false ? false : shell,
        stdio: ['ignore', 'pipe', 'pipe'],
      });
    } else {
      child = spawn(process.execPath, ['-e', JOB_STAGE, 'tendril-job', 'worker', directory], {
        cwd,
        env,
        detached: true,
        stdio: ['ignore', 'pipe', 'pipe', 'pipe', 'pipe'],
      });
      (child.stdio[3] as NodeJS.WritableStream).end(coreSource);
    }
  } catch (error) {
    save({ state: 'failed', endedAt: Date.now(), error: `the job could not be started: ${(error as Error).message}` });
    report(`failed ${(error as Error).message}\n`);
    process.exit(0);
  }

  let ending: 'timed-out' | 'cancelled' | undefined;
  let killTimer: ReturnType<typeof setTimeout> | undefined;
  const stop = (why: 'timed-out' | 'cancelled') => {
    if (ending || child.pid === undefined) return;
    ending = why;
    killGroup(child.pid, 'SIGTERM');
    killTimer = setTimeout(() => {
      if (child.pid !== undefined) killGroup(child.pid, 'SIGKILL');
    }, spec.grace);
  };
  // Cancel: the context sends SIGTERM here. The others must not end the supervisor of a running job.
  process.on('SIGTERM', () => stop('cancelled'));
  process.on('SIGINT', () => {});
  process.on('SIGHUP', () => {});

  const running = () => {
    save({
      state: 'running',
      startedAt: Date.now(),
      pid: child.pid ?? null,
      pidStart: child.pid === undefined ? null : processStart(child.pid),
    });
    report(STARTED);
    if (spec.timeout !== null) setTimeout(() => stop('timed-out'), spec.timeout).unref?.();
  };
  child.stdout?.on('data', (chunk: Buffer) => stdout.write(chunk));
  child.stderr?.on('data', (chunk: Buffer) => stderr.write(chunk));
  child.on('error', (error) => {
    if (record.state !== 'starting') return;
    finish({ state: 'failed', error: `the job could not be started: ${error.message}` });
  });
  // The pid is there as soon as the program was found (the 'spawn' event is missing before Node 15.1).
  if (spec.kind === 'command') {
    if (child.pid !== undefined) running();
  } else {
    const ready = child.stdio[4] as NodeJS.ReadableStream;
    let said = '';
    ready.on('data', (chunk: Buffer) => {
      said += chunk.toString();
      if (said === STARTED && record.state === 'starting') running();
    });
    ready.on('error', () => {});
    setTimeout(() => {
      if (record.state === 'starting') stop('timed-out');
    }, WORKER_START_TIMEOUT).unref?.();
  }

  child.on('exit', (code, signal) => {
    setTimeout(() => {
      child.stdout?.destroy();
      child.stderr?.destroy();
      // A job killed at its timeout or on cancel takes its whole group: what ignored SIGTERM goes now.
      if (ending && child.pid !== undefined && groupAlive(child.pid)) killGroup(child.pid, 'SIGKILL');
      if (killTimer) clearTimeout(killTimer);
      finish(ended(code, signal));
    }, DRAIN_MS);
  });

  function ended(code: number | null, signal: NodeJS.Signals | null): Partial<JobRecord> {
    const how = { exitCode: code, signal };
    if (ending) return { ...how, state: ending };
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
      ok = fs.readFileSync(join(directory, RESULT_FILE))[0] === 1;
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

  function finish(changes: Partial<JobRecord>): void {
    stdout.close();
    stderr.close();
    save({ ...changes, endedAt: Date.now() });
    report(`failed ${changes.error ?? changes.state}\n`);
    process.exit(0);
  }
}

function describe(code: number | null, signal: NodeJS.Signals | null): string {
  return signal ? `killed by ${signal}` : `exit code ${code}`;
}
