// The lxd and incus methods against real daemons (Debian's LXD 5.0, and
// Incus 6.0 from bookworm-backports), each a private daemon of the test's
// own with the test image imported: contexts in running instances, sudo and
// su inside, via an ssh context, each failure as its typed error quoting
// the client.
import assert from 'node:assert/strict';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import {
  BootstrapError,
  ContainerNotFoundError,
  ContainerNotRunningError,
  type Context,
  InterpreterError,
  NotAllowedError,
  Router,
  ToolNotFoundError,
} from 'tendril';
import { assertNoContextLeft, exerciseContext, IMAGE_USER, ROOT_PASSWORD } from './support/containers.js';
import { InstanceBed } from './support/lxd.js';
import { sshBedSuite } from './support/ssh-root.js';

/** How each method is told about the bed: its option for the daemon's directory, the client's name and words. */
const FLAVOURS = [
  {
    kind: 'lxd',
    daemon: 'LXD',
    client: 'lxc',
    connect: (
      router: Router,
      bed: InstanceBed,
      options: { container: string; via?: Context; [key: string]: unknown },
    ) => router.lxd({ lxdDirectory: bed.socketDir, ...options }),
    pathOption: 'lxcPath',
    notAllowed: /dial unix .*unix\.socket: connect: permission denied/,
    noDaemon: /no such file or directory/,
  },
  {
    kind: 'incus',
    daemon: 'Incus',
    client: 'incus',
    connect: (
      router: Router,
      bed: InstanceBed,
      options: { container: string; via?: Context; [key: string]: unknown },
    ) => router.incus({ incusDirectory: bed.socketDir, ...options }),
    pathOption: 'incusPath',
    notAllowed: /You don't have the needed permissions to talk to the incus daemon/,
    noDaemon: /The incus daemon doesn't appear to be started/,
  },
] as const;

describe('lxd and incus', () => {
  const suite = sshBedSuite('tendril-lxd-test-');

  for (const flavour of FLAVOURS) {
    describe(flavour.kind, () => {
      let bed: InstanceBed;
      let web: string;
      before(async () => {
        bed = await InstanceBed.start(flavour.kind);
        web = bed.launch('web');
      });
      after(async () => {
        await bed?.stop();
      });

      test('a context in a running instance answers calls, forwards modules, runs exec and copy, and leaves nothing behind', async () => {
        await using router = new Router();
        const context = await flavour.connect(router, bed, { container: web });
        assert.equal(context.name.split('@')[0], `${flavour.kind}:${web}`);
        const { node, uid } = await exerciseContext(context, suite.scratch);
        assert.match(node, /^v18\./, "the instance's own Node (Debian 12's), not the master's");
        assert.equal(uid, 0);
        assert.equal(await context.call(() => require('node:os').hostname()), web, "the instance's UTS namespace");
        await context.shutdown();
        assertNoContextLeft(
          (argv) => bed.client(['exec', web, '--', ...argv]),
          'no process of the context is left in the instance',
        );
      });

      test('sudo and su inside the instance', async () => {
        await using router = new Router();
        const root = await flavour.connect(router, bed, { container: web });
        const app = await router.sudo({ via: root, username: IMAGE_USER });
        assert.equal(await app.call(() => process.getuid?.()), 1000);
        const su = await router.su({ via: app, password: ROOT_PASSWORD });
        assert.equal((await su.exec('id', ['-un'])).stdout, 'root');
      });

      test(`via an ssh context: ${flavour.client} exec runs on the far side, as root reached with sudo there`, async () => {
        await using router = new Router();
        const root = await suite.sshRoot(router);
        const context = await flavour.connect(router, bed, { via: root, container: web });
        assert.equal(await context.call(() => require('node:os').hostname()), web);
        await exerciseContext(context, suite.scratch);
      });

      test(`failures are typed errors quoting ${flavour.client}`, async () => {
        await using router = new Router();
        const missing = bed.name('nosuch');
        await assert.rejects(flavour.connect(router, bed, { container: missing }), (error: unknown) => {
          assert.ok(error instanceof ContainerNotFoundError, String(error));
          assert.match(
            error.message,
            new RegExp(`no ${flavour.daemon} instance '${missing}' .*Instance not found`, 's'),
          );
          return true;
        });
        const stopped = bed.create('stopped');
        await assert.rejects(flavour.connect(router, bed, { container: stopped }), (error: unknown) => {
          assert.ok(error instanceof ContainerNotRunningError, String(error));
          assert.match(
            error.message,
            new RegExp(
              `instance '${stopped}' .* is not running: ${flavour.client} start ${stopped}.*Instance is not running`,
              's',
            ),
          );
          return true;
        });
        // An account outside the daemon's group may not talk to it.
        const nosudo = await router.sudo({ username: suite.testbed.accounts.nosudo.name });
        await assert.rejects(flavour.connect(router, bed, { via: nosudo, container: web }), (error: unknown) => {
          assert.ok(error instanceof NotAllowedError, String(error));
          assert.match(error.message, new RegExp(`this account may not use ${flavour.daemon} on `));
          assert.match(error.message, flavour.notAllowed);
          return true;
        });
        await assert.rejects(
          flavour.connect(router, bed, {
            container: web,
            [`${flavour.kind}Directory`]: join(suite.scratch, 'no-daemon'),
          }),
          (error: unknown) => {
            assert.ok(error instanceof BootstrapError, String(error));
            assert.match(
              error.message,
              new RegExp(`no ${flavour.daemon} daemon answers on .*${flavour.kind}Directory option`, 's'),
            );
            assert.match(error.message, flavour.noDaemon);
            return true;
          },
        );
        await assert.rejects(
          flavour.connect(router, bed, { container: web, [flavour.pathOption]: '/nonexistent/client' }),
          (error: unknown) =>
            error instanceof ToolNotFoundError &&
            error.tool === '/nonexistent/client' &&
            new RegExp(`give its path with the ${flavour.pathOption} option`).test(error.message),
        );
      });

      test("an instance without Node (shipNode 'never'), then without sh, is an InterpreterError naming it", async () => {
        await using router = new Router();
        // Moved away and back in the one instance, rather than launching another (seconds each).
        const move = (from: string, to: string) => bed.client(['exec', web, '--', '/usr/bin/mv', from, to]);
        move('/usr/bin/node', '/usr/bin/node.away');
        try {
          await assert.rejects(
            flavour.connect(router, bed, { container: web, shipNode: 'never' }),
            (error: unknown) => {
              assert.ok(error instanceof InterpreterError, String(error));
              assert.match(error.message, new RegExp(`context '${flavour.kind}:${web}@[^']+'`));
              assert.match(error.message, /no Node\.js interpreter found .*tried node, nodejs/s);
              return true;
            },
          );
        } finally {
          move('/usr/bin/node.away', '/usr/bin/node');
        }
        move('/usr/bin/sh', '/usr/bin/sh.away');
        try {
          await assert.rejects(flavour.connect(router, bed, { container: web }), (error: unknown) => {
            assert.ok(error instanceof InterpreterError, String(error));
            assert.match(error.message, /has no POSIX shell \(sh\).*Error: Command not found/s);
            return true;
          });
        } finally {
          move('/usr/bin/sh.away', '/usr/bin/sh');
        }
      });
    });
  }
});
