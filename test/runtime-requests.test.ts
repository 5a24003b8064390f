// NODE_RUNTIME asked of the master by a hostile child (issue 40's note):
// the master serves only what it offered, to the start it offered it to
// (src/connection/runtime-service.ts). The child is a real local context
// that asks through the core as any context asks, checking nothing of its
// own; the master's runtime store fetches with an npm that notes it ran.
import assert from 'node:assert/strict';
import { chmodSync, existsSync, mkdtempSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { type ConnectionMethod, type Context, type LocalOptions, Router } from 'tendril';
import { admitRuntimeRequests, ROUTER_SWITCH, restrictRuntimeRequests } from '#dist/internal.js';
import shellModule from './fixtures/user-method/shell.cjs';
import { tinyRuntimePackage } from './support/runtimes.js';

const VERSION = '24.99.3';

/**
 * What `child` gets when it asks the master for a runtime for each of
 * `asks` (an architecture, with or without a transfer): `'described'`,
 * the bytes it received, or the error's message.
 */
function ask(child: Context, asks: { arch: string; transfer: boolean }[]): Promise<(string | number)[]> {
  return child.call(async (list: { arch: string; transfer: boolean }[]) => {
    const core = require('tendril:core');
    const { router } = core.contextRuntime();
    const spec = {
      handle: core.NODE_RUNTIME,
      name: 'NODE_RUNTIME',
      request: (v: unknown) => v,
      reply: (v: unknown) => v,
    };
    const results: (string | number)[] = [];
    for (const { arch, transfer } of list) {
      const receiver = transfer ? new core.Receiver(router) : undefined;
      const asked = core.ask(router, 0, spec, { arch, ...(receiver && { chunks: receiver.toSender() }) });
      try {
        let bytes = 0;
        if (receiver) for await (const chunk of receiver) bytes += (chunk as Uint8Array).length;
        await asked;
        results.push(receiver ? bytes : 'described');
      } catch (error) {
        results.push((error as Error).message);
      }
    }
    return results;
  }, asks);
}

describe('NODE_RUNTIME: the master serves only the starts it offered a runtime to', () => {
  let dir: string;
  let npmRan: string;
  let router: Router;
  let bytes: number;
  before(() => {
    dir = mkdtempSync(join(tmpdir(), 'tendril-runtime-requests-'));
    const tiny = tinyRuntimePackage(dir, VERSION);
    bytes = statSync(tiny).size;
    npmRan = join(dir, 'npm-ran');
    const npm = join(dir, 'npm');
    writeFileSync(npm, `#!/bin/sh\necho "$@" >> ${npmRan}\nexit 1\n`);
    chmodSync(npm, 0o755);
    router = new Router({ nodeRuntime: { directory: join(dir, 'store'), tarballs: [tiny], version: VERSION, npm } });
    // What the master does as it starts serving (see the lead's wiring in master-switch.ts).
    restrictRuntimeRequests((router as unknown as Record<symbol, object>)[ROUTER_SWITCH] as object);
  });
  after(async () => {
    await router.shutdown();
    rmSync(dir, { recursive: true, force: true });
  });

  const master = () => (router as unknown as Record<symbol, object>)[ROUTER_SWITCH] as object;

  test('a child asking outside any start gets nothing, and cannot make the master run npm', async () => {
    const hostile = await router.local();
    const before = router.runtimeStats();
    const got = await ask(hostile, [
      { arch: 'x64', transfer: true },
      { arch: 'x64', transfer: false },
      { arch: 'arm64', transfer: false },
      { arch: 's390x', transfer: true },
    ]);
    assert.ok(
      !existsSync(npmRan),
      `the master ran npm for a child that was offered nothing (answers: ${got.join('; ')})`,
    );
    for (const answer of got) assert.match(String(answer), /refused: .*no start in progress through it was offered/);
    assert.deepEqual(router.runtimeStats(), before);
    await hostile.shutdown();
  });

  test('a start through a context admits one description and one transfer of one architecture, from it and its ancestors only', async () => {
    const via = await router.local();
    const sibling = await router.local();
    // As the master's connect() does around its CONNECT to `via`, for a start that may ship.
    const done = admitRuntimeRequests(master(), [via.id], {});
    try {
      const [refused] = await ask(sibling, [{ arch: 'x64', transfer: true }]);
      assert.ok(
        String(refused).includes(
          `refused: context ${sibling.name} asked for a Node runtime for x64 that no start in progress through it was offered`,
        ),
        String(refused),
      );
      const got = await ask(via, [
        { arch: 'x64', transfer: false },
        { arch: 'x64', transfer: true },
        { arch: 'x64', transfer: true },
        { arch: 'arm64', transfer: false },
      ]);
      assert.equal(got[0], 'described');
      assert.equal(got[1], bytes);
      assert.match(String(got[2]), /refused/);
      assert.match(String(got[3]), /refused/);
    } finally {
      done();
    }
    assert.match(String((await ask(via, [{ arch: 'x64', transfer: true }]))[0]), /refused/, 'after the start');
    // A start that may not ship admits nothing.
    const never = admitRuntimeRequests(master(), [via.id], { shipNode: 'never' });
    const pinned = admitRuntimeRequests(master(), [via.id], { nodePath: '/usr/bin/node' });
    try {
      assert.match(String((await ask(via, [{ arch: 'x64', transfer: false }]))[0]), /refused/);
    } finally {
      never();
      pinned();
    }
    assert.ok(!existsSync(npmRan), 'npm ran');
    await Promise.all([via.shutdown(), sibling.shutdown()]);
  });

  test('through the master: a start via a context gets its runtime, and that context gets none afterwards', async () => {
    const via = await router.local();
    const child = await router.connect(shellModule.shell as ConnectionMethod<LocalOptions>, {
      via,
      nodeCandidates: ['/nonexistent/node'],
      runtimeDirectory: join(dir, 'through-the-master'),
    });
    assert.equal(await child.call(() => process.env.TENDRIL_TINY_RUNTIME), VERSION);
    assert.match(String((await ask(via, [{ arch: 'x64', transfer: true }]))[0]), /refused/);
    await via.shutdown();
  });
});
