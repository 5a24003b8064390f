/**
 * The container test bed (test/support/container-image.ts, podman-bed.ts,
 * docker-bed.ts), and what the container tests check in every context.
 */
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { type Context, Router } from 'tendril';
import { SHIPPED } from './runtimes.js';

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

/** A start that may fetch the runtime from the registry and ship it: 3 minutes. */
export const SHIPPING_TIMEOUT = 180_000;

/**
 * What a container without Node must give once tendril ships one: the
 * first context (started by `start`) runs a shipped Node from root's
 * runtime cache in the container and is a full context (`exerciseContext`);
 * the second, and the first of a later run (a new Router), send no runtime
 * bytes; nothing of them is left once they shut down.
 */
export async function exerciseShippedContainer(
  start: (router: Router) => Promise<Context>,
  exec: (argv: string[]) => string,
  scratch: string,
): Promise<void> {
  const router = new Router({ nodeRuntime: SHIPPED });
  try {
    const first = await start(router);
    const { node } = await exerciseContext(first, scratch);
    const execPath = await first.call(() => process.execPath);
    assert.match(execPath, /^\/root\/\.cache\/tendril\/node\/\d+\.\d+\.\d+-x64-[0-9a-f]{16}\/node$/);
    assert.ok(execPath.includes(`/${node.slice(1)}-x64-`), `${execPath} is Node ${node}`);
    const shipped = router.runtimeStats();
    assert.equal(shipped.shipped, 1);
    assert.ok(shipped.bytesSent > 10_000_000, `a real Node package: ${shipped.bytesSent} bytes`);
    const second = await start(router);
    assert.equal(await second.call(() => process.execPath), execPath);
    assert.deepEqual({ ...router.runtimeStats(), byContext: 0 }, { ...shipped, reused: 1, byContext: 0 });
    const later = new Router({ nodeRuntime: SHIPPED });
    try {
      const third = await start(later);
      assert.equal(await third.call(() => process.execPath), execPath);
      assert.deepEqual(
        { ...later.runtimeStats(), byContext: 0 },
        { shipped: 0, bytesSent: 0, reused: 1, byContext: 0 },
      );
    } finally {
      await later.shutdown();
    }
  } finally {
    await router.shutdown();
  }
  assertNoContextLeft(exec);
}

/** Milliseconds since `start` (a `performance.now()`), rounded. */
export const since = (start: number): number => Math.round(performance.now() - start);
