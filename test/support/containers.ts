/**
 * The container test bed (test/support/container-image.ts, podman-bed.ts,
 * docker-bed.ts), and what the container tests check in every context.
 */
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import type { Context } from 'tendril';

export * from './container-image.js';
export * from './docker-bed.js';
export * from './podman-bed.js';

/**
 * What every container method must give: a context that answers calls
 * (from inside the container: its Node, its hostname), forwards modules
 * (an ESM fixture importing an npm package the container lacks), runs
 * `exec` and `copy`. Returns what the context reported about itself.
 */
export async function exerciseContext(context: Context, scratch: string): Promise<{ node: string; uid: number }> {
  const inside = await context.call(() => ({
    node: process.version,
    uid: process.getuid?.() ?? -1,
    root: require('node:fs').existsSync('/etc/debian_version'),
  }));
  assert.ok(inside.root, 'the context runs in the Debian image');
  const tasks = context.import<typeof import('../fixtures/tasks.js')>(new URL('../fixtures/tasks.js', import.meta.url));
  assert.deepEqual((await tasks.deploy({ version: '1.0' })).steps, [2, 4, 6]);
  const echoed = await context.exec('sh', ['-c', 'echo "$0"', 'from-exec']);
  assert.equal(echoed.stdout, 'from-exec');
  const source = join(scratch, `copied-${randomBytes(4).toString('hex')}`);
  writeFileSync(source, 'copied into the container\n');
  const target = `/tmp/${randomBytes(6).toString('hex')}`;
  await context.copy(source, target);
  assert.equal((await context.exec('cat', [target])).stdout, 'copied into the container');
  await context.exec('rm', ['-f', target]);
  return { node: inside.node, uid: inside.uid };
}

/**
 * Command lines of the processes in a container, read from its /proc (the
 * image has no ps), one a line. `exec` runs an argv in the container with
 * the runtime's own exec and returns its stdout.
 */
function processesIn(exec: (argv: string[]) => string): string[] {
  return exec(['sh', '-c', 'for p in /proc/[0-9]*; do tr "\\0" " " < "$p/cmdline"; echo; done'])
    .split('\n')
    .filter((line) => line.trim() !== '');
}

/** The command lines in a container that belong to a tendril context (see `processesIn`). */
export function tendrilProcessesIn(exec: (argv: string[]) => string): string[] {
  return processesIn(exec).filter((line) => line.includes('tendril'));
}

/**
 * Asserts that no process of a tendril context is left where `exec` runs
 * commands (see `tendrilProcessesIn`), once the contexts there have shut down.
 */
export function assertNoContextLeft(
  exec: (argv: string[]) => string,
  message = 'no process of the context is left in the container',
): void {
  assert.deepEqual(tendrilProcessesIn(exec), [], message);
}

/** Milliseconds since `start` (a `performance.now()`), rounded. */
export const since = (start: number): number => Math.round(performance.now() - start);
