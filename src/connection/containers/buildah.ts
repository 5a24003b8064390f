/**
 * `buildah`: a context in a buildah working container (`buildah from`),
 * to prepare an image with real code instead of RUN lines.
 */
import { text } from '../../core/options.js';
import type { CommonOptions } from '../bootstrap.js';
import { ContainerNotFoundError, UnknownUserError } from '../errors.js';
import type { ConnectionMethod } from '../method.js';
import { COMMON_OPTIONS, optionNames, strings } from '../method-options.js';
import { failure, toolMethod } from '../tool-method.js';
import { noShell, plainName } from './names.js';

/** Options of the `buildah` method. */
export interface BuildahOptions extends CommonOptions {
  /** The working container (name or ID, as `buildah from` printed it). */
  container: string;
  /** The account inside the container (`--user`, a name or `uid[:gid]`). Default: the container's own user. */
  user?: string;
  /** The buildah command. Default `'buildah'`. */
  buildahPath?: string;
  /** Global options before `run`, e.g. `['--root', '/srv/containers']`. */
  buildahArgs?: string[];
}

/** `buildah`: runs the child with `buildah run [--user U] -- CONTAINER ...`. */
export const buildah: ConnectionMethod<BuildahOptions> = toolMethod<BuildahOptions>({
  name: 'buildah',
  optionNames: optionNames<BuildahOptions>({
    ...COMMON_OPTIONS,
    container: true,
    user: true,
    buildahPath: true,
    buildahArgs: true,
  }),
  checkOptions(options, where) {
    plainName(options.container, 'container', where, 'a working container');
    text(options.user, 'user', where, undefined);
    text(options.buildahPath, 'buildahPath', where, undefined, 4096);
    strings(options.buildahArgs, 'buildahArgs', where);
  },
  tool: (options) => options.buildahPath ?? 'buildah',
  toolOption: 'buildahPath',
  install: 'the buildah package',
  command: (options, argv) => [
    ...(options.buildahArgs ?? []),
    'run',
    ...(options.user === undefined ? [] : ['--user', options.user]),
    '--',
    options.container,
    ...argv,
  ],
  step: (options, machine) => `starting working container '${options.container}' with buildah on ${machine}`,
  failures: (options, machine) => [
    failure(
      /container not known|no such container/i,
      ContainerNotFoundError,
      `no working container '${options.container}' on ${machine} for this account (buildah containers lists them)`,
    ),
    failure(
      /unknown user|no matching entries in passwd file|unable to find user/i,
      UnknownUserError,
      `user '${options.user}' does not exist in working container '${options.container}' on ${machine}`,
    ),
    noShell(`working container '${options.container}'`, machine),
  ],
});
