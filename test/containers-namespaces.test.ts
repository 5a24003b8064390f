// The setns and chroot methods, as root on this machine: setns enters a
// real container's namespaces with nsenter (a podman container in a
// private store, by pid or found with podman inspect; an LXC container in a
// private lxcpath, found with lxc-info), chroot enters the test image
// unpacked into a directory. Each failure as its typed error quoting the
// tool, an account that is not root included, and both via an ssh context.
import assert from 'node:assert/strict';
import { chmodSync, mkdirSync, readdirSync, readlinkSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import {
  ContainerNotFoundError,
  ContainerNotRunningError,
  type Context,
  InterpreterError,
  NotAllowedError,
  Router,
  UnknownUserError,
} from 'tendril';
import { assertNoContextLeft, CONTAINER_LIMITS, exerciseContext, IMAGE_USER, PodmanBed } from './support/containers.js';
import { LxcBed } from './support/lxc.js';
import { unpackNodeImage } from './support/rootfs.js';
import { sshBedSuite } from './support/ssh-root.js';

/** The pids of this machine's processes whose root directory is `path` (that is, chrooted there). */
function chrootedIn(path: string): number[] {
  return readdirSync('/proc')
    .filter((name) => /^\d+$/.test(name))
    .filter((pid) => {
      try {
        return readlinkSync(`/proc/${pid}/root`) === path;
      } catch {
        return false;
      }
    })
    .map(Number);
}

/** Who the context runs as, from inside: uid, gid and groups, as `id` prints them. */
async function identity(context: Context): Promise<string> {
  const [uid, gid, groups] = await Promise.all(
    ['-u', '-g', '-G'].map(async (flag) => (await context.exec('id', [flag])).stdout),
  );
  return `${uid} ${gid} [${groups}]`;
}

describe('setns and chroot', () => {
  const suite = sshBedSuite('tendril-namespaces-test-');

  describe('setns', () => {
    let podman: PodmanBed;
    let lxc: LxcBed;
    let web: string;
    let lxcWeb: string;
    before(() => {
      podman = PodmanBed.start();
      podman.run('web');
      web = 'web';
      lxc = LxcBed.start();
      lxcWeb = lxc.run('web');
    });
    after(() => {
      podman?.stop();
      lxc?.stop();
    });
    const leader = () => Number(podman.podman(['inspect', '--format', '{{.State.Pid}}', web]));

    test("by pid: a context in the container's namespaces answers calls, forwards modules, runs exec and copy, and leaves nothing behind", async () => {
      await using router = new Router();
      const pid = leader();
      const context = await router.setns({ pid });
      assert.equal(context.name.split('@')[0], `setns:pid=${pid}`);
      const { node, uid } = await exerciseContext(context, suite.scratch);
      assert.match(node, /^v18\./, "the container's own Node (Debian 12's), through its mount namespace");
      assert.equal(uid, 0);
      assert.equal(
        await context.call(() => require('node:os').hostname()),
        podman.podman(['inspect', '--format', '{{.Config.Hostname}}', web]),
        "the container's UTS namespace",
      );
      assert.equal(
        await context.call(() => require('node:fs').readlinkSync('/proc/self/ns/pid')),
        readlinkSync(`/proc/${pid}/ns/pid`),
        "the container's PID namespace",
      );
      await context.shutdown();
      assertNoContextLeft((argv) => podman.podman(['exec', web, ...argv]));
    });

    test('by container name, found with podman inspect (runtimeArgs: the private store) or lxc-info (its lxcpath)', async () => {
      await using router = new Router();
      const inPodman = await router.setns({ container: web, runtime: 'podman', runtimeArgs: podman.args });
      assert.equal(inPodman.name.split('@')[0], 'setns:podman/web');
      assert.equal(
        await inPodman.call(() => require('node:fs').readlinkSync('/proc/self/ns/mnt')),
        readlinkSync(`/proc/${leader()}/ns/mnt`),
      );
      const inLxc = await router.setns({ container: lxcWeb, runtime: 'lxc', runtimeArgs: ['--lxcpath', lxc.dir] });
      assert.equal(inLxc.name.split('@')[0], `setns:lxc/${lxcWeb}`);
      assert.equal(await inLxc.call(() => require('node:os').hostname()), lxcWeb);
      await exerciseContext(inLxc, suite.scratch);
    });

    test("as another user, from the container's own passwd, then sudo inside", async () => {
      await using router = new Router();
      const app = await router.setns({ pid: leader(), user: IMAGE_USER });
      assert.equal(await identity(app), '1000 1000 [1000]', 'uid, gid and no supplementary group of root');
      const root = await router.sudo({ via: app });
      assert.equal(await root.call(() => process.getuid?.()), 0);
      const numeric = await router.setns({ pid: leader(), user: '4321' });
      assert.equal(await identity(numeric), '4321 4321 [4321]');
    });

    test("a container's /etc/passwd that links out of the container is not followed on this side", async () => {
      await using router = new Router();
      // A passwd of this machine's, which the link would reach through /proc/PID/root: the container's
      // account would become whatever this file says.
      const lure = join(suite.scratch, 'lure-passwd');
      writeFileSync(lure, `${IMAGE_USER}:x:4242:4242::/:/bin/sh\n`);
      podman.run('hostile');
      podman.podman(['exec', 'hostile', 'ln', '-sf', lure, '/etc/passwd']);
      await assert.rejects(
        router.setns({ container: 'hostile', runtime: 'podman', runtimeArgs: podman.args, user: IMAGE_USER }),
        (error: unknown) => {
          assert.ok(error instanceof UnknownUserError, String(error));
          assert.match(error.message, /user 'app' does not exist in podman container 'hostile' .*a regular file/);
          return true;
        },
      );
    });

    test('the context does not inherit the environment of the process that started it', async () => {
      await using router = new Router();
      process.env.TENDRIL_HOST_SECRET = 'host-only';
      try {
        const context = await router.setns({ pid: leader(), user: IMAGE_USER });
        const env = await context.call(() => ({ ...process.env }));
        assert.equal(env.TENDRIL_HOST_SECRET, undefined, "the host's variables stay on the host");
        assert.equal(await context.call(() => require('node:os').homedir()), `/home/${IMAGE_USER}`);
      } finally {
        delete process.env.TENDRIL_HOST_SECRET;
      }
    });

    test('via an ssh context: nsenter runs on the far side, as root reached with sudo there', async () => {
      await using router = new Router();
      const root = await suite.sshRoot(router);
      const context = await router.setns({ via: root, container: web, runtime: 'podman', runtimeArgs: podman.args });
      await exerciseContext(context, suite.scratch);
    });

    test('failures are typed errors quoting the runtime or nsenter', async () => {
      await using router = new Router();
      await assert.rejects(
        router.setns({ container: 'nosuch', runtime: 'podman', runtimeArgs: podman.args }),
        (error: unknown) => {
          assert.ok(error instanceof ContainerNotFoundError, String(error));
          assert.match(error.message, /no podman container 'nosuch' on .*no such (object|container)/is);
          return true;
        },
      );
      podman.podman(['create', '--name', 'stopped', ...CONTAINER_LIMITS, podman.image, 'sleep', 'infinity']);
      await assert.rejects(
        router.setns({ container: 'stopped', runtime: 'podman', runtimeArgs: podman.args }),
        (error: unknown) =>
          error instanceof ContainerNotRunningError &&
          /podman container 'stopped' on .* is not running/.test(error.message),
      );
      const missing = lxc.name('nosuch');
      await assert.rejects(
        router.setns({ container: missing, runtime: 'lxc', runtimeArgs: ['--lxcpath', lxc.dir] }),
        (error: unknown) => {
          assert.ok(error instanceof ContainerNotFoundError, String(error));
          assert.match(error.message, new RegExp(`no lxc container '${missing}' on .*${missing} doesn't exist`, 's'));
          return true;
        },
      );
      const stopped = lxc.define('stopped');
      await assert.rejects(
        router.setns({ container: stopped, runtime: 'lxc', runtimeArgs: ['--lxcpath', lxc.dir] }),
        (error: unknown) => error instanceof ContainerNotRunningError && /is not running/.test(error.message),
      );
      await assert.rejects(router.setns({ pid: leader(), user: 'nobody-here' }), (error: unknown) => {
        assert.ok(error instanceof UnknownUserError, String(error));
        assert.match(error.message, /user 'nobody-here' does not exist in process \d+/);
        return true;
      });
      // A pid that no process has (pid_max is at most 2^22).
      await assert.rejects(router.setns({ pid: 4_194_000 }), (error: unknown) => {
        assert.ok(error instanceof ContainerNotRunningError, String(error));
        assert.match(error.message, /process 4194000 on .* is gone.*No such file or directory/s);
        return true;
      });
      const nosudo = await router.sudo({ username: suite.testbed.accounts.nosudo.name });
      await assert.rejects(router.setns({ via: nosudo, pid: leader() }), (error: unknown) => {
        assert.ok(error instanceof NotAllowedError, String(error));
        assert.match(error.message, /setns enters namespaces with nsenter, which needs root on .*via a sudo context/);
        return true;
      });
    });
  });

  describe('chroot', () => {
    let tree: string;
    before(() => {
      tree = unpackNodeImage(join(suite.scratch, 'tree'));
    });

    test('a context in the tree answers calls, forwards modules, runs exec and copy, and leaves nothing behind', async () => {
      await using router = new Router();
      const context = await router.chroot({ path: tree });
      assert.equal(context.name.split('@')[0], `chroot:${tree}`);
      const { node, uid } = await exerciseContext(context, suite.scratch);
      assert.match(node, /^v18\./, "the tree's own Node (Debian 12's)");
      assert.equal(uid, 0);
      assert.ok(chrootedIn(tree).length > 0, 'the context runs with the tree as its root');
      await context.shutdown();
      assert.deepEqual(chrootedIn(tree), [], 'no process is left in the tree');
    });

    test("as another user, from the tree's own passwd, then sudo back to root", async () => {
      await using router = new Router();
      const app = await router.chroot({ path: tree, user: IMAGE_USER });
      assert.equal(await identity(app), '1000 1000 [1000]');
      const root = await router.sudo({ via: app });
      assert.equal(await root.call(() => process.getuid?.()), 0);
    });

    test('via an ssh context: chroot runs on the far side, as root reached with sudo there', async () => {
      await using router = new Router();
      const context = await router.chroot({ via: await suite.sshRoot(router), path: tree });
      await exerciseContext(context, suite.scratch);
    });

    test('failures are typed errors quoting chroot', async () => {
      await using router = new Router();
      const missing = join(suite.scratch, 'nosuch');
      await assert.rejects(router.chroot({ path: missing }), (error: unknown) => {
        assert.ok(error instanceof ContainerNotFoundError, String(error));
        assert.match(
          error.message,
          /no directory .*nosuch on .* to chroot into.*cannot change root directory to .*No such file or directory/s,
        );
        return true;
      });
      await assert.rejects(router.chroot({ path: tree, user: 'nobody-here' }), (error: unknown) => {
        assert.ok(error instanceof UnknownUserError, String(error));
        assert.match(error.message, /user 'nobody-here' does not exist in .*\/etc\/passwd.*chroot: invalid user/s);
        return true;
      });
      const empty = join(suite.scratch, 'empty');
      mkdirSync(empty);
      await assert.rejects(router.chroot({ path: empty }), (error: unknown) => {
        assert.ok(error instanceof InterpreterError, String(error));
        assert.match(
          error.message,
          /the tree .*empty on .* has no POSIX shell \(sh\).*failed to run command .sh.: No such file or directory/s,
        );
        return true;
      });
      // Node moved away and back: the tree without Node, as a build root before Node is installed.
      renameSync(join(tree, 'usr/bin/node'), join(tree, 'usr/bin/node.away'));
      try {
        await assert.rejects(router.chroot({ path: tree, shipNode: 'never' }), (error: unknown) => {
          assert.ok(error instanceof InterpreterError, String(error));
          assert.match(error.message, /context 'chroot:[^']+'.*no Node\.js interpreter found .*tried node, nodejs/s);
          // What the shell found the target to be, and what to do.
          assert.match(
            error.message,
            /the target is Linux x86_64, Debian GNU\/Linux 12 \(bookworm\), glibc 2\.\d+: install Node there \(12 or newer\), set nodePath to one, or let tendril bring one/,
          );
          return true;
        });
        // The tree as the shell would see a musl system (no musl userland is at hand here): no
        // glibc to ask (getconf), and musl's loader in /lib.
        renameSync(join(tree, 'usr/bin/getconf'), join(tree, 'usr/bin/getconf.away'));
        writeFileSync(join(tree, 'lib/ld-musl-x86_64.so.1'), '');
        try {
          await assert.rejects(router.chroot({ path: tree }), (error: unknown) => {
            assert.ok(error instanceof InterpreterError, String(error));
            assert.match(
              error.message,
              /the target is Linux x86_64, Debian GNU\/Linux 12 \(bookworm\), musl, and no official Node\.js build exists for musl; install Node with its package manager \(apk add nodejs on Alpine\)/,
            );
            return true;
          });
        } finally {
          rmSync(join(tree, 'lib/ld-musl-x86_64.so.1'));
          renameSync(join(tree, 'usr/bin/getconf.away'), join(tree, 'usr/bin/getconf'));
        }
      } finally {
        renameSync(join(tree, 'usr/bin/node.away'), join(tree, 'usr/bin/node'));
      }
      const nosudo = await router.sudo({ username: suite.testbed.accounts.nosudo.name });
      // The scratch directory is the test's own (mode 0700): the tree is out of that account's reach.
      await assert.rejects(router.chroot({ via: nosudo, path: tree }), (error: unknown) => {
        assert.ok(error instanceof NotAllowedError, String(error));
        assert.match(
          error.message,
          /this account may not reach .*tree on .*cannot change root directory to .*: Permission denied/s,
        );
        return true;
      });
      chmodSync(suite.scratch, 0o711);
      await assert.rejects(router.chroot({ via: nosudo, path: tree }), (error: unknown) => {
        assert.ok(error instanceof NotAllowedError, String(error));
        assert.match(error.message, /chroot needs root on .*Operation not permitted/s);
        return true;
      });
    });
  });
});
