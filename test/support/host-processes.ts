import { type ChildProcess, execFileSync, spawn } from 'node:child_process';
import { readdirSync, readFileSync } from 'node:fs';

/** Pids of the processes whose command line mentions `text` (this one's excepted). */
export function processesNaming(text: string): number[] {
  const found: number[] = [];
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry) || Number(entry) === process.pid) continue;
    try {
      if (readFileSync(`/proc/${entry}/cmdline`, 'utf8').includes(text)) found.push(Number(entry));
    } catch {
      // Ended meanwhile.
    }
  }
  return found;
}

/** Waits (blocking) until no process mentions `text`, at most `ms`; returns those that still do. */
export function waitForProcessesNaming(text: string, ms: number): number[] {
  const deadline = Date.now() + ms;
  const tick = new Int32Array(new SharedArrayBuffer(4));
  let pids = processesNaming(text);
  while (pids.length > 0 && Date.now() < deadline) {
    Atomics.wait(tick, 0, 0, 50);
    pids = processesNaming(text);
  }
  return pids;
}

/** Resolves after `ms` milliseconds. */
export const pause = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** A daemon the bed started: its process and the last lines it logged, for the error when it fails. */
export interface Daemon {
  readonly process: ChildProcess;
  readonly log: string[];
}

/** Starts `command` with its stderr kept (the last 50 chunks); stdout is not read. */
export function startDaemon(command: string, args: string[]): Daemon {
  const child = spawn(command, args, { stdio: ['ignore', 'ignore', 'pipe'] });
  const log: string[] = [];
  child.stderr?.on('data', (chunk: Buffer) => {
    log.push(chunk.toString());
    if (log.length > 50) log.shift();
  });
  // A spawn error (ENOENT) is seen as the exit code below, not thrown at the event loop.
  child.on('error', (error) => log.push(String(error)));
  return { process: child, log };
}

/** Stops a daemon with SIGTERM, then SIGKILL after `graceMs`; resolves once it has exited. */
export async function stopDaemon(daemon: Daemon, graceMs: number): Promise<void> {
  const child = daemon.process;
  if (child.exitCode !== null || child.signalCode !== null || child.pid === undefined) return;
  const exited = new Promise((resolve) => child.once('exit', resolve));
  child.kill('SIGTERM');
  const killer = setTimeout(() => child.kill('SIGKILL'), graceMs);
  await exited;
  clearTimeout(killer);
}

/** Waits up to 60 s for `ready` to hold (or not throw); fails with the daemon's log if it exits first. */
export async function waitUntil(name: string, daemon: Daemon, ready: () => boolean): Promise<void> {
  const deadline = Date.now() + 60_000;
  for (;;) {
    if (daemon.process.exitCode !== null) {
      throw new Error(`${name} exited (${daemon.process.exitCode}): ${daemon.log.join('')}`);
    }
    let why = 'not ready';
    try {
      if (ready()) return;
    } catch (error) {
      why = (error as Error).message;
    }
    if (Date.now() > deadline) throw new Error(`${name} did not answer within 60 s: ${why}`);
    await pause(100);
  }
}

/** Mount points at or under `dir`, deepest first (from this process's mount table). */
export function mountsUnder(dir: string): string[] {
  return readFileSync('/proc/self/mountinfo', 'utf8')
    .split('\n')
    .map((line) => line.split(' ')[4] ?? '')
    .filter((point) => point === dir || point.startsWith(`${dir}/`))
    .sort((a, b) => b.length - a.length);
}

/** Unmounts (lazily) whatever is mounted at or under `dir`, deepest first. */
export function unmountUnder(dir: string): void {
  for (const point of mountsUnder(dir)) {
    try {
      execFileSync('umount', ['--lazy', point], { stdio: 'ignore' });
    } catch {
      // Gone meanwhile.
    }
  }
}
