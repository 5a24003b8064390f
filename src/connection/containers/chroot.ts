/**
 * `chroot`: a context whose root directory is another tree on the same
 * machine (a mounted image, a build root, a rescue system), as root.
 */
import { text } from '../../core/options.js';
import type { CommonOptions } from '../bootstrap.js';
import { ContainerNotFoundError, NotAllowedError, UnknownUserError } from '../errors.js';
import type { ConnectionMethod } from '../method.js';
import { COMMON_OPTIONS, optionNames } from '../method-options.js';
import { failure, toolMethod } from '../tool-method.js';
import { noShell, plainName } from './names.js';

/** Options of the `chroot` method. */
export interface ChrootOptions extends CommonOptions {
  /** The new root directory. */
  path: string;
  /** The account to run as, from the tree's own passwd and group files (`--userspec`, `user[:group]`). Default: root. */
  user?: string;
  /** The chroot command. Default `'chroot'` (coreutils). */
  chrootPath?: string;
}

/** `chroot`: runs the child with `chroot [--userspec U] PATH ...`. */
export const chroot: ConnectionMethod<ChrootOptions> = toolMethod<ChrootOptions>({
  name: 'chroot',
  optionNames: optionNames<ChrootOptions>({ ...COMMON_OPTIONS, path: true, user: true, chrootPath: true }),
  checkOptions(options, where) {
    plainName(options.path, 'path', where, 'a directory');
    text(options.user, 'user', where, undefined);
    text(options.chrootPath, 'chrootPath', where, undefined, 4096);
  },
  tool: (options) => options.chrootPath ?? 'chroot',
  toolOption: 'chrootPath',
  // The tree is on this machine: the stream is a pipe.
  localStream: () => true,
  install: 'coreutils',
  command: (options, argv) => [
    ...(options.user === undefined ? [] : [`--userspec=${options.user}`]),
    options.path,
    ...argv,
  ],
  step: (options, machine) => `entering ${options.path} with chroot on ${machine}`,
  failures: (options, machine) => [
    // The path may not hold the message's start again: each run is scanned from one start (`.*` was quadratic).
    failure(
      /cannot change root directory to (?:(?!cannot change root directory to )[^\n])*: (?:No such file or directory|Not a directory)/,
      ContainerNotFoundError,
      `no directory ${options.path} on ${machine} to chroot into`,
    ),
    failure(
      /cannot change root directory to (?:(?!cannot change root directory to )[^\n])*: Permission denied/,
      NotAllowedError,
      `this account may not reach ${options.path} on ${machine} (a directory on the way is closed to it)`,
    ),
    failure(
      /Operation not permitted/,
      NotAllowedError,
      `chroot needs root on ${machine}: start the context as root (via a sudo context)`,
    ),
    failure(
      /invalid user|invalid group|no group specified for unknown uid|invalid spec/i,
      UnknownUserError,
      `user '${options.user}' does not exist in ${options.path}/etc/passwd on ${machine}`,
    ),
    noShell(`the tree ${options.path}`, machine),
  ],
});
