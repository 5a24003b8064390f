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
import {
  chmodSync,
  closeSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  openSync,
  readdirSync,
  readFileSync,
  renameSync,
  rmSync,
  writeFileSync,
} from 'node:fs';
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

/**
 * A private Podman store (and buildah, which shares it), with the test
 * image imported: root's, or with `account` an account's own rootless one.
 */
export class PodmanBed {
  /** Global options that point podman at this bed's store: give them as `podmanArgs`. */
  readonly args: string[];
  /** The same for buildah (`buildahArgs`). */
  readonly buildahArgs: string[];
  /** The test image's name in this store. */
  readonly image = 'localhost/tendril-test-node:latest';
  readonly dir: string;
  /** The account whose rootless store this is; undefined for root's. */
  readonly account: string | undefined;
  /**
   * For a rootless bed, the `XDG_RUNTIME_DIR=...` the account's podman must
   * run with, as sudo takes it on its command line (`sudoArgs`): rootless
   * podman keeps runc's state and its pause process's there, so every
   * podman of the bed must see the same one. Empty for root's bed.
   */
  readonly sudoEnv: string[];

  private constructor(dir: string, account: string | undefined) {
    this.dir = dir;
    this.account = account;
    const store = ['--root', join(dir, 'root'), '--runroot', join(dir, 'run')];
    const common = ['--runtime', 'runc', '--cgroup-manager', 'cgroupfs', '--events-backend', 'file'];
    // Rootless: its own temporary directory (the pause process's PID file), and overlay in the user namespace (vfs would copy the image for every container).
    const rootless = account === undefined ? [] : ['--tmpdir', join(dir, 'tmp'), '--storage-driver', 'overlay'];
    this.args = [...store, ...common, ...rootless];
    this.buildahArgs = store;
    this.sudoEnv = account === undefined ? [] : [`XDG_RUNTIME_DIR=${join(dir, 'xdg')}`];
  }

  /**
   * A new store under a temporary directory, with the image imported
   * (about 5 s). With `account`, the store is that account's (rootless
   * podman, run through sudo); the account needs ranges in /etc/subuid
   * and /etc/subgid (useradd gives every new account one).
   * @throws Error saying what is missing, or quoting podman, when the store cannot be made.
   */
  static start(account?: string): PodmanBed {
    const bed = PodmanBed.prepare(account);
    try {
      bed.withImage((tarball) => bed.podman(IMPORT(bed), tarball));
    } catch (error) {
      bed.stop();
      throw error;
    }
    return bed;
  }

  /** As `start`, without blocking the event loop while the image is imported: other beds start meanwhile. */
  static async starting(account?: string): Promise<PodmanBed> {
    const bed = PodmanBed.prepare(account);
    try {
      await bed.withImage((tarball) => bed.podmanAsync(IMPORT(bed), tarball));
    } catch (error) {
      bed.stop();
      throw error;
    }
    return bed;
  }

  /** The bed's directories, owned by the account for a rootless store; nothing imported yet. */
  private static prepare(account: string | undefined): PodmanBed {
    requireContainerTools(['/usr/bin/podman', '/usr/bin/buildah', '/usr/bin/mmdebstrap']);
    if (account !== undefined) requireRootless(account);
    const parent = mkdtempSync(join(tmpdir(), 'tendril-podman-'));
    if (account === undefined) return new PodmanBed(parent, undefined);
    // The account reaches its store through the bed's directory, which only root may list.
    chmodSync(parent, 0o711);
    const dir = join(parent, 'store');
    mkdirSync(join(dir, 'xdg'), { recursive: true, mode: 0o700 });
    execFileSync('chown', ['-R', account, dir]);
    return new PodmanBed(dir, account);
  }

  /** Calls `use` with the image tarball open (given on stdin: the account may not be able to read the cache). */
  private withImage<T>(use: (tarball: number) => T): T {
    const tarball = openSync(nodeImageTarball(), 'r');
    const result = use(tarball);
    if (result instanceof Promise) return result.finally(() => closeSync(tarball)) as T;
    closeSync(tarball);
    return result;
  }

