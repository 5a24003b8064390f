/**
 * The container test bed: a Debian image with Node, sudo and a second
 * account, built once with mmdebstrap from the machine's own Debian archive
 * and cached in .cache/images/; a private Podman store and a private
 * dockerd per test file, each importing that image. Everything a bed
 * starts or creates lives under its own directory and is stopped and
 * removed by `stop()`, also when a test failed; nothing another run made
 * is touched (containers are found through the bed's own store or daemon).
 */

import assert from 'node:assert/strict';
import { type ChildProcess, execFileSync, spawn } from 'node:child_process';
import { createHash, randomBytes } from 'node:crypto';
import { existsSync, mkdirSync, mkdtempSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Context } from 'tendril';
import { ROOT } from './procs.js';

/** The image's second account: may sudo to root without a password; `su` to root takes ROOT_PASSWORD. */
export const IMAGE_USER = 'app';
/** Root's password inside the image (a throwaway image, built for the tests only). */
export const ROOT_PASSWORD = 'tendril-test-root';

/** What goes into the image; its hash names the cached tarball, so a change rebuilds it. */
const RECIPE = [
  '--variant=minbase',
  '--include=nodejs,sudo',
  `--customize-hook=chroot "$1" useradd --create-home --shell /bin/sh --uid 1000 ${IMAGE_USER}`,
  `--customize-hook=echo '${IMAGE_USER} ALL=(ALL) NOPASSWD: ALL' > "$1/etc/sudoers.d/${IMAGE_USER}" && chmod 0440 "$1/etc/sudoers.d/${IMAGE_USER}"`,
  `--customize-hook=echo 'root:${ROOT_PASSWORD}' | chroot "$1" chpasswd`,
  'bookworm',
];

const CACHE = join(ROOT, '.cache', 'images');

/** The Debian archive apt uses here (the only one this machine may reach). */
function debianArchive(): string {
  const archive = execFileSync('apt-get', ['indextargets', '--format', '$(REPO_URI) $(RELEASE)'], { encoding: 'utf8' })
    .split('\n')
    .map((line) => line.split(' '))
    .find(([uri, release]) => uri?.includes('/debian') && release === 'bookworm')?.[0];
  if (!archive) throw new Error("no Debian bookworm archive in apt's sources, to build the test image from");
  return archive;
}

/**
 * The image's root file system as a tarball, built on first use (about
 * 20 s and 90 MB of packages) and kept in .cache/images/.
 * @throws Error saying what failed when mmdebstrap cannot build it.
 */
export function nodeImageTarball(): string {
  const hash = createHash('sha256').update(RECIPE.join('\0')).digest('hex').slice(0, 16);
  const tarball = join(CACHE, `debian-node-${hash}.tar`);
  if (existsSync(tarball)) return tarball;
  mkdirSync(CACHE, { recursive: true });
  // Built beside its final name and renamed: a run building it at the same time never reads half a file.
  const partial = `${tarball}.${process.pid}.${randomBytes(4).toString('hex')}.tar`;
  try {
    execFileSync('mmdebstrap', ['--quiet', ...RECIPE, partial, debianArchive()], {
      stdio: ['ignore', 'ignore', 'pipe'],
    });
  } catch (error) {
    rmSync(partial, { force: true });
    const stderr = String((error as { stderr?: Buffer }).stderr ?? '').trim();
    throw new Error(`the test image could not be built with mmdebstrap: ${stderr || (error as Error).message}`);
  }
  renameSync(partial, tarball);
  return tarball;
}

/** Fails with a message saying why, for files that need root and the container tools. */
export function requireContainerTools(tools: string[]): void {
  if (process.env.TENDRIL_TEST_TIER === 'quick') {
    throw new Error(
      'this file starts container runtimes, which the quick tier never does: take it out of QUICK in test/run.mjs',
    );
  }
  if (process.getuid?.() !== 0)
    throw new Error('the container tests need root, to run container runtimes: run the suite as root (CI does)');
  for (const tool of tools) {
    if (!existsSync(tool))
      throw new Error(`${tool} is missing: npm test installs the container tools as root (test/run.mjs)`);
  }
}

