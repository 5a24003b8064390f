// Running the peers: Debian packages installed on demand, processes timed
// from start to exit, and Mitogen's driver script.
import { execFileSync, spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import { join } from 'node:path';
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
 * Runs `command` to its exit and times it, in ms.
 * @throws Error quoting its output when it fails.
 */
export function run(command: string, args: string[], env: NodeJS.ProcessEnv = process.env): Promise<Finished> {
  return new Promise((resolve, reject) => {
    const started = performance.now();
    const child = spawn(command, args, { env, cwd: ROOT, stdio: ['ignore', 'pipe', 'pipe'] });
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

/** The first line of a command's output, for the versions the report names. */
export function versionOf(command: string, args: string[]): string {
  try {
    return (
      execFileSync(command, args, { encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] })
        .split('\n')[0]
        ?.trim() ?? ''
    );
  } catch (error) {
    const output = (error as { stderr?: string }).stderr ?? '';
    return output.split('\n')[0]?.trim() || 'unknown';
  }
}
