/**
 * `lxc`: a context in a running LXC container, through `lxc-attach`
 * (LXC's own tools, not LXD's `lxc` client: see lxd.ts).
 */
import { existsSync } from 'node:fs';
import { homedir } from 'node:os';
import { join } from 'node:path';
import { text } from '../../core/options.js';
import type { CommonOptions } from '../bootstrap.js';
import { ContainerNotFoundError, ContainerNotRunningError, NotAllowedError } from '../errors.js';
import type { ConnectionMethod } from '../method.js';
import { COMMON_OPTIONS, optionNames } from '../method-options.js';
import { failure, toolMethod } from '../tool-method.js';
import { noShell, plainName } from './names.js';

/** Options of the `lxc` method. */
export interface LxcOptions extends CommonOptions {
  /** The container's name (`--name`). */
  container: string;
  /** The directory of the containers (`--lxcpath`). Default LXC's: `/var/lib/lxc` for root, `~/.local/share/lxc` for others. */
  lxcDirectory?: string;
  /** The lxc-attach command. Default `'lxc-attach'`. */
  lxcAttachPath?: string;
}

/** Where lxc-attach looks for containers when not told, as LXC's default lxc.lxcpath. */
function containerDirectory(options: LxcOptions): string {
  return options.lxcDirectory ?? (process.getuid?.() === 0 ? '/var/lib/lxc' : join(homedir(), '.local/share/lxc'));
}

/** `lxc`: runs the child with `lxc-attach [--lxcpath P] --clear-env --name C -- ...`. */
export const lxc: ConnectionMethod<LxcOptions> = toolMethod<LxcOptions>({
  name: 'lxc',
  optionNames: optionNames<LxcOptions>({ ...COMMON_OPTIONS, container: true, lxcDirectory: true, lxcAttachPath: true }),
  checkOptions(options, where) {
    plainName(options.container, 'container', where, 'an LXC container');
    text(options.lxcDirectory, 'lxcDirectory', where, undefined, 4096);
    text(options.lxcAttachPath, 'lxcAttachPath', where, undefined, 4096);
  },
  tool: (options) => options.lxcAttachPath ?? 'lxc-attach',
  toolOption: 'lxcAttachPath',
  // lxc-attach enters a container of this machine: the stream is a pipe.
  localStream: () => true,
  install: 'the lxc package',
  command: (options, argv) => [
    ...(options.lxcDirectory === undefined ? [] : ['--lxcpath', options.lxcDirectory]),
    // The container's own environment, not the starting context's (PATH then defaults inside).
    '--clear-env',
    '--name',
    options.container,
    '--',
    ...argv,
  ],
  step: (options, machine) => `attaching to LXC container '${options.container}' on ${machine}`,
  failures: (options, machine) => {
    const subject = `LXC container '${options.container}' on ${machine}`;
    // lxc-attach says the same ("Failed to get init pid") for a container that does not exist and one that is stopped.
    const defined = existsSync(join(containerDirectory(options), options.container, 'config'));
    return [
      failure(
        // Not root: "Insufficent privileges to control C" (LXC's spelling) or "You lack access to LXCPATH".
        /Operation not permitted|Permission denied|Insuffici?ent privileges|You lack access/i,
        NotAllowedError,
        `this account may not attach to ${subject}: attach as the account that started it (root, for a container root started: via a sudo context)`,
      ),
      defined
        ? failure(/Failed to get init pid/, ContainerNotRunningError, `${subject} is not running: start it (lxc-start)`)
        : failure(
            /Failed to get init pid/,
            ContainerNotFoundError,
            `no ${subject} in ${containerDirectory(options)} (lxc-ls lists them; lxcDirectory names another place)`,
          ),
      noShell(subject, machine),
    ];
  },
});
