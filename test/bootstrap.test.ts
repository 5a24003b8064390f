import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { BootstrapError, ConnectTimeoutError, InvalidOptionError, Router } from 'tendril';
import { switchOf } from './support/internals.js';
import { ROOT, waitGone } from './support/procs.js';
import { NARROW, relay } from './support/relay.js';

describe('bootstrap', () => {
  let router: Router;
  before(() => {
    router = new Router();
  });
  after(() => router.shutdown());

  test('the first stage is under 1 KiB (2 KiB with the code cache part) and the core deflates to under half', () => {
    const sizes = JSON.parse(readFileSync(join(ROOT, 'dist', 'bootstrap', 'sizes.json'), 'utf8'));
    assert.ok(sizes.firstStage < 1024, `first stage is ${sizes.firstStage} bytes`);
    assert.ok(
      sizes.firstStageCodeCache < 2048,
      `first stage with the code cache part is ${sizes.firstStageCodeCache} bytes`,
    );
    assert.ok(sizes.coreDeflated < sizes.core / 2, 'the core is deflated');
  });

  test('a via hop for local, sudo, su or doas ships the connection layer alone, compressed, once', async () => {
    const middle = await router.local({ name: 'hop-middle' });
    const before = router.moduleStats().byContext[middle.id] ?? { filesSent: 0, bytesSent: 0 };
    const first = await router.local({ name: 'hop-leaf1', via: middle });
    const second = await router.local({ name: 'hop-leaf2', via: middle });
    assert.equal(await second.call(() => process.ppid), middle.info.pid);
    const after = router.moduleStats().byContext[middle.id];
    assert.ok(after, 'the intermediate asked the master for the connection layer');
    assert.equal(after.filesSent - before.filesSent, 1, 'one file: the connection layer, without the SSH methods');
    const bytes = after.bytesSent - before.bytesSent;
    const sizes = JSON.parse(readFileSync(join(ROOT, 'dist', 'bootstrap', 'sizes.json'), 'utf8'));
    assert.ok(bytes < 40_000, `${bytes} bytes on the wire for the hop`);
    assert.equal(bytes, sizes.connectionDeflated, 'the layer travelled deflated');
    const received = await middle.moduleStats();
    assert.equal(received.filesReceived, 1);
    await Promise.all([first.shutdown(), second.shutdown()]);
    await middle.shutdown();
  });

  test('bootstrap works when the channel delivers one byte at a time', async () => {
    const child = await router.connect(relay(['--chunk', '1']), { name: 'bytewise' });
    assert.equal(await child.call(() => 6 * 7), 42);
    await child.shutdown();
  });

  test('bootstrap works through 4 KiB pipes that are non-blocking, fed a byte at a time', async () => {
    const child = await router.connect(relay(NARROW), { name: 'narrow' });
    const sizes = await child.call(() => {
      const fs = require('node:fs') as typeof import('node:fs');
      // The relay's pipes are now fds 3 and 4 of the child (the shell moved them there).
      return [fs.readlinkSync('/proc/self/fd/3'), fs.readlinkSync('/proc/self/fd/4')];
    });
    assert.match(sizes[0] as string, /^pipe:/);
    // Large messages cross the 4 KiB pipes in both directions.
    const echoed = await child.call((b: Buffer) => b, Buffer.alloc(300_000, 3));
    assert.equal(echoed.length, 300_000);
    await child.shutdown();
  });

  test('a channel that closes mid-payload is a BootstrapError at once, not at connectTimeout, quoting the child', async () => {
    const started = Date.now();
    // It takes about 0.3 s idle; the bound is a third of connectTimeout, so that a loaded machine cannot make it fail.
    const connectTimeout = 30_000;
    await assert.rejects(
      router.connect(relay(['--close-after', '1000']), { name: 'cut', connectTimeout }),
      (error: unknown) => {
        assert.ok(error instanceof BootstrapError);
        assert.match(error.lastOutput, /stream closed after 1000 bytes, before the \d+-byte core had arrived/);
        assert.match(error.message, /could not start context 'cut'/);
        return true;
      },
    );
    assert.ok(Date.now() - started < connectTimeout / 3, `took ${Date.now() - started} ms`);
  });

  test('a child that never answers is killed and reaped at connectTimeout', async () => {
    const started = Date.now();
    await assert.rejects(
      router.connect(relay(['--swallow']), { name: 'silent', connectTimeout: 800 }),
      (error: unknown) =>
        error instanceof ConnectTimeoutError &&
        error.timeoutMs === 800 &&
        // Which step it was in: the interpreter started, but the core never got through.
        /Node/.test(error.step) &&
        error.message.includes(`while ${error.step}`),
    );
    const elapsed = Date.now() - started;
    assert.ok(elapsed >= 800 && elapsed < 3000, `took ${elapsed} ms`);
    // The global leak check then confirms nothing of it is left running.
  });

  test('a missing interpreter is a BootstrapError quoting the shell', async () => {
    await assert.rejects(
      router.local({ name: 'nonode', nodePath: '/nonexistent/node' }),
      (error: unknown) => error instanceof BootstrapError && /not found|No such file/.test(error.lastOutput),
    );
  });

  test('an interpreter that exits at once is reported with its exit code and output', async () => {
    await assert.rejects(
      router.local({ name: 'broken', nodePath: ['sh', '-c', 'echo this node is broken >&2; exit 3', 'sh'] }),
      (error: unknown) =>
        error instanceof BootstrapError &&
        /exit code 3/.test(error.message) &&
        /this node is broken/.test(error.message),
    );
  });

  test('a connectTimeout that is not a positive number is refused before anything starts', async () => {
    for (const connectTimeout of [0, -5, Number.NaN, '10' as unknown as number]) {
      await assert.rejects(
        router.local({ connectTimeout }),
        (error: unknown) =>
          error instanceof InvalidOptionError &&
          /option connectTimeout of router.local\(\) must be a number of milliseconds from 1 to 2147483647/.test(
            error.message,
          ),
      );
    }
  });

  test('nodePath may be an argv prefix', async () => {
    const child = await router.local({ name: 'prefixed', nodePath: ['env', 'TENDRIL_PREFIX=yes', process.execPath] });
    assert.equal(await child.call(() => process.env.TENDRIL_PREFIX), 'yes');
    await child.shutdown();
  });

  test('the stream is never fd 1 or 2, and processes spawned by remote code do not inherit it', async () => {
    const child = await router.local({ name: 'fds' });
    const report = await child.call(() => {
      const fs = require('node:fs') as typeof import('node:fs');
      const cp = require('node:child_process') as typeof import('node:child_process');
      const link = (fd: number) => fs.readlinkSync(`/proc/self/fd/${fd}`);
      const inherited = cp
        .execFileSync('sh', ['-c', 'ls /proc/$$/fd'])
        .toString()
        .split(/\s+/)
        .filter(Boolean)
        .map(Number);
      return { fd0: link(0), fd1: link(1), fd2: link(2), fd3: link(3), fd4: link(4), inherited };
    });
    assert.equal(report.fd0, '/dev/null');
    for (const stdio of [report.fd1, report.fd2]) {
      assert.notEqual(stdio, report.fd3);
      assert.notEqual(stdio, report.fd4);
    }
    assert.ok(!report.inherited.includes(4), `a spawned process inherited fds ${report.inherited.join(',')}`);
    await child.shutdown();
  });

  test('the child exits when its stream to the parent is cut mid-session', async () => {
    const child = await router.local({ name: 'cutoff' });
    const pid = child.info.pid;
    // Close the parent's end, as a dying parent's kernel would: the child sees end of stream.
    switchOf(router).routeOf(child.id)?.close('closed by the test');
    const took = await waitGone([pid], 1000);
    assert.ok(took <= 1000);
  });
});
