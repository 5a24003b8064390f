// The podman and buildah methods against real Podman (root, runc) with a
// private store: contexts in running containers, in throwaway containers of
// an image, in buildah working containers; become methods inside; each
// failure as its typed error.
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import {
  ConnectTimeoutError,
  ContainerNotFoundError,
  ContainerNotRunningError,
  InterpreterError,
  Router,
  ToolNotFoundError,
  UnknownUserError,
} from 'tendril';
import {
  assertNoContextLeft,
  CONTAINER_LIMITS,
  exerciseContext,
  exerciseShippedContainer,
  IMAGE_USER,
  PodmanBed,
  ROOT_PASSWORD,
  SHIPPING_TIMEOUT,
} from './support/containers.js';

describe('podman', () => {
  let bed: PodmanBed;
  let scratch: string;
  before(() => {
    bed = PodmanBed.start();
    scratch = mkdtempSync(join(tmpdir(), 'tendril-podman-test-'));
    bed.run('web');
  });
  after(() => {
    bed?.stop();
    rmSync(scratch, { recursive: true, force: true });
  });

  test('a context in a running container answers calls, forwards modules, runs exec and copy, and leaves nothing behind', async () => {
    await using router = new Router();
    const context = await router.podman({ container: 'web', podmanArgs: bed.args });
    assert.match(context.name, /^podman:web@/);
    const { node } = await exerciseContext(context, scratch);
    assert.match(node, /^v18\./, "the container's own Node (Debian 12's), not the master's");
    await context.shutdown();
    assertNoContextLeft((argv) => bed.podman(['exec', 'web', ...argv]));
  });

  test('a job in a container outlives its context and is re-attached from a new one, as the same user', async () => {
    await using router = new Router();
    const first = await router.podman({ container: 'web', user: IMAGE_USER, podmanArgs: bed.args });
    // The job runs until the test releases it (a file it waits for), however long the contexts take to come and go.
    const release = `/tmp/tendril-release-${process.pid}-${Date.now()}`;
    const job = await first.startJob(
      { timeout: 30_000, name: 'in-container' },
      async (path: string) => {
        while (!require('node:fs').existsSync(path)) await new Promise((resolve) => setTimeout(resolve, 50));
        console.log('done in', require('node:os').hostname());
        return process.getuid?.();
      },
      release,
    );
    await first.shutdown();
    const second = await router.podman({ container: 'web', user: IMAGE_USER, podmanArgs: bed.args });
    const again = second.job(job.id);
    assert.equal((await again.status()).state, 'running', 'it outlived the context that started it');
    await second.call((path: string) => require('node:fs').writeFileSync(path, ''), release);
    assert.equal(await again.result(), 1000);
    const lines = [];
    for await (const { line } of again.output()) lines.push(line);
    assert.match(lines.join('\n'), /^done in /);
    // Another account's jobs are not this one's.
    const root = await router.podman({ container: 'web', podmanArgs: bed.args });
    assert.ok(!(await root.jobs()).some((status) => status.id === job.id));
    await assert.rejects(root.job(job.id).status(), { code: 'ERR_TENDRIL_JOB_NOT_FOUND' });
    await again.remove();
  });

  test('as another user, then sudo and su inside the container', async () => {
    await using router = new Router();
    const app = await router.podman({ container: 'web', user: IMAGE_USER, podmanArgs: bed.args });
    assert.equal(await app.call(() => process.getuid?.()), 1000);
    const root = await router.sudo({ via: app });
    assert.equal(await root.call(() => process.getuid?.()), 0);
    const su = await router.su({ via: app, password: ROOT_PASSWORD });
    assert.equal((await su.exec('id', ['-un'])).stdout, 'root');
  });

  test('with image, a throwaway container lives as long as the context', async () => {
    await using router = new Router();
    const before = bed.podman(['ps', '--all', '--quiet']).split('\n').filter(Boolean).length;
    const context = await router.podman({ image: bed.image, runArgs: CONTAINER_LIMITS, podmanArgs: bed.args });
    assert.match(context.name, /^podman:image=localhost\/tendril-test-node:latest@/);
    assert.equal(await context.call(() => 6 * 7), 42);
    assert.equal(bed.podman(['ps', '--all', '--quiet']).split('\n').filter(Boolean).length, before + 1);
    await context.shutdown();
    // --rm: the engine removes it once the context's process has exited.
    const deadline = Date.now() + 10_000;
    while (bed.podman(['ps', '--all', '--quiet']).split('\n').filter(Boolean).length > before) {
      assert.ok(Date.now() < deadline, 'the throwaway container was not removed');
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
  });

  test('failures are typed errors quoting podman', async () => {
    await using router = new Router();
    await assert.rejects(router.podman({ container: 'nosuch', podmanArgs: bed.args }), (error: unknown) => {
      assert.ok(error instanceof ContainerNotFoundError, String(error));
      assert.match(error.message, /no container 'nosuch' on .*: no container with name or ID "nosuch" found/s);
      return true;
    });
    bed.podman(['create', '--name', 'stopped', ...CONTAINER_LIMITS, bed.image, 'sleep', 'infinity']);
    await assert.rejects(
      router.podman({ container: 'stopped', podmanArgs: bed.args }),
      (error: unknown) => error instanceof ContainerNotRunningError && /is not running/.test(error.message),
    );
    await assert.rejects(
      router.podman({ container: 'web', user: 'nobody-here', podmanArgs: bed.args }),
      (error: unknown) => error instanceof UnknownUserError && /user 'nobody-here' does not exist/.test(error.message),
    );
    await assert.rejects(
      router.podman({ container: 'web', podmanPath: '/nonexistent/podman' }),
      (error: unknown) =>
        error instanceof ToolNotFoundError &&
        error.tool === '/nonexistent/podman' &&
        /install the podman package, or give its path with the podmanPath option/.test(error.message),
    );
  });

  test("with shipNode 'never', a container without Node is an InterpreterError naming the container and what was tried", async () => {
    await using router = new Router();
    bed.run('nonode');
    bed.podman(['exec', 'nonode', 'rm', '/usr/bin/node', '/usr/bin/nodejs']);
    await assert.rejects(
      router.podman({ container: 'nonode', podmanArgs: bed.args, shipNode: 'never' }),
      (error: unknown) => {
        assert.ok(error instanceof InterpreterError, String(error));
        assert.match(error.message, /context 'podman:nonode@[^']+'/);
        assert.match(error.message, /no Node\.js interpreter found .*tried node, nodejs/s);
        return true;
      },
    );
  });

  test('a container of an image without Node gets one shipped through the same stream, once', {
    timeout: SHIPPING_TIMEOUT,
  }, async () => {
    bed.run('bare', [], bed.bareImage());
    await exerciseShippedContainer(
      (router) => router.podman({ container: 'bare', podmanArgs: bed.args, connectTimeout: SHIPPING_TIMEOUT }),
      (argv) => bed.podman(['exec', 'bare', ...argv]),
      scratch,
    );
  });

  test("nodePath finds a Node off the container's PATH; connectTimeout gives up on one that never answers", async () => {
    await using router = new Router();
    bed.run('elsewhere');
    bed.podman([
      'exec',
      'elsewhere',
      'sh',
      '-c',
      'mkdir -p /opt/n && mv /usr/bin/node /opt/n/node && rm /usr/bin/nodejs',
    ]);
    await assert.rejects(
      router.podman({ container: 'elsewhere', podmanArgs: bed.args, shipNode: 'never' }),
      InterpreterError,
    );
    const found = await router.podman({ container: 'elsewhere', podmanArgs: bed.args, nodePath: '/opt/n/node' });
    assert.equal(await found.call(() => process.execPath), '/opt/n/node');
    await assert.rejects(
      router.podman({ container: 'elsewhere', podmanArgs: bed.args, nodePath: '/opt/nowhere/node' }),
      (error: unknown) => error instanceof InterpreterError && /\/opt\/nowhere\/node/.test(error.message),
    );
    // A "Node" that hangs: the start is given up at connectTimeout. (What hangs stays in the container,
    // as podman exec's session outlives its killed client: docs/connection-methods.md says so.)
    bed.podman([
      'exec',
      'elsewhere',
      'sh',
      '-c',
      'printf "#!/bin/sh\\nexec sleep 600\\n" > /opt/n/hang && chmod +x /opt/n/hang',
    ]);
    await assert.rejects(
      router.podman({ container: 'elsewhere', podmanArgs: bed.args, nodePath: '/opt/n/hang', connectTimeout: 1500 }),
      (error: unknown) =>
        error instanceof ConnectTimeoutError && /podman:elsewhere@[^']+'.*1500 ms/s.test(error.message),
    );
  });

  test('buildah: a context in a working container, whose changes a commit keeps', async () => {
    await using router = new Router();
    execFileSync('buildah', [...bed.buildahArgs, 'from', '--name', 'work', bed.image], { stdio: 'ignore' });
    const context = await router.buildah({ container: 'work', buildahArgs: bed.buildahArgs });
    assert.match(context.name, /^buildah:work@/);
    await exerciseContext(context, scratch);
    await context.call(() => require('node:fs').writeFileSync('/etc/built-by-tendril', 'yes'));
    // As the image's account, then sudo and su back to root inside the working container.
    const app = await router.buildah({ container: 'work', user: IMAGE_USER, buildahArgs: bed.buildahArgs });
    assert.match(app.name, /^buildah:work\(app\)@/);
    assert.equal(await app.call(() => process.getuid?.()), 1000);
    assert.equal(await (await router.sudo({ via: app })).call(() => process.getuid?.()), 0);
    assert.equal((await (await router.su({ via: app, password: ROOT_PASSWORD })).exec('id', ['-un'])).stdout, 'root');
    await app.shutdown();
    await context.shutdown();
    execFileSync('buildah', [...bed.buildahArgs, 'commit', '--quiet', 'work', 'localhost/built:latest'], {
      stdio: 'ignore',
    });
    assert.equal(
      bed.podman(['run', '--rm', ...CONTAINER_LIMITS, 'localhost/built:latest', 'cat', '/etc/built-by-tendril']),
      'yes',
    );
    await assert.rejects(
      router.buildah({ container: 'nosuch', buildahArgs: bed.buildahArgs }),
      (error: unknown) => error instanceof ContainerNotFoundError && /container not known/.test(error.message),
    );
  });
});
