/**
 * The LXD and Incus test beds: a daemon of the bed's own (its directory,
 * socket, database and a `dir` storage pool under a temporary directory;
 * no network), the test image imported as a split image, instances of it.
 * Never the system's daemon: every client call names the bed's directory
 * (LXD_DIR, INCUS_DIR). The daemon's HTTP proxy is a closed port on the
 * loopback, so its startup fetch of instance types goes nowhere but there.
 */
import { type ChildProcess, execFileSync, spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { chmodSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { nodeImageTarball, requireContainerTools } from './containers.js';

/** What differs between LXD and Incus: programs, variable, wording. */
interface Flavour {
  daemon: string;
  client: string;
  /** The client's variable for the daemon's directory. */
  variable: 'LXD_DIR' | 'INCUS_DIR';
  /** The commands that wait for the daemon, initialise it, and stop it. */
  waitready: string[];
  init: string[];
  shutdown: string[];
}

const FLAVOURS: Record<'lxd' | 'incus', Flavour> = {
  lxd: {
    daemon: '/usr/bin/lxd',
    client: 'lxc',
    variable: 'LXD_DIR',
    waitready: ['/usr/bin/lxd', 'waitready'],
    init: ['/usr/bin/lxd', 'init', '--preseed'],
    shutdown: ['/usr/bin/lxd', 'shutdown'],
  },
  incus: {
    daemon: '/usr/libexec/incus/incusd',
    client: 'incus',
    variable: 'INCUS_DIR',
    waitready: ['/usr/bin/incus', 'admin', 'waitready'],
    init: ['/usr/bin/incus', 'admin', 'init', '--preseed'],
    shutdown: ['/usr/bin/incus', 'admin', 'shutdown'],
  },
};

/** A private LXD or Incus daemon with the test image imported as `image`. */
export class InstanceBed {
  /** The daemon's directory: give it as `lxdDirectory` or `incusDirectory`. */
  readonly socketDir: string;
  readonly image = 'tendril-test-node';
  readonly dir: string;
  private readonly flavour: Flavour;
  private readonly daemon: ChildProcess;
  private readonly log: string[];
  private readonly prefix = `t${randomBytes(3).toString('hex')}`;

  private constructor(dir: string, flavour: Flavour, daemon: ChildProcess, log: string[]) {
    this.dir = dir;
    this.socketDir = join(dir, 'daemon');
    this.flavour = flavour;
    this.daemon = daemon;
    this.log = log;
  }

  /**
   * Starts the daemon, initialises it (a `dir` pool, a default profile
   * whose init is `sleep infinity`: the image has no init system) and
   * imports the image (about 10 s).
   * @throws Error with the daemon's own words when it does not come up.
   */
  static async start(kind: 'lxd' | 'incus'): Promise<InstanceBed> {
    const flavour = FLAVOURS[kind];
    requireContainerTools([flavour.daemon, `/usr/bin/${flavour.client}`, '/usr/bin/mmdebstrap']);
    const dir = mkdtempSync(join(tmpdir(), `tendril-${kind}-`));
    // The daemon runs containers as mapped uids, which must reach their root file systems under here.
    chmodSync(dir, 0o711);
    const log: string[] = [];
    const loopback = 'http://127.0.0.1:9';
    const daemon = spawn(flavour.daemon, ['--logfile', join(dir, 'daemon.log')], {
      stdio: ['ignore', 'ignore', 'pipe'],
      env: { ...process.env, [flavour.variable]: join(dir, 'daemon'), HTTPS_PROXY: loopback, HTTP_PROXY: loopback },
    });
    daemon.stderr?.on('data', (chunk: Buffer) => {
      log.push(chunk.toString());
      if (log.length > 50) log.shift();
    });
    const bed = new InstanceBed(dir, flavour, daemon, log);
    try {
      await bed.waitReady();
      mkdirSync(join(dir, 'pool'));
      bed.tool(flavour.init, preseed(join(dir, 'pool')));
      const meta = join(dir, 'meta');
      mkdirSync(meta);
      writeFileSync(
        join(meta, 'metadata.yaml'),
        `architecture: x86_64\ncreation_date: ${Math.floor(Date.now() / 1000)}\nproperties:\n  description: tendril test image\n`,
      );
      execFileSync('tar', ['--create', '--file', join(dir, 'meta.tar'), '--directory', meta, 'metadata.yaml']);
      bed.client(['image', 'import', join(dir, 'meta.tar'), nodeImageTarball(), '--alias', bed.image]);
    } catch (error) {
      await bed.stop();
      throw error;
    }
    return bed;
  }

  /** Waits for the daemon to answer (its own `waitready`), or fails with its words when it exits first. */
  private async waitReady(): Promise<void> {
    const [tool, ...args] = this.flavour.waitready as [string, ...string[]];
    const waiter = spawn(tool, [...args, '--timeout', '60'], { stdio: 'ignore', env: this.env() });
    const daemonExit = () => waiter.kill();
    this.daemon.once('exit', daemonExit);
    const code = await new Promise((resolve) => waiter.once('exit', resolve));
    this.daemon.off('exit', daemonExit);
    if (code === 0) return;
    const state = this.daemon.exitCode === null ? 'was not ready within 60 s' : `exited (${this.daemon.exitCode})`;
    throw new Error(`${this.flavour.daemon} ${state}: ${this.log.join('').trim()}`);
  }

  /** The environment of a client of this daemon. */
  env(): NodeJS.ProcessEnv {
    return { ...process.env, [this.flavour.variable]: this.socketDir };
  }

  /** Runs the client (`lxc`, `incus`) against this daemon; returns its stdout. */
  client(args: string[]): string {
    return this.tool([this.flavour.client, ...args]);
  }

  private tool(argv: string[], input?: string): string {
    return execFileSync(argv[0] as string, argv.slice(1), {
      encoding: 'utf8',
      env: this.env(),
      ...(input === undefined ? { stdio: ['ignore', 'pipe', 'pipe'] } : { input, stdio: ['pipe', 'pipe', 'pipe'] }),
    }).trim();
  }

  /** The full name of the bed's instance `short` (with the bed's prefix: cgroups are named after instances). */
  name(short: string): string {
    return `${this.prefix}-${short}`;
  }

  /** Creates and starts instance `short` of the image; returns its full name. */
  launch(short: string): string {
    const name = this.name(short);
    this.client(['launch', this.image, name]);
    return name;
  }

  /** Creates instance `short`, empty (no root file system: it is never started) and stopped; returns its full name. */
  create(short: string): string {
    const name = this.name(short);
    this.client(['init', '--empty', name]);
    return name;
  }

  /** Deletes every instance, stops the daemon, removes its directory. */
  async stop(): Promise<void> {
    if (this.daemon.exitCode === null && this.daemon.signalCode === null) {
      try {
        const names = this.client(['list', '--format', 'csv', '--columns', 'n']).split('\n').filter(Boolean);
        for (const name of names) this.client(['delete', '--force', name]);
      } catch {
        // The daemon never answered.
      }
      const exited = new Promise((resolve) => this.daemon.once('exit', resolve));
      try {
        // The daemon's own orderly exit (it unmounts what it mounted); with no instances left it is quick.
        this.tool([...this.flavour.shutdown, '--timeout', '20']);
      } catch {
        this.daemon.kill('SIGKILL');
      }
      await exited;
    }
    rmSync(this.dir, { recursive: true, force: true });
  }
}

/** The minimal initialisation: a `dir` pool, a default profile with its root disk, `sleep infinity` as init, privileged. */
function preseed(pool: string): string {
  return [
    'storage_pools:',
    '- name: default',
    '  driver: dir',
    '  config:',
    `    source: ${pool}`,
    'profiles:',
    '- name: default',
    '  config:',
    '    raw.lxc: lxc.init.cmd = /bin/sleep infinity',
    // Privileged: an unprivileged instance has its 560 MB root shifted to mapped uids first (10 s a launch here).
    '    security.privileged: "true"',
    '  devices:',
    '    root:',
    '      path: /',
    '      pool: default',
    '      type: disk',
    '',
  ].join('\n');
}
