/**
 * The LXC test bed: containers of the test image under a private lxcpath
 * (never LXC's own /var/lib/lxc), each with a hand-written config (no
 * network, `sleep infinity` as init: the image has no init system) and an
 * overlay root over one unpacked copy of the image, so that a container's
 * changes stay its own. Container names carry a random prefix: LXC names
 * its cgroups after the container, whatever its lxcpath, and other runs on
 * this machine may have containers of the same short name.
 */
import { execFileSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { requireContainerTools } from './containers.js';
import { unpackNodeImage } from './rootfs.js';

/** A private lxcpath with the test image unpacked, and the containers made in it. */
export class LxcBed {
  /** The lxcpath: give it as `lxcDirectory` (or `--lxcpath` in `runtimeArgs`). */
  readonly dir: string;
  private readonly image: string;
  private readonly prefix = `t${randomBytes(3).toString('hex')}`;
  private readonly made: string[] = [];

  private constructor(dir: string) {
    this.dir = dir;
    this.image = join(dir, '.image');
  }

  /** A new lxcpath under a temporary directory, with the image unpacked (about 4 s). */
  static start(): LxcBed {
    requireContainerTools(['/usr/bin/lxc-start', '/usr/bin/lxc-attach', '/usr/bin/lxc-info', '/usr/bin/mmdebstrap']);
    const bed = new LxcBed(mkdtempSync(join(tmpdir(), 'tendril-lxc-')));
    try {
      unpackNodeImage(bed.image);
    } catch (error) {
      bed.stop();
      throw error;
    }
    return bed;
  }

  /** The full name of the bed's container `short` (with the bed's prefix). */
  name(short: string): string {
    return `${this.prefix}-${short}`;
  }

  /** Writes the config of container `short` without starting it; returns its full name. */
  define(short: string): string {
    const name = this.name(short);
    const home = join(this.dir, name);
    mkdirSync(home);
    writeFileSync(
      join(home, 'config'),
      [
        `lxc.uts.name = ${name}`,
        `lxc.rootfs.path = overlay:${this.image}:${join(home, 'delta')}`,
        'lxc.net.0.type = empty',
        'lxc.init.cmd = /bin/sleep infinity',
        'lxc.apparmor.profile = unconfined',
        'lxc.mount.auto = proc:mixed sys:ro cgroup:mixed',
        'lxc.tty.max = 0',
        'lxc.pty.max = 16',
        '',
      ].join('\n'),
    );
    this.made.push(name);
    return name;
  }

  /** Defines and starts container `short`, which idles until stopped; returns its full name. */
  run(short: string): string {
    const name = this.define(short);
    this.lxc('lxc-start', ['--name', name]);
    this.lxc('lxc-wait', ['--name', name, '--state', 'RUNNING', '--timeout', '30']);
    return name;
  }

  /** Runs `argv` in a running container as root (lxc-attach); returns its stdout. */
  attach(name: string, argv: string[]): string {
    return this.lxc('lxc-attach', ['--clear-env', '--name', name, '--', ...argv]);
  }

  /** The leader (init) process of a running container, as lxc-info tells it. */
  pid(name: string): number {
    return Number(this.lxc('lxc-info', ['--name', name, '--pid', '--no-humanize']));
  }

  /** Runs an LXC tool on this lxcpath; returns its stdout. */
  lxc(tool: string, args: string[]): string {
    return execFileSync(tool, ['--lxcpath', this.dir, ...args], {
      encoding: 'utf8',
      stdio: ['ignore', 'pipe', 'pipe'],
    }).trim();
  }

  /** Kills every container of the bed, then removes the lxcpath. */
  stop(): void {
    for (const name of this.made) {
      try {
        this.lxc('lxc-stop', ['--name', name, '--kill']);
      } catch {
        // Never started, or already stopped.
      }
    }
    rmSync(this.dir, { recursive: true, force: true });
  }
}