/** Options every test container is created with: crun refuses this machine's cgroups, and runc needs limits it may set. */
export const CONTAINER_LIMITS = ['--ulimit', 'nofile=1024:1024', '--ulimit', 'nproc=1024:1024'];

/** A private Podman store (and buildah, which shares it), with the test image imported. */
export class PodmanBed {
  /** Global options that point podman at this bed's store: give them as `podmanArgs`. */
  readonly args: string[];
  /** The same for buildah (`buildahArgs`). */
  readonly buildahArgs: string[];
  /** The test image's name in this store. */
  readonly image = 'localhost/tendril-test-node:latest';
  readonly dir: string;

  private constructor(dir: string) {
    this.dir = dir;
    const store = ['--root', join(dir, 'root'), '--runroot', join(dir, 'run')];
    this.args = [...store, '--runtime', 'runc', '--cgroup-manager', 'cgroupfs', '--events-backend', 'file'];
    this.buildahArgs = store;
  }

  /** A new store under a temporary directory, with the image imported (about 5 s). */
  static start(): PodmanBed {
    requireContainerTools(['/usr/bin/podman', '/usr/bin/buildah', '/usr/bin/mmdebstrap']);
    const bed = new PodmanBed(mkdtempSync(join(tmpdir(), 'tendril-podman-')));
    try {
      bed.podman(['import', '--quiet', nodeImageTarball(), bed.image]);
    } catch (error) {
      bed.stop();
      throw error;
    }
    return bed;
  }

  /** Runs podman on this store; returns its stdout. */
  podman(args: string[]): string {
    return execFileSync('podman', [...this.args, ...args], {
      encoding: 'utf8',
      stdio: ['ignore', 'pipe', 'pipe'],
    }).trim();
  }

  /** Starts a container of the image that idles until removed; returns its name. */
  run(name: string, extra: string[] = []): string {
    this.podman(['run', '--detach', '--name', name, ...CONTAINER_LIMITS, ...extra, this.image, 'sleep', 'infinity']);
    return name;
  }

  /** Removes every container and image of the store, then the store. */
  stop(): void {
    for (const args of [
      ['rm', '--all', '--force', '--time', '0'],
      ['rmi', '--all', '--force'],
    ]) {
      try {
        this.podman(args);
      } catch {
        // Nothing there, or the store never got made.
      }
    }
    try {
      execFileSync('buildah', [...this.buildahArgs, 'rm', '--all'], { stdio: 'ignore' });
    } catch {
      // No working containers.
    }
    rmSync(this.dir, { recursive: true, force: true });
  }
}

/** A dockerd of this bed's own (its data root, socket and no network setup), with the test image imported. */
export class DockerBed {
  /** Global options that point docker at this daemon: give them as `dockerArgs`. */
  readonly args: string[];
  readonly image = 'tendril-test-node:latest';
  readonly dir: string;
  private readonly daemon: ChildProcess;

  private constructor(dir: string, daemon: ChildProcess) {
    this.dir = dir;
    this.daemon = daemon;
    this.args = ['--host', `unix://${join(dir, 'docker.sock')}`];
  }