  /** podman and its arguments on this store, as the bed's account if it has one. */
  private argv(args: string[]): string[] {
    return this.account === undefined
      ? ['podman', ...this.args, ...args]
      : ['sudo', '-u', this.account, '-H', ...this.sudoEnv, '--', 'podman', ...this.args, ...args];
  }

  /** What a failed podman command becomes: its stderr, and the account it ran as. */
  private failed(args: string[], stderr: string, error: Error): Error {
    return new Error(
      `podman ${args[0]} failed${this.account ? ` as ${this.account}` : ''}: ${stderr.trim() || error.message}`,
    );
  }

  /** Runs podman on this store (as the bed's account, if it has one); returns its stdout. */
  podman(args: string[], stdin: number | 'ignore' = 'ignore'): string {
    const [command, ...rest] = this.argv(args) as [string, ...string[]];
    try {
      return execFileSync(command, rest, { encoding: 'utf8', stdio: [stdin, 'pipe', 'pipe'] }).trim();
    } catch (error) {
      throw this.failed(args, String((error as { stderr?: string }).stderr ?? ''), error as Error);
    }
  }

  /** `podman`, without blocking the event loop. */
  podmanAsync(args: string[], stdin: number | 'ignore' = 'ignore'): Promise<string> {
    const [command, ...rest] = this.argv(args) as [string, ...string[]];
    return new Promise((resolve, reject) => {
      const child = spawn(command, rest, { stdio: [stdin, 'pipe', 'pipe'] });
      let stdout = '';
      let stderr = '';
      child.stdout?.on('data', (chunk: Buffer) => (stdout += chunk.toString()));
      child.stderr?.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
      child.on('error', (error) => reject(this.failed(args, stderr, error)));
      child.on('close', (code) =>
        code === 0 ? resolve(stdout.trim()) : reject(this.failed(args, stderr, new Error(`exit code ${code}`))),
      );
    });
  }

  /** Starts a container of the image that idles until removed; returns its name. */
  run(name: string, extra: string[] = []): string {
    this.podman(RUN(this, name, extra));
    return name;
  }

  /** Starts such containers, `concurrency` at a time. */
  async runAll(names: string[], extra: string[] = [], concurrency = 4): Promise<void> {
    const queue = [...names];
    const worker = async () => {
      for (let name = queue.shift(); name !== undefined; name = queue.shift()) {
        await this.podmanAsync(RUN(this, name, extra));
      }
    };
    await Promise.all(Array.from({ length: concurrency }, worker));
  }

  /** Removes every container and image of the store, ends a rootless bed's pause process, then removes the store. */
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
    if (this.account === undefined) {
      try {
        execFileSync('buildah', [...this.buildahArgs, 'rm', '--all'], { stdio: 'ignore' });
      } catch {
        // No working containers.
      }
    } else {
      endPauseProcess(join(this.dir, 'tmp', 'pause.pid'), this.account);
    }
    // conmon runs `podman container cleanup` on this store after an exec session or a container ends,
    // also after `rm` returned: removed before that, the store would be made again, and left behind.
    // What still names the store after that is this bed's own (a service a test left running):
    // ended, so that nothing makes the store again once it is removed.
    for (const pid of waitForProcessesNaming(this.dir, 10_000)) {
      try {
        process.kill(pid, 'SIGKILL');
      } catch {
        // Ended meanwhile.
      }
    }
    waitForProcessesNaming(this.dir, 5_000);
    // The overlay driver's home can stay bind-mounted once no podman runs on the store.
    unmountUnder(this.dir);
    rmSync(this.account === undefined ? this.dir : join(this.dir, '..'), { recursive: true, force: true });
  }
}

/** Pids of the processes whose command line mentions `text` (this one's excepted). */
function processesNaming(text: string): number[] {
  const found: number[] = [];
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry) || Number(entry) === process.pid) continue;
    try {
      if (readFileSync(`/proc/${entry}/cmdline`, 'utf8').includes(text)) found.push(Number(entry));
    } catch {
      // Ended meanwhile.
    }
  }
  return found;
}

