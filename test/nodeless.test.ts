// A target without Node, for real: an sshd of the suite's own running
// where the host's Node is hidden (test/support/testbed.ts, withoutNode),
// so every session it serves finds no Node on its own; tendril ships one
// (the default release, from the registry through the suite's store).
import assert from 'node:assert/strict';
import { copyFileSync, mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { InterpreterError, type LogRecord, Router, type ShipProgress } from 'tendril';
import { nodeBinary } from './support/nodes.js';
import { forgetRuntimes, SHIPPED } from './support/runtimes.js';
import { sshLogin, startTestbed, type Testbed } from './support/testbed.js';

/** Where a shipped runtime runs from in an account's default cache. */
const IN_CACHE = /^\/home\/[^/]+\/\.cache\/tendril\/node\/(\d+\.\d+\.\d+)-x64-[0-9a-f]{16}\/node$/;
/** A shipped start may fetch the runtime from the registry first. */
const SLOW = 180_000;

describe('an ssh target without Node', () => {
  let bed: Testbed;
  let router: Router;
  let accounts: string[];
  before(async () => {
    bed = await startTestbed({ withoutNode: true });
    accounts = [bed.accounts.sudoer.name, bed.accounts.target.name];
    forgetRuntimes(...accounts);
    router = new Router({ nodeRuntime: SHIPPED });
  });
  after(async () => {
    await router?.shutdown();
    if (accounts) forgetRuntimes(...accounts);
    await bed?.stop();
  });

  test("with shipNode 'never', is an InterpreterError naming the host, the account, every place tried and what the target is", async () => {
    await assert.rejects(router.ssh({ ...sshLogin(bed), shipNode: 'never' }), (error: unknown) => {
      assert.ok(error instanceof InterpreterError, String(error));
      const account = bed.accounts.sudoer.name;
      assert.match(error.message, new RegExp(`no Node\\.js interpreter found on \\S+ for user ${account} with PATH=`));
      assert.match(error.message, /tried node, nodejs, .*\/usr\/bin\/node, /s);
      assert.match(error.message, /the target is Linux \S+, [^,]+, glibc \d+\.\d+: install Node there \(12 or newer\)/);
      return true;
    });
  });

  test('its sessions see no Node, and one named by nodePath runs there', async () => {
    // A copy outside the hidden places: the bed covers Node where a shell looks, not everywhere.
    const elsewhere = join(bed.dir, 'node-elsewhere');
    copyFileSync(process.execPath, elsewhere);
    const context = await router.ssh({ ...sshLogin(bed), nodePath: elsewhere });
    assert.equal(await context.call(() => process.execPath), elsewhere);
    const looked = await context.exec('sh', ['-c', 'command -v node || command -v nodejs || echo none']);
    assert.equal(looked.stdout.trim(), 'none');
    assert.equal(router.runtimeStats().shipped, 0, 'nodePath named a Node: nothing was shipped');
    await context.shutdown();
  });

  test("under 'auto' the first context brings Node over ssh; later contexts and later runs send no runtime bytes", {
    timeout: SLOW,
  }, async () => {
    forgetRuntimes(...accounts);
    const shipping = new Router({ nodeRuntime: SHIPPED });
    const events: ShipProgress[] = [];
    const logs: LogRecord[] = [];
    shipping.on('ship', (event) => events.push(event));
    shipping.on('log', (record) => logs.push(record));
    try {
      const first = await shipping.ssh({ ...sshLogin(bed), connectTimeout: SLOW });
      const [execPath, version] = await first.call(() => [process.execPath, process.versions.node]);
      const where = IN_CACHE.exec(execPath as string);
      assert.ok(where, `runs the shipped Node: ${execPath}`);
      assert.equal(where[1], version);
      // It is a context like any other: calls, commands, modules.
      assert.equal((await first.exec('sh', ['-c', 'echo $((6 * 7))'])).stdout, '42');
      assert.equal(await first.call(() => require('node:os').userInfo().username), bed.accounts.sudoer.name);
      // Modules forwarded to it: an ESM fixture importing an npm package the target lacks.
      const tasks = first.import<typeof import('./fixtures/tasks.js')>(new URL('./fixtures/tasks.js', import.meta.url));
      assert.deepEqual((await tasks.deploy({ version: '1.0' })).steps, [2, 4, 6]);
      const stats = shipping.runtimeStats();
      const last = events.at(-1);
      assert.ok(last, 'ship events were emitted');
      assert.equal(events[0]?.bytes, 0);
      assert.equal(last.bytes, last.total);
      assert.equal(last.version, version);
      assert.equal(stats.shipped, 1);
      assert.equal(stats.bytesSent, last.total);
      assert.deepEqual(stats.byContext[first.id], { shipped: 1, bytesSent: last.total, reused: 0 });
      assert.ok(last.total > 10_000_000, `a real Node package: ${last.total} bytes`);
      assert.ok(
        logs.some((record) =>
          new RegExp(`has no usable Node; sending Node ${version} \\(linux-x64, [\\d.]+ MB\\) from master`).test(
            record.text,
          ),
        ),
        logs.map((record) => record.text).join('\n'),
      );

      const second = await shipping.ssh(sshLogin(bed));
      assert.equal(await second.call(() => process.execPath), execPath);
      assert.deepEqual(
        { ...shipping.runtimeStats(), byContext: undefined },
        { shipped: 1, bytesSent: last.total, reused: 1, byContext: undefined },
      );

      const later = new Router({ nodeRuntime: SHIPPED });
      try {
        const third = await later.ssh(sshLogin(bed));
        assert.equal(await third.call(() => process.execPath), execPath);
        assert.deepEqual(
          { ...later.runtimeStats(), byContext: undefined },
          { shipped: 0, bytesSent: 0, reused: 1, byContext: undefined },
        );
      } finally {
        await later.shutdown();
      }
    } finally {
      await shipping.shutdown();
    }
  });

  test('sudo through the ssh context gets the runtime from it: the ssh hop carries it once for two accounts', {
    timeout: SLOW,
  }, async () => {
    forgetRuntimes(...accounts);
    const shipping = new Router({ nodeRuntime: SHIPPED });
    try {
      const ssh = await shipping.ssh({ ...sshLogin(bed), connectTimeout: SLOW });
      const once = shipping.runtimeStats();
      assert.equal(once.shipped, 1);
      const target = await shipping.sudo({ via: ssh, username: bed.accounts.target.name, connectTimeout: SLOW });
      const [user, execPath] = await target.call(() => [require('node:os').userInfo().username, process.execPath]);
      assert.equal(user, bed.accounts.target.name);
      assert.match(execPath as string, IN_CACHE);
      assert.ok((execPath as string).startsWith(`/home/${bed.accounts.target.name}/`), execPath as string);
      assert.equal((await target.exec('id', ['-un'])).stdout.trim(), bed.accounts.target.name);
      assert.deepEqual(shipping.runtimeStats(), once, 'the master sent nothing more: the ssh context had the runtime');
    } finally {
      await shipping.shutdown();
    }
  });

  test('sudo that asks for a password: the runtime is sent only after the password is answered, never read as one', {
    timeout: SLOW,
  }, async () => {
    const docs = bed.accounts.docs;
    forgetRuntimes(docs.name);
    const shipping = new Router({ nodeRuntime: SHIPPED });
    try {
      const ssh = await shipping.ssh({ ...sshLogin(bed, docs), connectTimeout: SLOW });
      const runtimeDirectory = join(bed.dir, 'root-runtimes');
      const root = await shipping.sudo({ via: ssh, password: docs.password, runtimeDirectory, connectTimeout: SLOW });
      assert.equal(await root.call(() => process.getuid?.()), 0);
      assert.ok((await root.call(() => process.execPath)).startsWith(`${runtimeDirectory}/`));
      assert.equal((await root.exec('id', ['-un'])).stdout, 'root');
    } finally {
      await shipping.shutdown();
      forgetRuntimes(docs.name);
    }
  });

  test("a Node too old for the core, found first, is replaced under 'auto' and refused under 'never'", {
    timeout: SLOW,
  }, async () => {
    const old = join(bed.dir, 'old-node');
    mkdirSync(old, { recursive: true });
    copyFileSync(nodeBinary(10), join(old, 'node'));
    const login = { ...sshLogin(bed), nodeCandidates: [join(old, 'node')], connectTimeout: SLOW };
    await assert.rejects(router.ssh({ ...login, shipNode: 'never' }), (error: unknown) => {
      assert.ok(error instanceof InterpreterError, String(error));
      assert.match(error.message, /Node v10\.\S+ at \S+old-node\/node is too old; Node 12 or newer is needed/);
      assert.match(error.message, /shipNode/);
      return true;
    });
    const context = await router.ssh(login);
    assert.match(await context.call(() => process.execPath), IN_CACHE);
    assert.ok(Number((await context.call(() => process.versions.node)).split('.')[0]) >= 12);
    await context.shutdown();
  });
});
