// Running the peers: Debian packages installed on demand, processes timed
// from start to exit, and Mitogen's driver script.
import { execFileSync, spawn, spawnSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import type { Readable } from 'node:stream';
import { fileURLToPath } from 'node:url';

/** The repository's root (this file is build/bench/compare/processes.js). */
export const ROOT = fileURLToPath(new URL('../../../', import.meta.url));

/** Debian's Python, which python3-mitogen and ansible-mitogen install for (not a pyenv shim on PATH). */
export const PYTHON = '/usr/bin/python3';

/**
 * Installs the Debian packages whose marker file is missing, with apt-get
 * (as root); otherwise says what to install and throws.
 */
export function ensurePackages(packages: Record<string, string>): void {
  const missing = Object.entries(packages)
    .filter(([, marker]) => !existsSync(marker))
    .map(([name]) => name);
  if (missing.length === 0) return;
  if (process.getuid?.() !== 0) {
    throw new Error(
      `the benchmark's peers need ${missing.join(' ')}: install them (apt-get install ${missing.join(' ')})`,
    );
  }
  console.log(`installing ${missing.join(' ')} with apt-get (peers of the benchmark)...`);
  const env = { ...process.env, DEBIAN_FRONTEND: 'noninteractive' };
  execFileSync('apt-get', ['update', '-qq'], { stdio: 'inherit', env });
  execFileSync('apt-get', ['install', '-y', '-qq', ...missing], { stdio: 'inherit', env });
}

/** Output of a finished process. */
export interface Finished {
  ms: number;
  stdout: string;
}

/**
 * Runs `command` to its exit and times it, in ms; `input`, when given, is
 * its stdin (else it has none).
 * @throws Error quoting its output when it fails.
 */
export function run(
  command: string,
  args: string[],
  env: NodeJS.ProcessEnv = process.env,
  input?: Uint8Array,
): Promise<Finished> {
  return new Promise((resolve, reject) => {
    const started = performance.now();
    const child = spawn(command, args, {
      env,
      cwd: ROOT,
      stdio: [input ? 'pipe' : 'ignore', 'pipe', 'pipe'],
    }) as ReturnType<typeof spawn> & { stdout: Readable; stderr: Readable };
    // A program that exits without reading all of it: its exit status says what happened.
    child.stdin?.on('error', () => undefined);
    child.stdin?.end(input);
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (chunk: Buffer) => {
      stdout += chunk;
    });
    child.stderr.on('data', (chunk: Buffer) => {
      stderr += chunk;
    });
    child.on('error', reject);
    child.on('close', (code) => {
      const ms = performance.now() - started;
      if (code === 0) resolve({ ms, stdout });
      else reject(new Error(`${command} ${args.join(' ')} exited with ${code}: ${(stderr || stdout).slice(-2000)}`));
    });
  });
}

/** Runs Mitogen's side (bench/peers/mitogen_bench.py) in `mode`. */
export function mitogen(mode: string[], env: NodeJS.ProcessEnv): Promise<Finished> {
  return run(PYTHON, [join(ROOT, 'bench', 'peers', 'mitogen_bench.py'), ...mode], env);
}

/** A whole tendril script of bench/scripts/, run as a user runs one. */
export function tendrilScript(name: string, args: string[], env: NodeJS.ProcessEnv): Promise<Finished> {
  return run(process.execPath, [join(ROOT, 'build', 'bench', 'scripts', `${name}.js`), ...args], env);
}

/** The first line a command prints (on stdout, else stderr, as `ssh -V` does), for the versions the report names. */
export function versionOf(command: string, args: string[]): string {
  const result = spawnSync(command, args, { encoding: 'utf8' });
  return `${result.stdout || result.stderr || ''}`.split('\n')[0]?.trim() || 'unknown';
}

/**
 * Mitogen's driver in `serve` mode: one long-lived master taking commands
 * (ready, rtt) one at a time, so its measurements alternate with tendril's.
 */
export class MitogenServer {
  private readonly child;
  private buffered = '';
  private waiting: ((line: string) => void) | undefined;
  private stderr = '';

  constructor(env: NodeJS.ProcessEnv) {
    this.child = spawn(PYTHON, [join(ROOT, 'bench', 'peers', 'mitogen_bench.py'), 'serve'], {
      env,
      cwd: ROOT,
      stdio: ['pipe', 'pipe', 'pipe'],
    });
    this.child.stdout.on('data', (chunk: Buffer) => {
      this.buffered += chunk;
      const newline = this.buffered.indexOf('\n');
      if (newline === -1 || !this.waiting) return;
      const line = this.buffered.slice(0, newline);
      this.buffered = this.buffered.slice(newline + 1);
      const waiting = this.waiting;
      this.waiting = undefined;
      waiting(line);
    });
    this.child.stderr.on('data', (chunk: Buffer) => {
      this.stderr = (this.stderr + chunk).slice(-4000);
    });
  }

  /**
   * Sends one command and resolves with its JSON answer.
   * @throws Error with Mitogen's words when it answers a container kind with an error, or when the driver exits.
   */
  request<T>(command: Record<string, unknown>): Promise<T> {
    return new Promise<T>((resolve, reject) => {
      const onExit = (code: number | null) => reject(new Error(`Mitogen's driver exited (${code}): ${this.stderr}`));
      this.child.once('exit', onExit);
      this.waiting = (line) => {
        this.child.off('exit', onExit);
        const answer = JSON.parse(line) as T | { error: string };
        // A container kind's start that failed (the driver carries on).
        if (answer !== null && typeof answer === 'object' && 'error' in answer) {
          reject(new Error(`Mitogen (${String(command.kind)}): ${answer.error}`));
        } else resolve(answer as T);
      };
      this.child.stdin.write(`${JSON.stringify(command)}\n`);
    });
  }

  /** Ends the driver (its contexts with it) and waits for it. */
  close(): Promise<void> {
    return new Promise((resolve) => {
      this.child.once('exit', () => resolve());
      this.child.stdin.end();
    });
  }
}