/** Waits (blocking) until no process mentions `text`, at most `ms`; returns those that still do. */
function waitForProcessesNaming(text: string, ms: number): number[] {
  const deadline = Date.now() + ms;
  const tick = new Int32Array(new SharedArrayBuffer(4));
  let pids = processesNaming(text);
  while (pids.length > 0 && Date.now() < deadline) {
    Atomics.wait(tick, 0, 0, 50);
    pids = processesNaming(text);
  }
  return pids;
}

/** podman's arguments that import the test image from stdin. */
const IMPORT = (bed: PodmanBed) => ['import', '--quiet', '-', bed.image];

/** podman's arguments that start an idle container of the test image. */
const RUN = (bed: PodmanBed, name: string, extra: string[]) => [
  'run',
  '--detach',
  '--name',
  name,
  ...CONTAINER_LIMITS,
  ...extra,
  bed.image,
  'sleep',
  'infinity',
];

/**
 * Fails saying why when `account` cannot run rootless podman: no
 * subordinate ids for it, or no newuidmap to map them.
 */
function requireRootless(account: string): void {
  for (const file of ['/etc/subuid', '/etc/subgid']) {
    const ranges = existsSync(file) ? readFileSync(file, 'utf8') : '';
    if (!ranges.split('\n').some((line) => line.startsWith(`${account}:`))) {
      throw new Error(
        `rootless podman as ${account} needs a range of subordinate ids in ${file} (usermod --add-subuids/--add-subgids)`,
      );
    }
  }
  for (const tool of ['/usr/bin/newuidmap', '/usr/bin/newgidmap']) {
    if (!existsSync(tool)) throw new Error(`rootless podman needs ${tool}: install the uidmap package`);
  }
}

/**
 * Rootless podman keeps its user namespace alive with a pause process
 * (catatonit) whose PID it writes into its temporary directory: ends it,
 * if it is still that account's process.
 */
function endPauseProcess(pidFile: string, account: string): void {
  let pid: number;
  try {
    pid = Number(readFileSync(pidFile, 'utf8').trim());
  } catch {
    return;
  }
  try {
    const uid = execFileSync('id', ['-u', account], { encoding: 'utf8' }).trim();
    const status = readFileSync(`/proc/${pid}/status`, 'utf8');
    if (new RegExp(`^Uid:\\s+${uid}\\s`, 'm').test(status)) process.kill(pid, 'SIGKILL');
  } catch {
    // Gone already.
  }
}

/** Resolves after `ms` milliseconds. */
const pause = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** A daemon the bed started: its process and the last lines it logged, for the error when it fails. */
interface Daemon {
  readonly process: ChildProcess;
  readonly log: string[];
}

/** Starts `command` with its stderr kept (the last 50 chunks); stdout is not read. */
function startDaemon(command: string, args: string[]): Daemon {
  const child = spawn(command, args, { stdio: ['ignore', 'ignore', 'pipe'] });
  const log: string[] = [];
  child.stderr?.on('data', (chunk: Buffer) => {
    log.push(chunk.toString());
    if (log.length > 50) log.shift();
  });
  // A spawn error (ENOENT) is seen as the exit code below, not thrown at the event loop.
  child.on('error', (error) => log.push(String(error)));
  return { process: child, log };
}

/** Stops a daemon with SIGTERM, then SIGKILL after `graceMs`; resolves once it has exited. */
async function stopDaemon(daemon: Daemon, graceMs: number): Promise<void> {
  const child = daemon.process;
  if (child.exitCode !== null || child.signalCode !== null || child.pid === undefined) return;
  const exited = new Promise((resolve) => child.once('exit', resolve));
  child.kill('SIGTERM');
  const killer = setTimeout(() => child.kill('SIGKILL'), graceMs);
  await exited;
  clearTimeout(killer);
}