  /** Starts the daemon, waits for it to answer, and imports the image (about 5 s). */
  static async start(): Promise<DockerBed> {
    requireContainerTools(['/usr/sbin/dockerd', '/usr/bin/mmdebstrap']);
    const dir = mkdtempSync(join(tmpdir(), 'tendril-docker-'));
    const log: string[] = [];
    const daemon = spawn(
      'dockerd',
      [
        '--iptables=false',
        '--ip6tables=false',
        '--bridge=none',
        '--data-root',
        join(dir, 'data'),
        '--exec-root',
        join(dir, 'exec'),
        '--pidfile',
        join(dir, 'docker.pid'),
        '--host',
        `unix://${join(dir, 'docker.sock')}`,
        '--default-ulimit',
        'nofile=1024:1024',
      ],
      { stdio: ['ignore', 'ignore', 'pipe'] },
    );
    daemon.stderr?.on('data', (chunk: Buffer) => {
      log.push(chunk.toString());
      if (log.length > 50) log.shift();
    });
    const bed = new DockerBed(dir, daemon);
    try {
      const deadline = Date.now() + 60_000;
      for (;;) {
        if (daemon.exitCode !== null) throw new Error(`dockerd exited (${daemon.exitCode}): ${log.join('')}`);
        try {
          bed.docker(['version', '--format', '{{.Server.Version}}']);
          break;
        } catch (error) {
          if (Date.now() > deadline) throw new Error(`dockerd did not answer within 60 s: ${(error as Error).message}`);
          await new Promise((resolve) => setTimeout(resolve, 200));
        }
      }
      bed.docker(['import', nodeImageTarball(), bed.image]);
    } catch (error) {
      await bed.stop();
      throw error;
    }
    return bed;
  }

  /** Runs docker against this daemon; returns its stdout. */
  docker(args: string[]): string {
    return execFileSync('docker', [...this.args, ...args], {
      encoding: 'utf8',
      stdio: ['ignore', 'pipe', 'pipe'],
    }).trim();
  }

  /** Starts a container of the image that idles until removed; returns its name. */
  run(name: string, extra: string[] = []): string {
    this.docker(['run', '--detach', '--network', 'none', '--name', name, ...extra, this.image, 'sleep', 'infinity']);
    return name;
  }

  /** Removes every container, stops the daemon (which unmounts what it mounted), removes its directory. */
  async stop(): Promise<void> {
    if (this.daemon.exitCode === null) {
      try {
        const ids = this.docker(['ps', '--all', '--quiet']).split('\n').filter(Boolean);
        if (ids.length > 0) this.docker(['rm', '--force', ...ids]);
      } catch {
        // The daemon never answered.
      }
      const exited = new Promise((resolve) => this.daemon.once('exit', resolve));
      this.daemon.kill('SIGTERM');
      const killer = setTimeout(() => this.daemon.kill('SIGKILL'), 20_000);
      await exited;
      clearTimeout(killer);
    }
    // dockerd's containerd and shims may still hold the exec root for a moment.
    for (let attempt = 0; attempt < 10; attempt++) {
      try {
        rmSync(this.dir, { recursive: true, force: true });
        return;
      } catch {
        await new Promise((resolve) => setTimeout(resolve, 200));
      }
    }
    rmSync(this.dir, { recursive: true, force: true });
  }
}

/**
 * What every container method must give: a context that answers calls
 * (from inside the container: its Node, its hostname), forwards modules
 * (an ESM fixture importing an npm package the container lacks), runs
 * `exec` and `copy`. Returns what the context reported about itself.
 */
export async function exerciseContext(context: Context, scratch: string): Promise<{ node: string; uid: number }> {
  const inside = await context.call(() => ({
    node: process.version,
    uid: process.getuid?.() ?? -1,
    root: require('node:fs').existsSync('/etc/debian_version'),
  }));
  assert.ok(inside.root, 'the context runs in the Debian image');
  const tasks = context.import<typeof import('../fixtures/tasks.js')>(new URL('../fixtures/tasks.js', import.meta.url));
  assert.deepEqual((await tasks.deploy({ version: '1.0' })).steps, [2, 4, 6]);
  const echoed = await context.exec('sh', ['-c', 'echo "$0"', 'from-exec']);
  assert.equal(echoed.stdout, 'from-exec');
  const source = join(scratch, `copied-${randomBytes(4).toString('hex')}`);
  writeFileSync(source, 'copied into the container\n');
  const target = `/tmp/${randomBytes(6).toString('hex')}`;
  await context.copy(source, target);
  assert.equal((await context.exec('cat', [target])).stdout, 'copied into the container');
  await context.exec('rm', ['-f', target]);
  return { node: inside.node, uid: inside.uid };
}
