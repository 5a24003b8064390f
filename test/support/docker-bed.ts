import { execFileSync } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { bareImageTarball, nodeImageTarball, requireContainerTools } from './container-image.js';
import { type Daemon, startDaemon, stopDaemon, unmountUnder, waitUntil } from './host-processes.js';

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

  /** Imports the image without Node (`bareImageTarball`), once; returns its name. */
  bareImage(): string {
    const image = 'tendril-test-bare:latest';
    if (this.docker(['images', '--quiet', image]) === '') this.docker(['import', bareImageTarball(), image]);
    return image;
  }

  /** Starts a container of `image` (default: the test image) that idles until removed; returns its name. */
  run(name: string, extra: string[] = [], image = this.image): string {
    this.docker(['run', '--detach', '--network', 'none', '--name', name, ...extra, image, 'sleep', 'infinity']);
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