/** Waits up to 60 s for `ready` to hold (or not throw); fails with the daemon's log if it exits first. */
async function waitUntil(name: string, daemon: Daemon, ready: () => boolean): Promise<void> {
  const deadline = Date.now() + 60_000;
  for (;;) {
    if (daemon.process.exitCode !== null) {
      throw new Error(`${name} exited (${daemon.process.exitCode}): ${daemon.log.join('')}`);
    }
    let why = 'not ready';
    try {
      if (ready()) return;
    } catch (error) {
      why = (error as Error).message;
    }
    if (Date.now() > deadline) throw new Error(`${name} did not answer within 60 s: ${why}`);
    await pause(100);
  }
}

/** A running `podman system service` (the API podman --remote uses): its socket, and how to stop it. */
export interface PodmanService {
  /** Its address, for `podman --remote --url`: `unix://` and a socket in the bed's directory. */
  readonly url: string;
  /** Stops the service (SIGTERM, then SIGKILL after 10 s); resolves once it has exited. */
  stop(): Promise<void>;
}

/**
 * Starts root's `podman system service` on `bed`'s store, listening on a
 * socket in the bed's directory (which only root may enter); resolves once
 * it answers.
 */
export async function startPodmanService(bed: PodmanBed): Promise<PodmanService> {
  const socket = join(bed.dir, 'podman.sock');
  const url = `unix://${socket}`;
  const service = startDaemon('podman', [...bed.args, 'system', 'service', '--time', '0', url]);
  const stop = () => stopDaemon(service, 10_000);
  try {
    await waitUntil('podman system service', service, () => {
      execFileSync('podman', ['--remote', '--url', url, 'version'], { stdio: 'ignore' });
      return true;
    });
  } catch (error) {
    await stop();
    throw error;
  }
  return { url, stop };
}

/** Mount points at or under `dir`, deepest first (from this process's mount table). */
function mountsUnder(dir: string): string[] {
  return readFileSync('/proc/self/mountinfo', 'utf8')
    .split('\n')
    .map((line) => line.split(' ')[4] ?? '')
    .filter((point) => point === dir || point.startsWith(`${dir}/`))
    .sort((a, b) => b.length - a.length);
}

/** Unmounts (lazily) whatever is mounted at or under `dir`, deepest first. */
function unmountUnder(dir: string): void {
  for (const point of mountsUnder(dir)) {
    try {
      execFileSync('umount', ['--lazy', point], { stdio: 'ignore' });
    } catch {
      // Gone meanwhile.
    }
  }
}

/**
 * A Docker engine of this bed's own: a containerd with its own root, state
 * and socket, and a dockerd using it (`--containerd`: never a containerd
 * another run or the system started) with its own data root, exec root,
 * pid file and socket, and no network setup (`--iptables=false
 * --bridge=none`: containers get only loopback). The test image is
 * imported into it. The socket is root's (its directory is 0700): other
 * accounts are refused, as on a host where they are not in the docker group.
 */
export class DockerBed {
  /** Global options that point docker at this daemon: give them as `dockerArgs`. */
  readonly args: string[];
  /** The test image's name in this daemon. */
  readonly image = 'tendril-test-node:latest';
  readonly dir: string;
  /** The daemon's socket (`unix://` + this is its address). */
  readonly socket: string;
  private readonly daemons: Daemon[] = [];

  private constructor(dir: string) {
    this.dir = dir;
    this.socket = join(dir, 'docker.sock');
    this.args = ['--host', `unix://${this.socket}`];
  }

  /** Starts containerd and dockerd, waits for them to answer, and imports the image (about 5 s). */
  static async start(): Promise<DockerBed> {
    requireContainerTools(['/usr/sbin/dockerd', '/usr/bin/containerd', '/usr/bin/docker', '/usr/bin/mmdebstrap']);
    const bed = new DockerBed(mkdtempSync(join(tmpdir(), 'tendril-docker-')));
    try {
      await bed.startDaemons();
      bed.docker(['import', nodeImageTarball(), bed.image]);
    } catch (error) {
      await bed.stop();
      throw error;
    }
    return bed;
  }

