// The kubectl method. No Kubernetes cluster can run on the test machine,
// so kubectl is played by a mock (test/fixtures/kubectl-mock.ts), a real
// executable given as kubectlPath: it parses kubectl's flags, reads the
// kubeconfig the test writes (its cluster describes the pods), runs
// `podman exec -i` on the container of a private Podman store that stands
// for the pod's container, and prints kubectl's own complaints with its
// exit codes. The real kubectl on this machine checks that the mock says
// what kubectl says where no API server is needed.
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { chmodSync, existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { hostname, tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { fileURLToPath } from 'node:url';
import {
  BootstrapError,
  ContainerNotFoundError,
  ContainerNotRunningError,
  InterpreterError,
  type KubectlOptions,
  NotAllowedError,
  Router,
  ToolNotFoundError,
} from 'tendril';
import { assertNoContextLeft, CONTAINER_LIMITS, exerciseContext, IMAGE_USER, PodmanBed } from './support/containers.js';
import { sshLogin, startTestbed } from './support/testbed.js';

const MOCK = fileURLToPath(new URL('./fixtures/kubectl-mock.js', import.meta.url));
/** The real kubectl (google-cloud-cli's), for what it says without a cluster. */
const REAL_KUBECTL = '/usr/bin/kubectl';

describe('kubectl (a mock kubectl over a private Podman store: no cluster runs here)', () => {
  let bed: PodmanBed;
  let scratch: string;
  let kubectlPath: string;
  let kubeconfig: string;
  let calls: string;
  /** What every test passes: the mock, and the kubeconfig that describes its cluster. */
  let mock: Pick<KubectlOptions, 'kubectlPath' | 'kubeconfig'>;

  before(() => {
    bed = PodmanBed.start();
    scratch = mkdtempSync(join(tmpdir(), 'tendril-kubectl-test-'));
    // The containers that stand for the pods' containers; each knows which one it is.
    for (const name of ['kube-web', 'kube-side', 'kube-nosh', 'kube-nonode']) {
      bed.run(name);
      bed.podman(['exec', name, 'sh', '-c', `echo ${name} > /etc/pod-container`]);
    }
    bed.podman(['exec', 'kube-nosh', 'rm', '-f', '/bin/sh', '/usr/bin/sh', '/bin/dash', '/usr/bin/dash']);
    bed.podman(['exec', 'kube-nonode', 'rm', '/usr/bin/node', '/usr/bin/nodejs']);
    bed.podman(['create', '--name', 'kube-crashed', ...CONTAINER_LIMITS, bed.image, 'sleep', 'infinity']);
    calls = join(scratch, 'kubectl-calls.jsonl');
    const app = (podman: string) => [{ name: 'app', podman }];
    const cluster = {
      podmanArgs: bed.args,
      log: calls,
      forbidden: ['viewer'],
      pods: {
        'default/web': {
          phase: 'Running',
          nodeName: 'node1',
          containers: [
            { name: 'web', podman: 'kube-web' },
            { name: 'side', podman: 'kube-side' },
          ],
        },
        'shop/api': { phase: 'Running', nodeName: 'node1', containers: app('kube-side') },
        'default/crashing': { phase: 'Running', nodeName: 'node1', containers: app('kube-crashed') },
        'default/unscheduled': { phase: 'Pending', nodeName: '', containers: app('kube-web') },
        'default/finished': { phase: 'Succeeded', nodeName: 'node1', containers: app('kube-web') },
        'default/noshell': { phase: 'Running', nodeName: 'node1', containers: app('kube-nosh') },
        'default/nonode': { phase: 'Running', nodeName: 'node1', containers: app('kube-nonode') },
      },
    };
    // JSON is YAML: real kubectl reads this kubeconfig too.
    kubeconfig = join(scratch, 'kubeconfig');
    writeFileSync(
      kubeconfig,
      JSON.stringify({
        apiVersion: 'v1',
        kind: 'Config',
        'current-context': 'dev',
        clusters: [
          {
            name: 'mock',
            cluster: {
              server: 'https://127.0.0.1:6443',
              extensions: [{ name: 'tendril-test-cluster', extension: cluster }],
            },
          },
          // Nothing listens on port 1 of loopback: a cluster that is down.
          { name: 'down', cluster: { server: 'https://127.0.0.1:1' } },
        ],
        contexts: [
          { name: 'dev', context: { cluster: 'mock', user: 'admin', namespace: 'default' } },
          { name: 'shop', context: { cluster: 'mock', user: 'admin', namespace: 'shop' } },
          { name: 'readonly', context: { cluster: 'mock', user: 'viewer', namespace: 'default' } },
          { name: 'offline', context: { cluster: 'down', user: 'admin' } },
        ],
        users: [
          { name: 'admin', user: { token: 'admin-token' } },
          { name: 'viewer', user: { token: 'viewer-token' } },
        ],
      }),
    );
    kubectlPath = join(scratch, 'kubectl');
    writeFileSync(kubectlPath, `#!/bin/sh\nexec '${process.execPath}' '${MOCK}' "$@"\n`);
    chmodSync(kubectlPath, 0o755);
    mock = { kubectlPath, kubeconfig };
  });
  after(() => {
    bed?.stop();
    rmSync(scratch, { recursive: true, force: true });
  });

  /** The argv of the mock's last invocation, and the process that ran it. */
  const lastCall = (): { argv: string[]; ppid: number } =>
    JSON.parse(readFileSync(calls, 'utf8').trim().split('\n').at(-1) as string);

  test('a context in a pod: calls, module forwarding, exec, copy, sudo inside, and nothing left behind', async () => {
    await using router = new Router();
    const context = await router.kubectl({ pod: 'web', container: 'web', namespace: 'default', ...mock });
    assert.equal(context.name, `kubectl:default/web/web@${hostname()}`);
    const { node } = await exerciseContext(context, scratch);
    assert.match(node, /^v18\./, "the container's own Node (Debian 12's), not the master's");
    assert.equal(
      await context.call(() => require('node:fs').readFileSync('/etc/pod-container', 'utf8').trim()),
      'kube-web',
    );
    const app = await router.sudo({ via: context, username: IMAGE_USER });
    assert.equal(await app.call(() => process.getuid?.()), 1000);
    await context.shutdown();
    assertNoContextLeft((argv) => bed.podman(['exec', 'kube-web', ...argv]));
  });

  test('container selection, the namespace and the kubeconfig context; kubectlArgs reach kubectl before exec', async () => {
    await using router = new Router();
    // No container: kubectl's default (the first), and it says which on stderr.
    const first = await router.kubectl({ pod: 'web', ...mock });
    assert.equal(first.name, `kubectl:web@${hostname()}`);
    assert.equal(
      await first.call(() => require('node:fs').readFileSync('/etc/pod-container', 'utf8').trim()),
      'kube-web',
    );
    const side = await router.kubectl({ pod: 'web', container: 'side', ...mock });
    assert.equal(side.name, `kubectl:web/side@${hostname()}`);
    assert.equal(
      await side.call(() => require('node:fs').readFileSync('/etc/pod-container', 'utf8').trim()),
      'kube-side',
    );
    // The namespace comes from the kubeconfig context when not given...
    const api = await router.kubectl({
      pod: 'api',
      context: 'shop',
      kubectlArgs: ['--request-timeout', '10s'],
      ...mock,
    });
    assert.equal(api.name, `kubectl:api@${hostname()}`);
    assert.equal(
      await api.call(() => require('node:fs').readFileSync('/etc/pod-container', 'utf8').trim()),
      'kube-side',
    );
    const { argv } = lastCall();
    assert.deepEqual(argv.slice(0, argv.indexOf('--')), [
      '--kubeconfig',
      kubeconfig,
      '--context',
      'shop',
      '--request-timeout',
      '10s',
      'exec',
      '-i',
      'api',
    ]);
    // ...and from the option over it, which names the context.
    const named = await router.kubectl({ pod: 'api', container: 'app', namespace: 'shop', context: 'dev', ...mock });
    assert.equal(named.name, `kubectl:shop/api/app@${hostname()}`);
    assert.equal(await named.call(() => 6 * 7), 42);
    // The same pod twice: the second name is made unique.
    const again = await router.kubectl({ pod: 'api', container: 'app', namespace: 'shop', context: 'dev', ...mock });
    assert.equal(again.name, `kubectl:shop/api/app@${hostname()}#${again.id}`);
    await assert.rejects(
      router.kubectl({ pod: 'api', context: 'dev', ...mock }),
      (error: unknown) => error instanceof ContainerNotFoundError,
      'the pod is in shop, not in the dev context’s namespace',
    );
  });

  test('via another context, kubectl runs there', async () => {
    await using router = new Router();
    const middle = await router.local({ name: 'kubectl-host' });
    const context = await router.kubectl({ pod: 'web', container: 'side', via: middle, ...mock });
    assert.equal(context.name, `kubectl:web/side@${hostname()}`);
    await exerciseContext(context, scratch);
    assert.equal(lastCall().ppid, middle.info.pid, 'the via context, not the master, ran kubectl');
  });

  test('via ssh, then sudo to root there: kubectl runs on the far side', async () => {
    const testbed = await startTestbed();
    try {
      await using router = new Router();
      const ssh = await router.ssh(sshLogin(testbed, testbed.accounts.docs));
      const root = await router.sudo({ via: ssh, password: testbed.accounts.docs.password });
      const context = await router.kubectl({ pod: 'web', container: 'web', via: root, ...mock });
      assert.equal(context.name, `kubectl:web/web@${hostname()}`);
      assert.equal(lastCall().ppid, root.info.pid, 'the sudo context on the ssh side ran kubectl');
      await exerciseContext(context, scratch);
      await assert.rejects(
        router.kubectl({ pod: 'nosuch', via: root, ...mock }),
        (error: unknown) => error instanceof ContainerNotFoundError && /pods "nosuch" not found/.test(error.message),
        'its errors arrive as their own class',
      );
    } finally {
      await testbed.stop();
    }
  });

  test('each failure is its typed error, naming the context and quoting kubectl', async () => {
    await using router = new Router();
    const here = hostname();
    const cases: [Partial<KubectlOptions>, new (...args: never[]) => Error, RegExp][] = [
      [
        { pod: 'nosuch' },
        ContainerNotFoundError,
        /'kubectl:nosuch@.*': no pod 'nosuch' in the cluster of the kubeconfig's current context .*Error from server \(NotFound\): pods "nosuch" not found/s,
      ],
      [
        { pod: 'web', namespace: 'shop' },
        ContainerNotFoundError,
        /no pod 'web' in namespace 'shop' .*pods "web" not found/s,
      ],
      [
        { pod: 'web', container: 'nosuch' },
        ContainerNotFoundError,
        /pod 'web' has no container 'nosuch' .*Error from server \(BadRequest\): container nosuch is not valid for pod web/s,
      ],
      [
        { pod: 'crashing' },
        ContainerNotRunningError,
        /the default container of pod 'crashing' is not running .*error: unable to upgrade connection: container not found \("app"\)/s,
      ],
      [
        { pod: 'unscheduled', container: 'app' },
        ContainerNotRunningError,
        /container 'app' of pod 'unscheduled' is not running .*pod unscheduled does not have a host assigned/s,
      ],
      [
        { pod: 'finished' },
        ContainerNotRunningError,
        /is not running .*cannot exec into a container in a completed pod; current phase is Succeeded/s,
      ],
      [
        { pod: 'web', context: 'readonly' },
        NotAllowedError,
        /user of context 'readonly' may not exec into pod 'web': it needs .*pods\/exec.*User "viewer" cannot create resource "pods\/exec"/s,
      ],
      [
        { pod: 'web', context: 'nosuch' },
        BootstrapError,
        /has no context 'nosuch' \(kubectl config get-contexts lists them\).*context was not found for specified context: nosuch/s,
      ],
      [
        { pod: 'web', kubeconfig: join(scratch, 'missing') },
        BootstrapError,
        /the kubeconfig '.*missing' does not exist on .*error: stat .*missing: no such file or directory/s,
      ],
      [
        { pod: 'web', context: 'offline' },
        BootstrapError,
        /could not reach the API server of context 'offline'.*The connection to the server 127\.0\.0\.1:1 was refused/s,
      ],
      [{ pod: 'web', kubectlArgs: ['--bogus'] }, BootstrapError, /Error: unknown flag: --bogus/],
      [
        { pod: 'noshell' },
        InterpreterError,
        /the default container of pod 'noshell' on .* has no POSIX shell .*exec: "sh": executable file not found/s,
      ],
      [
        { pod: 'nonode', shipNode: 'never' },
        InterpreterError,
        /'kubectl:nonode@.*no Node\.js interpreter found .*tried node, nodejs/s,
      ],
    ];
    // Every case is tried, and every one that went wrong is reported at once.
    const wrong: string[] = [];
    for (const [options, Class, message] of cases) {
      const error = await router.kubectl({ ...mock, ...options } as KubectlOptions).then(
        () => new Error('it started'),
        (reason: Error) => reason,
      );
      const exact = Class !== BootstrapError || error.constructor === BootstrapError;
      if (!(error instanceof Class) || !exact || !message.test(error.message) || !error.message.includes(here)) {
        wrong.push(
          `${JSON.stringify(options)}: expected ${Class.name} matching ${message}, got ${error.constructor.name}: ${error.message}`,
        );
      }
    }
    assert.deepEqual(wrong, []);
    await assert.rejects(
      router.kubectl({ pod: 'web', kubectlPath: join(scratch, 'no-kubectl') }),
      (error: unknown) =>
        error instanceof ToolNotFoundError &&
        error.tool === join(scratch, 'no-kubectl') &&
        /install kubectl \(Kubernetes release binaries, .*\), or give its path with the kubectlPath option/.test(
          error.message,
        ),
    );
  });

  test('the mock says what the real kubectl says where no API server is needed', () => {
    assert.ok(existsSync(REAL_KUBECTL), `${REAL_KUBECTL} is missing: it is the machine image's (google-cloud-cli)`);
    // Real kubectl may write a discovery cache under $HOME/.kube: a scratch HOME, never the real one.
    const { KUBECONFIG: _ignored, ...inherited } = process.env;
    const env = { ...inherited, HOME: scratch };
    const run = (tool: string, args: string[]) => {
      const result = spawnSync(tool, args, { env, encoding: 'utf8', timeout: 20_000, input: '' });
      // Discovery's log lines carry a time and a pid.
      return { status: result.status, stderr: result.stderr.replace(/^E\d{4} [\d:.]+ +\d+ /gm, 'E ') };
    };
    for (const args of [
      ['--kubeconfig', kubeconfig, '--context', 'nosuch', 'exec', '-i', 'web', '--', 'true'],
      ['--kubeconfig', join(scratch, 'missing'), 'exec', '-i', 'web', '--', 'true'],
      ['--kubeconfig', kubeconfig, '--context', 'offline', 'exec', '-i', 'web', '--', 'true'],
      ['--kubeconfig', kubeconfig, '--bogus', 'exec', '-i', 'web', '--', 'true'],
      ['--kubeconfig', kubeconfig, 'exec', '-i', 'web'],
      ['--kubeconfig', kubeconfig, 'exec', '-i', '--', 'true'],
    ]) {
      assert.deepEqual(run(kubectlPath, args), run(REAL_KUBECTL, args), args.join(' '));
    }
  });
});
