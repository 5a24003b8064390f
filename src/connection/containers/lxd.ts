/**
 * `lxd` and `incus`: a context in an instance of LXD (its `lxc` client)
 * or of Incus, its fork. The two clients spell the non-interactive mode
 * differently (`noninteractive`, `non-interactive`), as Mitogen's lxd.py
 * and incus.py do; the rest is the same.
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
}

/** Options of the `incus` method. */
export interface IncusOptions extends CommonOptions {
  /** The instance, optionally on a remote: `web` or `myremote:web`. */
  container: string;
  /** The Incus client command. Default `'incus'`. */
  incusPath?: string;
}

/** What LXD's and Incus's clients say, with the daemon's name. */
function instanceFailures(container: string, machine: string, daemon: string, client: string): ToolFailure[] {
  const subject = `${daemon} instance '${container}' (client on ${machine})`;
  return [
    failure(
      /Instance not found|Error: not found|Not Found/i,
      ContainerNotFoundError,
      `no ${subject} (${client} list lists them)`,
    ),
    failure(
      /Instance is not running|not running/i,
      ContainerNotRunningError,
      `${subject} is not running: ${client} start ${container}`,
    ),
    failure(
      /permission denied/i,
      NotAllowedError,
      `this account may not use ${daemon} on ${machine}: add it to the ${daemon === 'LXD' ? 'lxd' : 'incus-admin'} group`,
    ),
    failure(
      /unix\.socket: connect|daemon doesn't appear to be started|Is the server running/i,
      BootstrapError,
      `no ${daemon} daemon answers on ${machine}`,
    ),
    noShell(subject, machine),
  ];
}

/** `lxd`: runs the child with `lxc exec --mode=noninteractive C -- ...`. */
export const lxd: ConnectionMethod<LxdOptions> = toolMethod<LxdOptions>({
  name: 'lxd',
  optionNames: optionNames<LxdOptions>({ ...COMMON_OPTIONS, container: true, lxcPath: true }),
  checkOptions(options, where) {
    plainName(options.container, 'container', where, 'an LXD instance');
    text(options.lxcPath, 'lxcPath', where, undefined, 4096);
  },
  tool: (options) => options.lxcPath ?? 'lxc',
  toolOption: 'lxcPath',
  install: 'the lxd-client package (or the lxd snap)',
  command: (options, argv) => [
    options.lxcPath ?? 'lxc',
    'exec',
    '--mode=noninteractive',
    options.container,
    '--',
    ...argv,
  ],
  step: (options, machine) => `starting LXD instance '${options.container}' with lxc exec on ${machine}`,
  failures: (options, machine) => instanceFailures(options.container, machine, 'LXD', 'lxc'),
});

/** `incus`: runs the child with `incus exec --mode=non-interactive C -- ...`. */
export const incus: ConnectionMethod<IncusOptions> = toolMethod<IncusOptions>({
  name: 'incus',
  optionNames: optionNames<IncusOptions>({ ...COMMON_OPTIONS, container: true, incusPath: true }),
  checkOptions(options, where) {
    plainName(options.container, 'container', where, 'an Incus instance');
    text(options.incusPath, 'incusPath', where, undefined, 4096);
  },
  tool: (options) => options.incusPath ?? 'incus',
  toolOption: 'incusPath',
  install: 'the incus-client package (or incus)',
  command: (options, argv) => [
    options.incusPath ?? 'incus',
    'exec',
    '--mode=non-interactive',
    options.container,
    '--',
    ...argv,
  ],
  step: (options, machine) => `starting Incus instance '${options.container}' with incus exec on ${machine}`,
  failures: (options, machine) => instanceFailures(options.container, machine, 'Incus', 'incus'),
});
