import assert from 'node:assert/strict';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { CallError, Router } from 'tendril';
import { NODE_MAJORS, nodeBinary } from './support/nodes.js';
import { ROOT } from './support/procs.js';
import { NARROW, relay } from './support/relay.js';

// Each supported major runs the first stage and the core as a child, starts a
// grandchild of the same version (so the connection bundle runs there too),
// and carries calls, errors, every value type and log output.
for (const major of NODE_MAJORS) {
  describe(`Node ${major} as a child`, () => {
    let router: Router;
    let nodePath: string;
    const lines: string[] = [];
    before(() => {
      nodePath = nodeBinary(major);
      router = new Router();
      router.on('log', (record) => lines.push(record.text));
    });
    after(() => router.shutdown());

    test('bootstraps, calls, forwards output, and starts a grandchild of the same version', async () => {
      const child = await router.local({ name: `node${major}`, nodePath });
      assert.match(child.info.nodeVersion, new RegExp(`^v${major}\\.`));
      assert.equal(await child.call(() => process.version), child.info.nodeVersion);
      const value = { m: new Map([[1, new Set(['x'])]]), b: 2n ** 80n, d: new Date(7), buf: Buffer.from('z') };
      assert.deepEqual(await child.call((v: typeof value) => v, value), value);
      await assert.rejects(
        child.call(() => {
          throw new SyntaxError('old but well');
        }),
        (error: unknown) => error instanceof CallError && error.remoteName === 'SyntaxError',
      );
      await child.call((n: number) => console.log(`output from node ${n}`), major);
      const grandchild = await router.local({ name: `node${major}-grandchild`, nodePath, via: child });
      assert.equal(await grandchild.call(() => process.version), child.info.nodeVersion);
      const deadline = Date.now() + 3000;
      while (!lines.includes(`output from node ${major}`) && Date.now() < deadline)
        await new Promise((r) => setTimeout(r, 10));
      assert.ok(lines.includes(`output from node ${major}`));
      const inherited = await child.call(() =>
        // Node 12 has no node: prefix for require().
        // biome-ignore lint/style/useNodejsImportProtocol: runs on Node 12.
        (require('child_process') as typeof import('node:child_process'))
          .execFileSync('sh', ['-c', 'ls /proc/$$/fd'])
          .toString()
          .split(/\s+/)
          .filter(Boolean),
      );
      assert.ok(!inherited.includes('4'), `Node ${major} leaks the stream into spawned processes: fds ${inherited}`);
      await child.shutdown();
    });

    test('module forwarding: a CommonJS npm package and an ES module fixture', async () => {
      const child = await router.local({ name: `modules${major}`, nodePath });
      assert.equal(await child.call(() => typeof require('chalk').red), 'function');
      const main = child.import<{ summary(): { helper: string; legacy: string } }>(
        join(ROOT, 'test', 'fixtures', 'modules', 'main.js'),
      );
      const summary = await main.summary();
      assert.equal(summary.helper, 'helped');
      assert.equal(summary.legacy, 'legacy 42');
      await child.shutdown();
    });

    test('bootstraps through 4 KiB non-blocking pipes fed one byte at a time', async () => {
      const child = await router.connect(relay(NARROW), { name: `narrow${major}`, nodePath });
      assert.equal(await child.call((b: Buffer) => b.length, Buffer.alloc(100_000)), 100_000);
      await child.shutdown();
    });
  });
}
