// The runtimes the containers bench (bench/containers.ts) measures, each
// the test suite's own bed (test/support/): a private Podman store, a
// private containerd and dockerd, a private lxcpath, private LXD and
// Incus daemons, a chroot tree, and the kubectl mock over the Podman
// store. In each, one idle container with the test image and python3 (so
// Mitogen's Python children run in the very container tendril enters).
// Everything lives under the beds' own temporary directories and is
// stopped and removed by `stop()`, in reverse order of its start, also
// when a later start failed.
import { execFileSync } from 'node:child_process';
import { chmodSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { CONTAINER_LIMITS, DockerBed, PodmanBed } from '../../test/support/containers.js';
import { LxcBed } from '../../test/support/lxc.js';
import { InstanceBed } from '../../test/support/lxd.js';
import { unpackNodeImage } from '../../test/support/rootfs.js';
import { progress, shellQuote } from '../flow-shared.js';
import { run } from './processes.js';
import { addPythonLayer, loadPythonImage, type PythonImage } from './python-image.js';

/** The kubectl stand-in of the test suite (no cluster runs here): `kubectl exec -i` over `podman exec -i`. */
const KUBECTL_MOCK = fileURLToPath(new URL('../../test/fixtures/kubectl-mock.js', import.meta.url));

/** The container every runtime runs (LXC, LXD and Incus prefix it: see their beds). */
export const CONTAINER = 'bench';
/** The buildah working container. */
export const WORK = 'bench-work';

/** The beds, each with its container running. Fields are set by `start()`. */
export class ContainerBeds {
  podman!: PodmanBed;
  /** The Python image in the Podman store, and its cached archive. */
  python!: PythonImage;
  docker!: DockerBed;
  lxc!: LxcBed;
  /** The LXC container's full name. */
  lxcContainer!: string;
  lxd!: InstanceBed;
  /** The LXD instance's full name. */
  lxdContainer!: string;
  incus!: InstanceBed;
  /** The Incus instance's full name. */
  incusContainer!: string;
  /** The chroot tree: the test image unpacked. */
  tree!: string;
  /** Wrappers (see `wrapper`), the kubeconfig, the chroot tree. */
  scratch!: string;
  /** An executable that runs the kubectl mock. */
  kubectl!: string;
  /** The mock's kubeconfig: pod `bench` in namespace default is the Podman container `bench`. */
  kubeconfig!: string;
  /** Every directory a bed made, removed by stop(): the smoke test checks they are gone. */
  readonly dirs: string[] = [];
  private readonly stops: (() => unknown)[] = [];

  /**
   * Starts every bed and one container in each (about 30 s: the Docker,
   * LXD and Incus daemons come up, and get their containers, while the
   * Podman store, the lxcpath and the chroot tree are made).
   * @throws Error from the bed that failed; what had started is still stopped by stop().
   */
  async start(): Promise<void> {
    this.scratch = mkdtempSync(join(tmpdir(), 'tendril-bench-containers-'));
    this.own(this.scratch, () => rmSync(this.scratch, { recursive: true, force: true }));
    this.kubectl = this.wrapper('kubectl', [process.execPath, KUBECTL_MOCK]);

    progress('private containerd and dockerd, LXD and Incus daemons, starting meanwhile');
    // Each daemon is owned (stopped by stop()) as soon as it is up, whatever fails after.
    // The daemons' containers wait for the Python image, which the Podman bed builds or loads.
    let handOver: { resolve: (image: PythonImage) => void; reject: (error: unknown) => void } | undefined;
    const python = new Promise<PythonImage>((resolve, reject) => {
      handOver = { resolve, reject };
    });
    // Not unhandled when every daemon failed before waiting for it.
    python.catch(() => undefined);
    const daemons = Promise.allSettled([
      DockerBed.start().then(async (bed) => {
        this.own(bed.dir, () => bed.stop());
        this.docker = bed;
        const { image, archive } = await python;
        await run('docker', [...bed.args, 'load', '--quiet', '--input', archive]);
        await run('docker', [
          ...bed.args,
          'run',
          '--detach',
          '--network',
          'none',
          '--name',
          CONTAINER,
          image,
          'sleep',
          'infinity',
        ]);
        // As for podman: the image's layers read once before timing.
        await run('docker', [...bed.args, 'run', '--rm', image, 'true']);
      }),
      InstanceBed.start('lxd').then(async (bed) => {
        this.own(bed.dir, () => bed.stop());
        this.lxd = bed;
        this.lxdContainer = await launch(bed, 'lxc', await python);
      }),
      InstanceBed.start('incus').then(async (bed) => {
        this.own(bed.dir, () => bed.stop());
        this.incus = bed;
        this.incusContainer = await launch(bed, 'incus', await python);
      }),
    ]);
    let failed: unknown;
    try {
      this.startPodman();
      handOver?.resolve(this.python);
      progress('a private lxcpath, a chroot tree');
      this.lxc = LxcBed.start();
      this.own(this.lxc.dir, () => this.lxc.stop());
      this.lxcContainer = this.lxc.run(CONTAINER);
      await addPythonLayer(this.python, ['lxc-attach', '--lxcpath', this.lxc.dir, '--name', this.lxcContainer, '--']);
      this.tree = unpackNodeImage(join(this.scratch, 'tree'));
      this.kubeconfig = join(this.scratch, 'kubeconfig');
      writeFileSync(this.kubeconfig, JSON.stringify(kubeconfig(this.podman)));
    } catch (error) {
      failed = error;
      // The daemons' containers wait no more; what came up is stopped by stop().
      handOver?.reject(error);
    }
    progress('the daemons and their containers');
    const rejected = (await daemons).find((result) => result.status === 'rejected');
    if (failed !== undefined) throw failed;
    if (rejected) throw rejected.reason;
  }

  /** The Podman store with the Python image, its container and a buildah working container of it. */
  private startPodman(): void {
    progress('a private Podman store, the image with python3 (built and cached in .cache/images on first use)');
    this.podman = PodmanBed.start();
    this.own(this.podman.dir, () => this.podman.stop());
    this.python = loadPythonImage(this.podman);
    const image = this.python.image;
    this.podman.podman(['run', '--detach', '--name', CONTAINER, ...CONTAINER_LIMITS, image, 'sleep', 'infinity']);
    this.podman.podman(['run', '--rm', ...CONTAINER_LIMITS, image, 'true']); // the image's layers, read once before timing
    execFileSync('buildah', [...this.podman.buildahArgs, 'from', '--quiet', '--name', WORK, image], {
      stdio: 'ignore',
    });
  }

  /** Records a directory a bed made and how to stop it (run by stop(), last first). */
  private own(dir: string, stop: () => unknown): void {
    this.dirs.push(dir);
    this.stops.push(stop);
  }

  /**
   * An executable in the scratch directory that runs `argv` then its own
   * arguments, with `env` set: how Mitogen's methods, which take a tool's
   * path but no global options, reach the beds (an sh exec, about 1 ms).
   * Returns its path.
   */
  wrapper(name: string, argv: string[], env: Record<string, string> = {}): string {
    const path = join(this.scratch, `bench-${name}`);
    const assignments = Object.entries(env).map(([key, value]) => `${key}=${shellQuote(value)} `);
    writeFileSync(path, `#!/bin/sh\n${assignments.join('')}exec ${argv.map(shellQuote).join(' ')} "$@"\n`);
    chmodSync(path, 0o755);
    return path;
  }

  /**
   * Stops and removes everything start() started, side by side (each bed
   * its own; the daemons take seconds each); a failure to stop one does
   * not keep the rest.
   * @throws the first bed's failure to stop, once all were tried.
   */
  async stop(): Promise<void> {
    const stops = this.stops.splice(0).reverse();
    const results = await Promise.allSettled(stops.map(async (stop) => stop()));
    const failed = results.find((result) => result.status === 'rejected');
    if (failed) throw failed.reason;
  }
}

/**
 * Launches the bench's instance of the image in an LXD or Incus bed
 * (`client`: its command) and adds python3 to it; returns its full name.
 * Asynchronous, unlike the bed's own launch, so the beds start side by side.
 */
async function launch(bed: InstanceBed, client: 'lxc' | 'incus', python: PythonImage): Promise<string> {
  const name = bed.name(CONTAINER);
  await run(client, ['launch', bed.image, name], bed.env());
  await addPythonLayer(python, [client, 'exec', name, '--'], bed.env());
  return name;
}

/**
 * The mock's kubeconfig (JSON, as test/containers-kubectl.test.ts writes
 * it): context `bench` on a cluster whose pod default/bench has one
 * container, the Podman container `bench`.
 */
function kubeconfig(podman: PodmanBed): unknown {
  const cluster = {
    podmanArgs: podman.args,
    pods: {
      'default/bench': { phase: 'Running', nodeName: 'node1', containers: [{ name: 'app', podman: CONTAINER }] },
    },
  };
  return {
    apiVersion: 'v1',
    kind: 'Config',
    'current-context': 'bench',
    clusters: [
      {
        name: 'mock',
        cluster: {
          server: 'https://127.0.0.1:6443',
          extensions: [{ name: 'tendril-test-cluster', extension: cluster }],
        },
      },
    ],
    contexts: [{ name: 'bench', context: { cluster: 'mock', user: 'admin', namespace: 'default' } }],
    users: [{ name: 'admin', user: { token: 'bench-token' } }],
  };
}
