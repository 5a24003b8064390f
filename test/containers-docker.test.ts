// The docker method against a real Docker engine: a dockerd (and its
// containerd) of the test's own, Debian's 20.10, driven by each docker
// client on this machine (Debian's 20.10 in /usr/bin, and whichever comes
// first on PATH: Docker's own 28 in /usr/local/bin here, which talks to the
// older daemon at its API version). Contexts in running containers and in
// throwaway containers of an image; sudo and su inside; each failure as its
// typed error quoting docker's own message.
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { chmodSync, mkdtempSync, readlinkSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import {
  BootstrapError,
  ContainerNotFoundError,
  ContainerNotRunningError,
  InterpreterError,
  NotAllowedError,
  Router,
  ToolNotFoundError,
  UnknownUserError,
} from 'tendril';
import {
  assertNoContextLeft,
  DockerBed,
  exerciseContext,
  exerciseShippedContainer,
  IMAGE_USER,
  ROOT_PASSWORD,
  SHIPPING_TIMEOUT,
  since,
  tendrilProcessesIn,
} from './support/containers.js';

/** The client's version, as `docker --version` prints it (`Docker version 28.2.2, build e6534b4`). */
function clientVersion(path: string): string {
  return execFileSync(path, ['--version'], { encoding: 'utf8' }).trim();
}

/** The docker clients to drive the daemon with: PATH's first, and Debian's own. */
const CLIENTS: { label: string; dockerPath: string | undefined }[] = [
  { label: `docker on PATH (${clientVersion('docker')})`, dockerPath: undefined },
  { label: `Debian's /usr/bin/docker (${clientVersion('/usr/bin/docker')})`, dockerPath: '/usr/bin/docker' },
];

describe('docker', () => {
  let bed: DockerBed;
  let scratch: string;
  before(async () => {
    const start = performance.now();
    bed = await DockerBed.start();
    console.log(`# docker test bed (containerd, dockerd, image imported): ${since(start)} ms`);
    scratch = mkdtempSync(join(tmpdir(), 'tendril-docker-test-'));
    // The socket's own mode (root:docker 0660) decides who may use it, as on a host.
    chmodSync(bed.dir, 0o711);
    bed.run('web');
    bed.docker(['create', '--network', 'none', '--name', 'stopped', bed.image, 'sleep', 'infinity']);
    bed.run('paused');
    bed.docker(['pause', 'paused']);
  });
  after(async () => {
    await bed?.stop();
    if (scratch) rmSync(scratch, { recursive: true, force: true });
  });

  const inWeb = (argv: string[]) => bed.docker(['exec', 'web', ...argv]);

  for (const { label, dockerPath } of CLIENTS) {
    const client = dockerPath === undefined ? {} : { dockerPath };

    test(`${label}: a context in a running container answers calls, forwards modules, runs exec and copy, and leaves nothing behind`, async (t) => {
      await using router = new Router();
      const floorStart = performance.now();
      execFileSync(dockerPath ?? 'docker', [...bed.args, 'exec', 'web', 'node', '-e', '0']);
      const floor = since(floorStart);
      const start = performance.now();
      const context = await router.docker({ container: 'web', dockerArgs: bed.args, ...client });
      assert.equal(await context.call(() => 6 * 7), 42);
      t.diagnostic(
        `time to a context that answered one call: ${since(start)} ms (docker exec web node -e 0: ${floor} ms)`,
      );
      assert.match(context.name, /^docker:web@/);
      const { node, uid } = await exerciseContext(context, scratch);
      assert.match(node, /^v18\./, "the container's own Node (Debian 12's), not the master's");
      assert.equal(uid, 0);
      assert.ok(
        tendrilProcessesIn(inWeb).length > 0,
        'the context runs in the container (seen there before it shuts down)',
      );
      await context.shutdown();
      assertNoContextLeft(inWeb);
    });

    test(`${label}: failures are typed errors quoting docker`, async () => {
      await using router = new Router();
      const docker = (options: Parameters<Router['docker']>[0]) =>
        router.docker({ dockerArgs: bed.args, ...client, ...options });
      await assert.rejects(docker({ container: 'nosuch' }), (error: unknown) => {
        assert.ok(error instanceof ContainerNotFoundError, String(error));
        assert.match(
          error.message,
          /^could not start context 'docker:nosuch@[^']+': no container 'nosuch' on \S+ \(docker ps -a lists them\).*No such container: nosuch/s,
        );
        return true;
      });
      await assert.rejects(docker({ container: 'stopped' }), (error: unknown) => {
        assert.ok(error instanceof ContainerNotRunningError, String(error));
        assert.match(error.message, /container 'stopped' on \S+ is not running: start it \(docker start stopped\)/);
        assert.match(error.message, /Container [0-9a-f]{64} is not running/, "docker's own words");
        return true;
      });
      await assert.rejects(docker({ container: 'paused' }), (error: unknown) => {
        assert.ok(error instanceof ContainerNotRunningError, String(error));
        assert.match(error.message, /container 'paused' on \S+ is paused: unpause it \(docker unpause paused\)/);
        assert.match(error.message, /Container paused is paused, unpause the container before exec/);
        return true;
      });
      await assert.rejects(docker({ container: 'web', user: 'nobody-here' }), (error: unknown) => {
        assert.ok(error instanceof UnknownUserError, String(error));
        assert.match(error.message, /user 'nobody-here' does not exist in container 'web'/);
        assert.match(error.message, /unable to find user nobody-here: no matching entries in passwd file/);
        return true;
      });
      await assert.rejects(
        docker({ container: 'web', dockerArgs: ['--host', 'unix:///nonexistent/docker.sock'] }),
        (error: unknown) => {
          assert.ok(error instanceof BootstrapError, String(error));
          assert.match(error.message, /no Docker daemon answers on \S+ at unix:\/\/\/nonexistent\/docker\.sock/);
          assert.match(error.message, /Cannot connect to the Docker daemon at unix:\/\/\/nonexistent\/docker\.sock/);
          return true;
        },
      );
      const image = 'tendril-test/no-such-image:latest';
      await assert.rejects(docker({ image }), (error: unknown) => {
        assert.ok(error instanceof ContainerNotFoundError, String(error));
        assert.match(error.message, /image 'tendril-test\/no-such-image:latest' is not on \S+ and could not be pulled/);
        assert.match(error.message, /Unable to find image 'tendril-test\/no-such-image:latest' locally/);
        return true;
      });
      await assert.rejects(docker({ image, runArgs: ['--pull', 'never'] }), (error: unknown) => {
        assert.ok(error instanceof ContainerNotFoundError, String(error));
        assert.match(error.message, /No such image: tendril-test\/no-such-image:latest/);
        return true;
      });
    });
  }

  test('the docker client missing is a ToolNotFoundError naming the package and the option', async () => {
    await using router = new Router();
    await assert.rejects(
      router.docker({ container: 'web', dockerPath: '/nonexistent/docker' }),
      (error: unknown) =>
        error instanceof ToolNotFoundError &&
        error.tool === '/nonexistent/docker' &&
        /install the Docker engine's client \(Debian: docker\.io; Docker's own: docker-ce-cli\), or give its path with the dockerPath option/.test(
          error.message,
        ),
    );
  });

  test('an account that may not use the socket gets a NotAllowedError', async () => {
    await using router = new Router();
    const nobody = await router.sudo({ username: 'nobody' });
    await assert.rejects(router.docker({ container: 'web', dockerArgs: bed.args, via: nobody }), (error: unknown) => {
      assert.ok(error instanceof NotAllowedError, String(error));
      assert.match(
        error.message,
        /this account \(nobody\) may not use the Docker daemon on \S+ at unix:\/\/\S+\/docker\.sock: add it to the docker group/,
      );
      assert.match(error.message, /permission denied while trying to connect to the Docker daemon socket/);
      return true;
    });
  });

  test('as another user, then sudo and su inside the container', async () => {
    await using router = new Router();
    const app = await router.docker({ container: 'web', user: IMAGE_USER, dockerArgs: bed.args });
    assert.match(app.name, /^docker:web\(app\)@/);
    assert.equal(await app.call(() => process.getuid?.()), 1000);
    const root = await router.sudo({ via: app });
    assert.equal(await root.call(() => process.getuid?.()), 0);
    const su = await router.su({ via: app, password: ROOT_PASSWORD });
    assert.equal((await su.exec('id', ['-un'])).stdout, 'root');
  });

  test('with image, a throwaway container lives as long as the context', async (t) => {
    await using router = new Router();
    const before = bed.containers();
    const start = performance.now();
    const context = await router.docker({ image: bed.image, runArgs: ['--network', 'none'], dockerArgs: bed.args });
    assert.equal(await context.call(() => 6 * 7), 42);
    t.diagnostic(`time to a context in a new container that answered one call: ${since(start)} ms`);
    assert.match(context.name, /^docker:image=tendril-test-node:latest@/);
    const during = bed.containers().filter((name) => !before.includes(name));
    assert.equal(during.length, 1, 'one container of the image, while the context lives');
    await exerciseContext(context, scratch);
    await context.shutdown();
    // --rm: the engine removes it once the context's process has exited.
    const deadline = Date.now() + 10_000;
    while (bed.containers().length > before.length) {
      assert.ok(Date.now() < deadline, `the throwaway container ${during[0]} was not removed`);
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
  });

  test("setns finds the container's leader with docker inspect (runtimeArgs: this daemon) and enters its namespaces", async () => {
    await using router = new Router();
    const leader = bed.docker(['inspect', '--format', '{{.State.Pid}}', 'web']).trim();
    const context = await router.setns({
      container: 'web',
      runtime: 'docker',
      runtimeArgs: bed.args,
      user: IMAGE_USER,
    });
    assert.match(context.name, /^setns:docker\/web\(app\)@/);
    assert.deepEqual(
      await context.call(() => [process.getuid?.(), require('node:fs').readlinkSync('/proc/self/ns/mnt')]),
      [1000, readlinkSync(`/proc/${leader}/ns/mnt`)],
    );
    await assert.rejects(
      router.setns({ container: 'nosuch', runtime: 'docker', runtimeArgs: bed.args }),
      (error: unknown) =>
        error instanceof ContainerNotFoundError && /No such (object|container): nosuch/i.test(error.message),
    );
  });

  test('a container of an image without Node gets one shipped through the same stream, once', {
    timeout: SHIPPING_TIMEOUT,
  }, async () => {
    bed.run('bare', [], bed.bareImage());
    await exerciseShippedContainer(
      (router) => router.docker({ container: 'bare', dockerArgs: bed.args, connectTimeout: SHIPPING_TIMEOUT }),
      (argv) => bed.docker(['exec', 'bare', ...argv]),
      scratch,
    );
  });

  test("with shipNode 'never', a container without Node is an InterpreterError; one without sh says so", async () => {
    await using router = new Router();
    bed.run('nonode');
    bed.docker(['exec', 'nonode', 'rm', '/usr/bin/node', '/usr/bin/nodejs']);
    await assert.rejects(
      router.docker({ container: 'nonode', dockerArgs: bed.args, shipNode: 'never' }),
      (error: unknown) => {
        assert.ok(error instanceof InterpreterError, String(error));
        assert.match(error.message, /context 'docker:nonode@[^']+'/);
        assert.match(error.message, /no Node\.js interpreter found .*tried node, nodejs/s);
        return true;
      },
    );
    bed.run('noshell');
    bed.docker(['exec', 'noshell', 'rm', '/usr/bin/sh', '/usr/bin/dash']);
    await assert.rejects(router.docker({ container: 'noshell', dockerArgs: bed.args }), (error: unknown) => {
      assert.ok(error instanceof InterpreterError, String(error));
      assert.match(error.message, /container 'noshell' on \S+ has no POSIX shell \(sh\)/);
      assert.match(error.message, /exec: "sh": executable file not found in \$PATH/);
      return true;
    });
  });
});
