// The container methods started from other contexts, as they are used:
// rootless podman as an account reached with sudo (its own store and
// runtime directory); podman, docker and buildah on the far side of an SSH
// connection and a sudo there (the runtimes' CLIs run in that context,
// which loads tendril:containers on first use), with sudo inside the
// container; and a fleet of 20 podman containers through one SSH
// connection, timed beside 20 `podman exec C node -e 0`.
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { chownSync, existsSync, mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { hostname, tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import {
  BootstrapError,
  ContainerNotFoundError,
  type Context,
  NotAllowedError,
  type PoolTarget,
  Router,
} from 'tendril';
import {
  assertNoContextLeft,
  DockerBed,
  exerciseContext,
  IMAGE_USER,
  PodmanBed,
  SHIPPING_TIMEOUT,
  since,
  startPodmanService,
} from './support/containers.js';
import { forgetRuntimes, SHIPPED, shippedEntry } from './support/runtimes.js';
import { sshLogin, startTestbed, type Testbed } from './support/testbed.js';

/**
 * tendril's own bundles loaded in a context, from its module cache: the
 * layers shipped from dist/bootstrap/ (`connection`, `ssh`, `containers`...).
 */
const tendrilLayers = (context: Context) =>
  context.call(() =>
    Object.keys(require.cache)
      .map((path) => /\/bootstrap\/([\w-]+)\.cjs$/.exec(path)?.[1])
      .filter((name) => name !== undefined),
  );

/** The context's uid inside its user namespace, and the map to the host's uids (`inside outside count`). */
const userNamespace = (context: Context) =>
  context.call(() => ({
    uid: process.getuid?.() ?? -1,
    map: require('node:fs').readFileSync('/proc/self/uid_map', 'utf8').trim().split(/\s+/).join(' '),
  }));

describe('container methods via other contexts', () => {
  let testbed: Testbed;
  let podman: PodmanBed;
  let rootless: PodmanBed;
  let docker: DockerBed;
  let scratch: string;
  const here = hostname();

  before(async () => {
    const start = performance.now();
    testbed = await startTestbed();
    // At once; each is kept as soon as it is up, so that after() stops it when another failed.
    const beds = await Promise.allSettled([
      PodmanBed.starting().then((bed) => (podman = bed)),
      PodmanBed.starting(testbed.accounts.target.name).then((bed) => (rootless = bed)),
      DockerBed.start().then((bed) => (docker = bed)),
    ]);
    for (const bed of beds) if (bed.status === 'rejected') throw bed.reason;
    console.log(`# test beds (sshd, podman root and rootless, dockerd): ${since(start)} ms`);
    scratch = mkdtempSync(join(tmpdir(), 'tendril-via-test-'));
    podman.run('web');
    rootless.run('web', ['--network', 'none']);
    docker.run('web');
  });
  after(async () => {
    const start = performance.now();
    // Each bed is stopped even when another could not be.
    const failures: unknown[] = [];
    for (const stop of [() => podman?.stop(), () => rootless?.stop(), () => docker?.stop(), () => testbed?.stop()]) {
      try {
        await stop();
      } catch (error) {
        failures.push(error);
      }
    }
    if (scratch) rmSync(scratch, { recursive: true, force: true });
    if (failures.length > 0) throw new AggregateError(failures, 'test beds could not all be stopped');
    console.log(`# test beds stopped and removed: ${since(start)} ms`);
  });

  test('rootless podman: an account reached with sudo enters a container of its own store', async (t) => {
    await using router = new Router();
    const account = testbed.accounts.target.name;
    const uid = execFileSync('id', ['-u', account], { encoding: 'utf8' }).trim();
    const as = await router.sudo({ username: account, sudoArgs: rootless.sudoEnv });
    const start = performance.now();
    const web = await router.podman({ container: 'web', podmanArgs: rootless.args, via: as });
    assert.equal(await web.call(() => 6 * 7), 42);
    t.diagnostic(`time to a rootless podman context that answered one call: ${since(start)} ms`);
    assert.equal(web.name, `podman:web@${here}`);
    const { uid: inside } = await exerciseContext(web, scratch);
    assert.equal(inside, 0, 'root in the container');
    const namespace = await userNamespace(web);
    assert.equal(namespace.uid, 0);
    // Then the account's subordinate ids, from 1 up.
    assert.match(
      namespace.map,
      new RegExp(`^0 ${uid} 1 1 \\d+ \\d+$`),
      `the container's root is ${account} (uid ${uid}) on the host: podman ran rootless`,
    );
    const app = await router.sudo({ via: web, username: IMAGE_USER });
    assert.equal(await app.call(() => process.getuid?.()), 1000);
    await app.shutdown();
    await web.shutdown();
    assertNoContextLeft((argv) => rootless.podman(['exec', 'web', ...argv]));
    // Another XDG_RUNTIME_DIR than the container was started with (sudo resets it; a login sets
    // /run/user/UID): podman knows the container, runc does not.
    const elsewhere = join(rootless.dir, 'other-runtime-dir');
    mkdirSync(elsewhere, { mode: 0o700 });
    chownSync(elsewhere, Number(uid), Number(uid));
    const lost = await router.sudo({ username: account, sudoArgs: [`XDG_RUNTIME_DIR=${elsewhere}`] });
    await assert.rejects(
      router.podman({ container: 'web', podmanArgs: rootless.args, via: lost }),
      (error: unknown) => {
        assert.ok(error instanceof BootstrapError, String(error));
        assert.match(
          error.message,
          /podman on \S+ has container 'web' but its runtime \(runc\) does not: rootless podman keeps runc's state under XDG_RUNTIME_DIR/,
        );
        assert.match(error.message, /runc: exec failed: container does not exist/);
        return true;
      },
    );
    // A name the account's store lacks; and root's store, which the account cannot even open.
    await assert.rejects(
      router.podman({ container: 'rootonly', podmanArgs: rootless.args, via: as }),
      (error: unknown) => {
        assert.ok(error instanceof ContainerNotFoundError, String(error));
        assert.match(
          error.message,
          /no container 'rootonly' on \S+ for this account \(podman ps -a lists them; rootless podman sees only its own\)/,
        );
        assert.match(error.message, /no container with name or ID "rootonly" found/);
        return true;
      },
    );
    await assert.rejects(router.podman({ container: 'web', podmanArgs: podman.args, via: as }), (error: unknown) => {
      assert.ok(error instanceof NotAllowedError, String(error));
      assert.match(
        error.message,
        new RegExp(
          `this account \\(${account}\\) may not use the Podman store on \\S+ \\(${podman.dir}/\\w+\\): start the context as the account that owns it`,
        ),
      );
      assert.match(error.message, /permission denied/);
      return true;
    });
  });

  test('podman --remote: a context through the Podman service; its socket refuses other accounts', async (t) => {
    await using router = new Router();
    const service = await startPodmanService(podman);
    t.after(() => service.stop());
    const remote = ['--remote', '--url', service.url];
    const web = await router.podman({ container: 'web', podmanArgs: remote });
    assert.equal(await web.call(() => require('node:fs').existsSync('/etc/debian_version')), true);
    await web.shutdown();
    // The account's runtime directory is the rootless bed's: podman --remote makes one too, in /tmp otherwise.
    const as = await router.sudo({ username: testbed.accounts.target.name, sudoArgs: rootless.sudoEnv });
    await assert.rejects(router.podman({ container: 'web', podmanArgs: remote, via: as }), (error: unknown) => {
      assert.ok(error instanceof NotAllowedError, String(error));
      assert.match(
        error.message,
        new RegExp(
          `this account \\(${testbed.accounts.target.name}\\) may not use the Podman socket on \\S+ at ${service.url}: give it access`,
        ),
      );
      assert.match(error.message, /connect: permission denied/);
      return true;
    });
    await assert.rejects(
      router.podman({ container: 'web', podmanArgs: ['--remote', '--url', 'unix:///nonexistent/podman.sock'] }),
      (error: unknown) => {
        assert.ok(error instanceof BootstrapError && error.constructor === BootstrapError, String(error));
        assert.match(
          error.message,
          /no Podman service answers on \S+ at unix:\/\/\/nonexistent\/podman\.sock: start it/,
        );
        assert.match(error.message, /Cannot connect to Podman/);
        return true;
      },
    );
  });

  test('over ssh and sudo: podman, docker and buildah run on the far side, which loads tendril:containers on first use', async (t) => {
    await using router = new Router();
    const docs = testbed.accounts.docs;
    const ssh = await router.ssh(sshLogin(testbed, docs));
    const root = await router.sudo({ via: ssh, password: docs.password });
    assert.equal(await root.call(() => process.getuid?.()), 0);
    assert.deepEqual(await tendrilLayers(root), [], 'no layer before it starts a child');
    const before = await root.moduleStats();

    const start = performance.now();
    const web = await router.podman({ container: 'web', user: IMAGE_USER, podmanArgs: podman.args, via: root });
    assert.equal(await web.call(() => 6 * 7), 42);
    t.diagnostic(`time to a podman context over ssh and sudo that answered one call: ${since(start)} ms`);
    assert.equal(web.name, `podman:web(app)@${here}`);
    assert.deepEqual(await tendrilLayers(root), ['connection', 'containers'], 'loaded by the first container method');
    const loaded = await root.moduleStats();
    assert.equal(
      loaded.filesReceived - before.filesReceived,
      2,
      'two files: the connection layer and the containers bundle',
    );
    const dockerWeb = await router.docker({ container: 'web', dockerArgs: docker.args, via: root });
    assert.equal(dockerWeb.name, `docker:web@${here}`);
    execFileSync('buildah', [...podman.buildahArgs, 'from', '--name', 'work', podman.image], { stdio: 'ignore' });
    const work = await router.buildah({ container: 'work', buildahArgs: podman.buildahArgs, via: root });
    assert.equal(work.name, `buildah:work@${here}`);
    assert.equal((await root.moduleStats()).filesReceived, loaded.filesReceived, 'the bundles are loaded once');

    assert.equal((await exerciseContext(web, scratch)).uid, 1000);
    await exerciseContext(dockerWeb, scratch);
    await exerciseContext(work, scratch);
    // sudo inside the container, from its app account.
    const inside = await router.sudo({ via: web });
    assert.equal(await inside.call(() => process.getuid?.()), 0);
    assert.equal(inside.name, `sudo:root@${await web.call(() => require('node:os').hostname())}`);

    // A failure on the far side is its typed error here, with the tool's words.
    await assert.rejects(
      router.docker({ container: 'nosuch', dockerArgs: docker.args, via: root }),
      (error: unknown) => {
        assert.ok(error instanceof ContainerNotFoundError, String(error));
        assert.match(
          error.message,
          /no container 'nosuch' on \S+ \(docker ps -a lists them\).*No such container: nosuch/s,
        );
        return true;
      },
    );
    for (const context of [inside, web, dockerWeb, work]) await context.shutdown();
    assertNoContextLeft(
      (argv) => podman.podman(['exec', 'web', ...argv]),
      'no process of the contexts is left in the container',
    );
  });

  test('containers without Node, over ssh and sudo: Node crosses the ssh link once, and reaches each container from the far side', {
    timeout: SHIPPING_TIMEOUT,
  }, async () => {
    podman.run('bare', [], podman.bareImage());
    docker.run('bare', [], docker.bareImage());
    // Each context on the way keeps the package in its account's cache on this machine: the ssh
    // account (which the master sends it to: the network hop) and root (its HOME may still be the ssh
    // account's: then a tendril-0 directory). That of the runtime the suite's store sends is the test's
    // own: removed from each before (so the master must send it) and after.
    const caches = [
      '/root/.cache/tendril/node',
      ...['/tmp', '/var/tmp', '/dev/shm'].map((dir) => `${dir}/tendril-0/node`),
    ];
    const forget = (entry: string) => {
      for (const cache of caches) rmSync(join(cache, entry), { recursive: true, force: true });
    };
    const before = shippedEntry();
    if (before) forget(before);
    forgetRuntimes(testbed.accounts.docs.name);
    await using router = new Router({ nodeRuntime: SHIPPED });
    const docs = testbed.accounts.docs;
    const ssh = await router.ssh(sshLogin(testbed, docs));
    const root = await router.sudo({ via: ssh, password: docs.password });
    const inPodman = await router.podman({
      container: 'bare',
      podmanArgs: podman.args,
      via: root,
      connectTimeout: SHIPPING_TIMEOUT,
    });
    const execPath = await inPodman.call(() => process.execPath);
    const entry = /^\/root\/\.cache\/tendril\/node\/([^/]+)\/node$/.exec(execPath)?.[1];
    assert.ok(entry, `a shipped Node in the container: ${execPath}`);
    try {
      const once = router.runtimeStats();
      assert.equal(once.shipped, 1, JSON.stringify(once));
      assert.deepEqual(Object.keys(once.byContext), [String(ssh.id)], 'the master sent it over ssh alone');
      assert.ok(
        caches.some((cache) => existsSync(join(cache, entry, 'node.tgz'))),
        'root kept the package, from the ssh context',
      );
      const inDocker = await router.docker({ container: 'bare', dockerArgs: docker.args, via: root });
      assert.equal(await inDocker.call(() => process.execPath), execPath);
      assert.deepEqual(
        router.runtimeStats(),
        once,
        'the second container got it from the far side: nothing more crossed',
      );
      await exerciseContext(inPodman, scratch);
      await exerciseContext(inDocker, scratch);
      for (const context of [inPodman, inDocker]) await context.shutdown();
    } finally {
      forget(entry);
      forgetRuntimes(testbed.accounts.docs.name);
    }
    assertNoContextLeft((argv) => podman.podman(['exec', 'bare', ...argv]));
    assertNoContextLeft((argv) => docker.docker(['exec', 'bare', ...argv]));
  });

  test('a fleet of 20 podman containers through one ssh connection', async (t) => {
    const count = 20;
    const names = Array.from({ length: count }, (_, i) => `fleet-${i}`);
    const created = performance.now();
    await podman.runAll(names, ['--network', 'none']);
    t.diagnostic(`${count} containers started in ${since(created)} ms`);
    const floorStart = performance.now();
    for (const name of names) podman.podman(['exec', name, 'node', '-e', '0']);
    const floor = since(floorStart);

    await using router = new Router();
    const docs = testbed.accounts.docs;
    const ssh = await router.ssh(sshLogin(testbed, docs));
    const root = await router.sudo({ via: ssh, password: docs.password });
    const targets: PoolTarget[] = names.map((container) => ({
      method: 'podman',
      container,
      podmanArgs: podman.args,
      via: root,
    }));
    const whereAmI = (context: Context) => context.call(() => require('node:os').hostname());
    const first = performance.now();
    const summary = await router.fleet(targets, whereAmI, { concurrency: count }).summary();
    const toAll = since(first);
    assert.equal(summary.succeeded.length, count, summary.format());
    const again = performance.now();
    const second = await router.fleet(targets, whereAmI, { concurrency: count }).summary();
    const oneCallEach = since(again);
    assert.equal(second.succeeded.length, count, second.format());
    // Each container has a hostname of its own: the calls ran in 20 different containers.
    assert.equal(new Set(second.succeeded.map((success) => success.value)).size, count);
    const pool = router.pool.stats();
    assert.deepEqual(
      { contexts: pool.contexts, hits: pool.hits, misses: pool.misses },
      { contexts: count, hits: count, misses: count },
      'one pooled context per container, started by the first fleet and used again by the second',
    );
    t.diagnostic(
      `${count} podman contexts through one ssh connection, each answering one call: ${toAll} ms; one more call in each: ${oneCallEach} ms; ${count} sequential podman exec C node -e 0: ${floor} ms`,
    );
    console.log(summary.format().replace(/^/gm, '# '));
    assert.equal(
      testbed.sshdLog().match(new RegExp(`Accepted publickey for ${docs.name}`, 'g'))?.length,
      3,
      'one ssh connection per test that logs in as that account (this one and the two before it)',
    );
  });
});
