import { execFileSync, spawn } from 'node:child_process';
import { chmodSync, closeSync, existsSync, mkdirSync, mkdtempSync, openSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { bareImageTarball, CONTAINER_LIMITS, nodeImageTarball, requireContainerTools } from './container-image.js';
import { startDaemon, stopDaemon, unmountUnder, waitForProcessesNaming, waitUntil } from './host-processes.js';

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

  /** Imports the image without Node (`bareImageTarball`), once; returns its name. */
  bareImage(): string {
    const image = 'localhost/tendril-test-bare:latest';
    if (this.podman(['images', '--quiet', image]) === '') {
      const tarball = openSync(bareImageTarball(), 'r');
      try {
        this.podman(['import', '--quiet', '-', image], tarball);
      } finally {
        closeSync(tarball);
      }
    }
    return image;
  }

  /** Starts a container of `image` (default: the test image) that idles until removed; returns its name. */
  run(name: string, extra: string[] = [], image = this.image): string {
    this.podman(RUN(this, name, extra, image));
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

/** podman's arguments that import the test image from stdin. */
const IMPORT = (bed: PodmanBed) => ['import', '--quiet', '-', bed.image];

/** podman's arguments that start an idle container of the test image. */
const RUN = (bed: PodmanBed, name: string, extra: string[], image = bed.image) => [
  'run',
  '--detach',
  '--name',
  name,
  ...CONTAINER_LIMITS,
  ...extra,
  image,
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
