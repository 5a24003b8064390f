// The lxc method against real LXC (lxc-attach) with a private lxcpath:
// contexts in running containers, sudo and su inside, each failure as its
// typed error quoting lxc-attach, and the method used via an ssh context
// (lxc-attach runs on the far side, as root reached with sudo there).
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import {
  ContainerNotFoundError,
  ContainerNotRunningError,
  InterpreterError,
  NotAllowedError,
  Router,
  ToolNotFoundError,
} from 'tendril';
import { assertNoContextLeft, exerciseContext, IMAGE_USER, ROOT_PASSWORD } from './support/containers.js';
import { LxcBed } from './support/lxc.js';
import { sshBedSuite } from './support/ssh-root.js';

describe('lxc', () => {
  let bed: LxcBed;
  const suite = sshBedSuite('tendril-lxc-test-');
  let web: string;
  before(async () => {
    bed = LxcBed.start();
    web = bed.run('web');
  });
  after(async () => {
    bed?.stop();
  });

  test('a context in a running container answers calls, forwards modules, runs exec and copy, and leaves nothing behind', async () => {
    await using router = new Router();
    const context = await router.lxc({ container: web, lxcDirectory: bed.dir });
    assert.equal(context.name.split('@')[0], `lxc:${web}`);
    const { node, uid } = await exerciseContext(context, suite.scratch);
    assert.match(node, /^v18\./, "the container's own Node (Debian 12's), not the master's");
    assert.equal(uid, 0);
    assert.equal(await context.call(() => require('node:os').hostname()), web, "the container's own UTS namespace");
    await context.shutdown();
    assertNoContextLeft((argv) => bed.attach(web, argv));
  });

  test('sudo and su inside the container', async () => {
    await using router = new Router();
    const root = await router.lxc({ container: web, lxcDirectory: bed.dir });
    const app = await router.sudo({ via: root, username: IMAGE_USER });
    assert.equal(await app.call(() => process.getuid?.()), 1000);
    const su = await router.su({ via: app, password: ROOT_PASSWORD });
    assert.equal((await su.exec('id', ['-un'])).stdout, 'root');
  });

  test('via an ssh context: lxc-attach runs on the far side, as root reached with sudo there', async () => {
    await using router = new Router();
    const root = await suite.sshRoot(router);
    const context = await router.lxc({ via: root, container: web, lxcDirectory: bed.dir });
    assert.equal(await context.call(() => require('node:os').hostname()), web);
    await exerciseContext(context, suite.scratch);
  });

  test('failures are typed errors quoting lxc-attach', async () => {
    await using router = new Router();
    // lxc-attach says "Failed to get init pid" for both; the container's config tells them apart.
    const missing = bed.name('nosuch');
    await assert.rejects(router.lxc({ container: missing, lxcDirectory: bed.dir }), (error: unknown) => {
      assert.ok(error instanceof ContainerNotFoundError, String(error));
      assert.match(
        error.message,
        new RegExp(`no LXC container '${missing}' on .* in ${bed.dir} .*Failed to get init pid`, 's'),
      );
      return true;
    });
    const stopped = bed.define('stopped');
    await assert.rejects(router.lxc({ container: stopped, lxcDirectory: bed.dir }), (error: unknown) => {
      assert.ok(error instanceof ContainerNotRunningError, String(error));
      assert.match(
        error.message,
        new RegExp(
          `LXC container '${stopped}' on .* is not running: start it \\(lxc-start\\).*Failed to get init pid`,
          's',
        ),
      );
      return true;
    });
    await assert.rejects(
      router.lxc({ container: web, lxcDirectory: bed.dir, lxcAttachPath: '/nonexistent/lxc-attach' }),
      (error: unknown) =>
        error instanceof ToolNotFoundError &&
        error.tool === '/nonexistent/lxc-attach' &&
        /install the lxc package, or give its path with the lxcAttachPath option/.test(error.message),
    );
    // An account that is not root may not attach to root's containers.
    const nosudo = await router.sudo({ username: suite.testbed.accounts.nosudo.name });
    await assert.rejects(router.lxc({ via: nosudo, container: web, lxcDirectory: bed.dir }), (error: unknown) => {
      assert.ok(error instanceof NotAllowedError, String(error));
      assert.match(error.message, /this account may not attach to LXC container .*Insufficent privileges to control/s);
      return true;
    });
  });

  test("a container without Node (shipNode 'never'), then without sh, is an InterpreterError naming the container", async () => {
    await using router = new Router();
    const broken = bed.run('broken');
    bed.attach(broken, ['rm', '/usr/bin/node', '/usr/bin/nodejs']);
    await assert.rejects(
      router.lxc({ container: broken, lxcDirectory: bed.dir, shipNode: 'never' }),
      (error: unknown) => {
        assert.ok(error instanceof InterpreterError, String(error));
        assert.match(error.message, new RegExp(`context 'lxc:${broken}@[^']+'`));
        assert.match(error.message, /no Node\.js interpreter found .*tried node, nodejs/s);
        return true;
      },
    );
    bed.attach(broken, ['rm', '/usr/bin/sh']);
    await assert.rejects(
      router.lxc({ container: broken, lxcDirectory: bed.dir, shipNode: 'never' }),
      (error: unknown) => {
        assert.ok(error instanceof InterpreterError, String(error));
        assert.match(error.message, /has no POSIX shell \(sh\).*Failed to exec "sh"/s);
        return true;
      },
    );
  });
});
