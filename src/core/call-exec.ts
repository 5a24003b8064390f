/**
 * `this.exec()` in a shipped function: a command started on the context's
 * host, tied to the call that started it, so stopping the call (its
 * timeout, its signal) stops the command and everything it started, as
 * `context.exec()` does from the master.
 */
import { spawn } from 'node:child_process';
import { killGroup } from './process-group.js';

/** Options of `CallThis.exec`. */
export interface CallExecOptions {
  /** Working directory. Default: the context's. */
  cwd?: string;
  /** The whole environment. Default: the context's. */
  env?: Record<string, string | undefined>;
  /** Written to its stdin, which is then closed. Default: stdin is closed at once. */
  input?: string | Uint8Array;
  /** Most bytes kept of stdout and of stderr each; past it the oldest are dropped. Default 8 MiB. */
  maxBuffer?: number;
  /** ms between SIGTERM and SIGKILL to its process group when the call is stopped. Default 2000. */
  grace?: number;
}

/** What `CallThis.exec` resolves with. */
export interface CallExecResult {
  /** Its stdout, decoded as UTF-8 (the last `maxBuffer` bytes). */
  stdout: string;
  /** Its stderr, likewise. */
  stderr: string;
  /** Its exit code; null when a signal ended it. */
  exitCode: number | null;
  /** The signal that ended it, e.g. `'SIGKILL'`; null when it exited. */
  signal: string | null;
}

/** Collects a stream's last `limit` bytes. */
function tail(limit: number): { add(chunk: Buffer): void; text(): string } {
  const chunks: Buffer[] = [];
  let size = 0;
  return {
    add(chunk) {
      chunks.push(chunk);
      size += chunk.length;
      while (size - (chunks[0]?.length ?? 0) >= limit && chunks.length > 1) size -= (chunks.shift() as Buffer).length;
    },
    text() {
      const all = Buffer.concat(chunks);
      return all.subarray(Math.max(0, all.length - limit)).toString('utf8');
    },
  };
}

/**
 * Runs `file` with `args` (no shell) in a process group of its own, and
 * kills the group (SIGTERM, then SIGKILL after `grace`) when `signal`
 * aborts, rejecting with its reason.
 */
export function execForCall(
  file: string,
  args: readonly string[],
  options: CallExecOptions,
  signal: AbortSignal,
): Promise<CallExecResult> {
  if (typeof file !== 'string' || file === '')
    return Promise.reject(new TypeError('exec(): file must be a non-empty string'));
  if (!Array.isArray(args) || !args.every((arg) => typeof arg === 'string')) {
    return Promise.reject(new TypeError('exec(): args must be an array of strings'));
  }
  if (signal.aborted) return Promise.reject(signal.reason);
  const limit = options.maxBuffer ?? 8 * 1024 * 1024;
  const grace = options.grace ?? 2000;
  if (!Number.isInteger(limit) || limit < 1) {
    return Promise.reject(new TypeError('exec(): maxBuffer must be a positive integer of bytes'));
  }
  if (!Number.isInteger(grace) || grace < 0 || grace > 2_147_483_647) {
    return Promise.reject(new TypeError('exec(): grace must be a whole number of milliseconds'));
  }
  return new Promise((resolve, reject) => {
    const child = spawn(file, args as string[], {
      cwd: options.cwd,
      env: options.env ?? process.env,
      detached: true,
      stdio: ['pipe', 'pipe', 'pipe'],
    });
    const stdout = tail(limit);
    const stderr = tail(limit);
    child.stdout?.on('data', stdout.add);
    child.stderr?.on('data', stderr.add);
    child.stdin?.on('error', () => {});
    child.stdin?.end(options.input);
    let killTimer: ReturnType<typeof setTimeout> | undefined;
    const signalGroup = (name: NodeJS.Signals) => {
      if (child.pid !== undefined) killGroup(child.pid, name);
    };
    const onAbort = () => {
      signalGroup('SIGTERM');
      killTimer = setTimeout(() => {
        signalGroup('SIGKILL');
        // A process that left the group (setsid) may hold the pipes open: close ends only once they are.
        child.stdout?.destroy();
        child.stderr?.destroy();
      }, grace);
    };
    signal.addEventListener('abort', onAbort, { once: true });
    child.on('error', (error) => {
      signal.removeEventListener('abort', onAbort);
      reject(error);
    });
    child.on('close', (exitCode, exitSignal) => {
      signal.removeEventListener('abort', onAbort);
      if (killTimer) clearTimeout(killTimer);
      // What the group's leader left behind goes with it once the call was stopped.
      if (signal.aborted) {
        signalGroup('SIGKILL');
        reject(signal.reason);
        return;
      }
      resolve({ stdout: stdout.text(), stderr: stderr.text(), exitCode, signal: exitSignal });
    });
  });
}