  private async startDaemons(): Promise<void> {
    const containerdDir = join(this.dir, 'containerd');
    mkdirSync(containerdDir);
    const containerdSocket = join(containerdDir, 'containerd.sock');
    const config = join(containerdDir, 'config.toml');
    writeFileSync(
      config,
      [
        'version = 2',
        `root = "${join(containerdDir, 'root')}"`,
        `state = "${join(containerdDir, 'state')}"`,
        // Kubernetes' plugin: not needed, and it would want a CNI setup.
        'disabled_plugins = ["io.containerd.grpc.v1.cri"]',
        '[grpc]',
        `  address = "${containerdSocket}"`,
        '[debug]',
        '  address = ""',
        '',
      ].join('\n'),
    );
    const containerd = startDaemon('containerd', ['--config', config]);
    this.daemons.push(containerd);
    await waitUntil('containerd', containerd, () => existsSync(containerdSocket));
    const dockerd = startDaemon('dockerd', [
      '--containerd',
      containerdSocket,
      '--iptables=false',
      '--ip6tables=false',
      '--bridge=none',
      '--data-root',
      join(this.dir, 'data'),
      '--exec-root',
      join(this.dir, 'exec'),
      '--pidfile',
      join(this.dir, 'docker.pid'),
      '--host',
      `unix://${this.socket}`,
      '--default-ulimit',
      'nofile=1024:1024',
    ]);
    this.daemons.push(dockerd);
    await waitUntil('dockerd', dockerd, () => {
      this.docker(['version', '--format', '{{.Server.Version}}']);
      return true;
    });
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

  /** Names of the containers of this daemon, running or not. */
  containers(): string[] {
    return this.docker(['ps', '--all', '--format', '{{.Names}}']).split('\n').filter(Boolean);
  }

  /**
   * When dockerd could not remove its containers (it died, or never
   * answered), their runc state and shims outlive it: delete them with runc
   * (dockerd keeps runc's state under its exec root) and end the shims that
   * served this bed's containerd, found by its socket on their command line.
   */
  private removeLeftoverContainers(): void {
    const runcRoot = join(this.dir, 'exec', 'runtime-runc', 'moby');
    if (existsSync(runcRoot)) {
      for (const id of execFileSync('runc', ['--root', runcRoot, 'list', '--quiet'], { encoding: 'utf8' })
        .split('\n')
        .filter(Boolean)) {
        execFileSync('runc', ['--root', runcRoot, 'delete', '--force', id], { stdio: 'ignore' });
      }
    }
    const address = join(this.dir, 'containerd', 'containerd.sock');
    for (const entry of readdirSync('/proc').filter((name) => /^\d+$/.test(name))) {
      try {
        const argv = readFileSync(`/proc/${entry}/cmdline`, 'utf8').split('\0');
        if (argv[0]?.endsWith('containerd-shim-runc-v2') && argv.includes(address))
          process.kill(Number(entry), 'SIGKILL');
      } catch {
        // Ended meanwhile.
      }
    }
  }

  /**
   * Removes every container, stops dockerd (which unmounts what it
   * mounted) and then containerd, unmounts whatever is still mounted under
   * the bed, and removes its directory.
   */
  async stop(): Promise<void> {
    const [containerd, dockerd] = this.daemons;
    if (dockerd?.process.exitCode === null) {
      try {
        const ids = this.docker(['ps', '--all', '--quiet']).split('\n').filter(Boolean);
        if (ids.length > 0) this.docker(['rm', '--force', '--volumes', ...ids]);
      } catch {
        // The daemon never answered; its containers go with containerd below.
      }
    }
    if (dockerd) await stopDaemon(dockerd, 20_000);
    if (containerd) await stopDaemon(containerd, 10_000);
    this.removeLeftoverContainers();
    unmountUnder(this.dir);
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

/**
 * Command lines of the processes in a container, read from its /proc (the
 * image has no ps), one a line. `exec` runs an argv in the container with
 * the runtime's own exec and returns its stdout.
 */
export function processesIn(exec: (argv: string[]) => string): string[] {
  return exec(['sh', '-c', 'for p in /proc/[0-9]*; do tr "\\0" " " < "$p/cmdline"; echo; done'])
    .split('\n')
    .filter((line) => line.trim() !== '');
}

/** Milliseconds since `start` (a `performance.now()`), rounded. */
export const since = (start: number): number => Math.round(performance.now() - start);
