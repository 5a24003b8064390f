import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { fileURLToPath } from 'node:url';
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
          const error = Object.assign(new SyntaxError('old but well'), { line: 3, where: { file: 'x' } });
          // Assigned: Node before 16.9 ignores Error's options argument.
          (error as { cause?: unknown }).cause = new RangeError('below');
          throw error;
        }),
        (error: unknown) => {
          assert.ok(error instanceof CallError);
          assert.equal(error.remoteName, 'SyntaxError');
          assert.deepEqual(error.remoteFields, { line: 3, where: { file: 'x' } });
          assert.equal((error.cause as CallError).remoteName, 'RangeError');
          // The first frame names this file, at the line of the throw's `new`.
          const text = readFileSync(fileURLToPath(import.meta.url), 'utf8');
          const line = text.slice(0, text.indexOf("new SyntaxError('old but well'")).split('\n').length;
          assert.match(
            error.remoteStack,
            new RegExp(`^SyntaxError: old but well\\n\\s+at \\S*node-versions\\.test\\.js:${line}:`),
          );
          return true;
        },
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
