/**
 * `lxd` and `incus`: a context in an instance of LXD (its `lxc` client)
 * or of Incus, its fork. Both clients take `--mode=non-interactive` (their
 * help: "auto, interactive or non-interactive"; Mitogen's lxd.py spells it
 * `noninteractive`, which LXD does not know and reads as `auto`); the rest
 * is the same but for what they print.
 */
import { text } from '../../core/options.js';
import type { CommonOptions } from '../bootstrap.js';
import { BootstrapError, ContainerNotFoundError, ContainerNotRunningError, NotAllowedError } from '../errors.js';
import type { ConnectionMethod } from '../method.js';
import { COMMON_OPTIONS, optionNames } from '../method-options.js';
import { failure, type ToolFailure, toolMethod } from '../tool-method.js';
import { noShell, plainName } from './names.js';

/** Options of the `lxd` method. */
export interface LxdOptions extends CommonOptions {
  /** The instance, optionally on a remote: `web` or `myremote:web`. */
  container: string;
  /** The LXD client command. Default `'lxc'`. */
  lxcPath?: string;
  /**
   * The daemon's directory, whose `unix.socket` the client talks to (the
   * client's `LXD_DIR`), e.g. `/var/snap/lxd/common/lxd` for the snap's
   * daemon. Default: the client's own (`LXD_DIR` if set, else `/var/lib/lxd`).
   */
  lxdDirectory?: string;
}

/** Options of the `incus` method. */
export interface IncusOptions extends CommonOptions {
  /** The instance, optionally on a remote: `web` or `myremote:web`. */
  container: string;
  /** The Incus client command. Default `'incus'`. */
  incusPath?: string;
  /**
   * The daemon's directory, whose `unix.socket` the client talks to (the
   * client's `INCUS_DIR`). Default: the client's own (`INCUS_DIR` if set, else `/var/lib/incus`).
   */
  incusDirectory?: string;
}

/** What LXD's and Incus's clients say, with the daemon's name. */
function instanceFailures(container: string, machine: string, daemon: string, client: string): ToolFailure[] {
  const subject = `${daemon} instance '${container}' (client on ${machine})`;
  return [
    // "Error: Command not found": before the instance's "not found", which it is not.
    noShell(subject, machine),
    failure(
      // LXD: "Error: Instance not found"; Incus: 'Failed to fetch instance "web" in project "default": Instance not found'.
      /Instance not found|^Error: not found$/im,
      ContainerNotFoundError,
      `no ${subject} (${client} list lists them)`,
    ),
    failure(
      /Instance is not running/i,
      ContainerNotRunningError,
      `${subject} is not running: ${client} start ${container}`,
    ),
    failure(
      // LXD: "dial unix .../unix.socket: connect: permission denied"; Incus: "You don't have the needed permissions to talk to the incus daemon".
      /permission denied|needed permissions/i,
      NotAllowedError,
      `this account may not use ${daemon} on ${machine}: add it to the ${daemon === 'LXD' ? 'lxd' : 'incus-admin'} group`,
    ),
    failure(
      /unix\.socket: connect|daemon doesn't appear to be started|Is the server running/i,
      BootstrapError,
      `no ${daemon} daemon answers on ${machine}: start it, or name its directory with the ${client === 'lxc' ? 'lxdDirectory' : 'incusDirectory'} option`,
    ),
  ];
}

/** `lxd`: runs the child with `lxc exec --mode=non-interactive C -- ...`. */
export const lxd: ConnectionMethod<LxdOptions> = toolMethod<LxdOptions>({
  name: 'lxd',
  optionNames: optionNames<LxdOptions>({ ...COMMON_OPTIONS, container: true, lxcPath: true, lxdDirectory: true }),
  checkOptions(options, where) {
    plainName(options.container, 'container', where, 'an LXD instance');
    text(options.lxcPath, 'lxcPath', where, undefined, 4096);
    text(options.lxdDirectory, 'lxdDirectory', where, undefined, 4096);
  },
  tool: (options) => options.lxcPath ?? 'lxc',
  toolOption: 'lxcPath',
  install: 'the lxd-client package (or the lxd snap)',
  environment: (options) =>
    options.lxdDirectory === undefined ? undefined : { ...process.env, LXD_DIR: options.lxdDirectory },
  command: (options, argv) => ['exec', '--mode=non-interactive', options.container, '--', ...argv],
  step: (options, machine) => `starting LXD instance '${options.container}' with lxc exec on ${machine}`,
  failures: (options, machine) => instanceFailures(options.container, machine, 'LXD', 'lxc'),
});

/** `incus`: runs the child with `incus exec --mode=non-interactive C -- ...`. */
export const incus: ConnectionMethod<IncusOptions> = toolMethod<IncusOptions>({
  name: 'incus',
  optionNames: optionNames<IncusOptions>({ ...COMMON_OPTIONS, container: true, incusPath: true, incusDirectory: true }),
  checkOptions(options, where) {
    plainName(options.container, 'container', where, 'an Incus instance');
    text(options.incusPath, 'incusPath', where, undefined, 4096);
    text(options.incusDirectory, 'incusDirectory', where, undefined, 4096);
  },
  tool: (options) => options.incusPath ?? 'incus',
  toolOption: 'incusPath',
  install: 'the incus-client package (or incus)',
  environment: (options) =>
    options.incusDirectory === undefined ? undefined : { ...process.env, INCUS_DIR: options.incusDirectory },
  command: (options, argv) => ['exec', '--mode=non-interactive', options.container, '--', ...argv],
  step: (options, machine) => `starting Incus instance '${options.container}' with incus exec on ${machine}`,
  failures: (options, machine) => instanceFailures(options.container, machine, 'Incus', 'incus'),
});
