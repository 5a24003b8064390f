/**
 * `docker` and `podman`: a context in a running container (`exec`), or in
 * a throwaway container of an image that lives as long as the context
 * (`run --rm`). The two CLIs take the same arguments; they differ in their
 * messages, which each method reads for its own typed errors.
 */
import { InvalidOptionError } from '../../core/errors.js';
import { text } from '../../core/options.js';
import type { CommonOptions } from '../bootstrap.js';
import {
  BootstrapError,
  ContainerNotFoundError,
  ContainerNotRunningError,
  NotAllowedError,
  UnknownUserError,
} from '../errors.js';
import type { ConnectionMethod } from '../method.js';
import { COMMON_OPTIONS, optionNames, strings } from '../method-options.js';
import { accountName, type FailureClass, failure, type ToolFailure, toolMethod } from '../tool-method.js';
import { noShell } from './names.js';

/** Options of the `docker` and `podman` methods (the path option is each one's own). */
export interface EngineOptions extends CommonOptions {
  /** The running container to enter (name or ID): `exec --interactive`. Exactly one of `container` and `image`. */
  container?: string;
  /**
   * An image to start a throwaway container from: `run --interactive --rm`,
   * removed when the context ends. Exactly one of `container` and `image`.
   * A missing image is pulled by the engine (within `connectTimeout`).
   */
  image?: string;
  /** The account inside the container (`--user`, a name or `uid[:gid]`). Default: the container's own user. */
  user?: string;
  /** Options of `run` before the image, with `image` (e.g. `['--network', 'none', '-v', '/srv:/srv']`). */
  runArgs?: string[];
}

/** Options of the `docker` method. */
export interface DockerOptions extends EngineOptions {
  /** The docker command. Default `'docker'`. */
  dockerPath?: string;
  /** Global options before the subcommand, e.g. `['--host', 'unix:///run/user/1000/docker.sock']` or `['--context', 'prod']`. */
  dockerArgs?: string[];
}

/** Options of the `podman` method. */
export interface PodmanOptions extends EngineOptions {
  /** The podman command. Default `'podman'`. */
  podmanPath?: string;
  /** Global options before the subcommand, e.g. `['--remote']`, `['--root', '/srv/containers']`. */
  podmanArgs?: string[];
}

const ENGINE_OPTIONS = { ...COMMON_OPTIONS, container: true, image: true, user: true, runArgs: true } as const;

/** `container` or `image`, checked: exactly one, each a name the engine could take. */
function checkEngineOptions(options: EngineOptions, where: string): void {
  const container = text(options.container, 'container', where, undefined);
  const image = text(options.image, 'image', where, undefined, 4096);
  if ((container === undefined) === (image === undefined)) {
    throw new InvalidOptionError(
      container === undefined ? 'container' : 'image',
      where,
      'exactly one of container (a running container to enter) and image (to start a throwaway container from)',
      container === undefined ? undefined : options.image,
    );
  }
  // A leading '-' would be read as an option of exec or run, not as the container or image.
  if ((container ?? image ?? '').startsWith('-')) {
    throw new InvalidOptionError(
      container ? 'container' : 'image',
      where,
      'a name that does not start with -',
      container ?? image,
    );
  }
  text(options.user, 'user', where, undefined);
  strings(options.runArgs, 'runArgs', where);
  if (options.runArgs !== undefined && container !== undefined) {
    throw new InvalidOptionError(
      'runArgs',
      where,
      'only given with image (exec takes no run options)',
      options.runArgs,
    );
  }
}

/** The arguments after the global ones: `exec` into `container`, or `run` of `image`. */
function engineArgs(options: EngineOptions, argv: string[]): string[] {
  const user = options.user === undefined ? [] : ['--user', options.user];
  return options.container !== undefined
    ? ['exec', '--interactive', ...user, options.container, ...argv]
    : ['run', '--interactive', '--rm', ...user, ...(options.runArgs ?? []), options.image as string, ...argv];
}

/**
 * A complaint whose message quotes part of it: `what` gets the match, whose
 * groups may be undefined when the tool's wording left them out. What they
 * capture is the tool's output: patterns keep it short and free of spaces.
 */
function quoting(pattern: RegExp, Class: FailureClass, what: (found: RegExpExecArray) => string): ToolFailure {
  return {
    pattern,
    error: (contextName, lastOutput) =>
      new Class(contextName, what(pattern.exec(lastOutput) as RegExpExecArray), lastOutput),
  };
}

/** ` at ADDRESS` when the client named one, else nothing: for messages about a daemon or socket. */
const at = (address: string | undefined) => (address === undefined ? '' : ` at ${address}`);

/**
 * The Docker daemon's address as the client quotes it, (1) in the match:
 * `Cannot connect to the Docker daemon at unix:///var/run/docker.sock. Is
 * the docker daemon running?`, `permission denied while trying to connect
 * to the Docker daemon socket at unix:///...: Get ...`.
 */
const DOCKER_ADDRESS = String.raw`(?: socket)?(?: at ([a-z]+://[^\s"']{1,200}?)[.:]?(?=\s|$))?`;

/**
 * The socket podman --remote tried, (1) in the match: `dial unix /run/podman/podman.sock: connect: ...`.
 * What comes before it may not hold the message's start again, so each run is scanned from one start
 * (`.*` was quadratic on a line repeating it).
 */
const PODMAN_SOCKET = String.raw`(?:(?:(?!unable to connect to Podman socket)[^\n])*dial unix (/[^\s:"']{1,200}))?`;

/** What the container or image is called in messages. */
function subject(options: EngineOptions): string {
  return options.container !== undefined ? `container '${options.container}'` : `image '${options.image}'`;
}

/**
 * `docker`: a context in a container of the Docker engine on the machine
 * of the context that starts it.
 */
export const docker: ConnectionMethod<DockerOptions> = toolMethod<DockerOptions>({
  name: 'docker',
  optionNames: optionNames<DockerOptions>({ ...ENGINE_OPTIONS, dockerPath: true, dockerArgs: true }),
  checkOptions(options, where) {
    checkEngineOptions(options, where);
    text(options.dockerPath, 'dockerPath', where, undefined, 4096);
    strings(options.dockerArgs, 'dockerArgs', where);
  },
  tool: (options) => options.dockerPath ?? 'docker',
  toolOption: 'dockerPath',
  install: "the Docker engine's client (Debian: docker.io; Docker's own: docker-ce-cli)",
  command: (options, argv) => [...(options.dockerArgs ?? []), ...engineArgs(options, argv)],
  step: (options, machine) => `starting ${subject(options)} with docker on ${machine}`,
  failures: (options, machine) => [
    failure(
      /No such container/i,
      ContainerNotFoundError,
      `no ${subject(options)} on ${machine} (docker ps -a lists them)`,
    ),
    // Checked before "not running": the engine says "is paused", and the remedy differs.
    failure(
      /is paused/i,
      ContainerNotRunningError,
      `${subject(options)} on ${machine} is paused: unpause it (docker unpause ${options.container})`,
    ),
    failure(
      /is not running|is restarting/i,
      ContainerNotRunningError,
      `${subject(options)} on ${machine} is not running: start it (docker start ${options.container})`,
    ),
    quoting(
      new RegExp(`permission denied while trying to connect to the Docker daemon${DOCKER_ADDRESS}`, 'i'),
      NotAllowedError,
      ([, address]) =>
        `this account (${accountName()}) may not use the Docker daemon on ${machine}${at(address)}: add it to the docker group, or start the context via sudo`,
    ),
    quoting(
      new RegExp(`Cannot connect to the Docker daemon${DOCKER_ADDRESS}`, 'i'),
      BootstrapError,
      ([, address]) =>
        `no Docker daemon answers on ${machine}${at(address)}: start it, or point dockerArgs (--host, --context) or DOCKER_HOST at one`,
    ),
    failure(
      /unable to find user|no matching entries in passwd file|no users found/i,
      UnknownUserError,
      `user '${options.user}' does not exist in ${subject(options)} on ${machine}`,
    ),
    failure(
      /Unable to find image|pull access denied|manifest unknown|repository does not exist|No such image/i,
      ContainerNotFoundError,
      `${subject(options)} is not on ${machine} and could not be pulled`,
    ),
    noShell(subject(options), machine),
  ],
});

/**
 * `podman`: a context in a container of Podman (root or rootless: the
 * containers of the account that runs podman) on the machine of the
 * context that starts it.
 */
export const podman: ConnectionMethod<PodmanOptions> = toolMethod<PodmanOptions>({
  name: 'podman',
  optionNames: optionNames<PodmanOptions>({ ...ENGINE_OPTIONS, podmanPath: true, podmanArgs: true }),
  checkOptions(options, where) {
    checkEngineOptions(options, where);
    text(options.podmanPath, 'podmanPath', where, undefined, 4096);
    strings(options.podmanArgs, 'podmanArgs', where);
  },
  tool: (options) => options.podmanPath ?? 'podman',
  toolOption: 'podmanPath',
  install: 'the podman package',
  command: (options, argv) => [...(options.podmanArgs ?? []), ...engineArgs(options, argv)],
  step: (options, machine) => `starting ${subject(options)} with podman on ${machine}`,
  failures: (options, machine) => [
    failure(
      // A name has no spaces: `\S+`, not `.*`, which was quadratic on a line repeating the message.
      /no container with name or ID \S+ found|no such container/i,
      ContainerNotFoundError,
      `no ${subject(options)} on ${machine} for this account (podman ps -a lists them; rootless podman sees only its own)`,
    ),
    // Podman says the same of a stopped and of a paused container.
    failure(
      /can only create exec sessions on running containers|container state improper/i,
      ContainerNotRunningError,
      `${subject(options)} on ${machine} is not running: start it (podman start ${options.container}), or unpause it (podman unpause ${options.container})`,
    ),
    // podman --remote: its socket refused this account, or nothing listens there.
    quoting(
      new RegExp(`unable to connect to Podman socket${PODMAN_SOCKET}: connect: permission denied`, 'i'),
      NotAllowedError,
      ([, socket]) =>
        `this account (${accountName()}) may not use the Podman socket on ${machine}${at(socket && `unix://${socket}`)}: give it access to the socket, or start the context via sudo`,
    ),
    quoting(
      new RegExp(`unable to connect to Podman socket${PODMAN_SOCKET}`, 'i'),
      BootstrapError,
      ([, socket]) =>
        `no Podman service answers on ${machine}${at(socket && `unix://${socket}`)}: start it (podman system service), or point podmanArgs (--url, --connection) or CONTAINER_HOST at one`,
    ),
    // Rootless podman keeps runc's state under XDG_RUNTIME_DIR, which sudo and su reset: another
    // value than the one the container was started with, and runc finds no such container.
    failure(
      /runc: exec failed: container does not exist/i,
      BootstrapError,
      `podman on ${machine} has ${subject(options)} but its runtime (runc) does not: rootless podman keeps runc's state under XDG_RUNTIME_DIR, so start the context with the XDG_RUNTIME_DIR of the session that started the container (through sudo: sudoArgs: ['XDG_RUNTIME_DIR=/run/user/<uid>'])`,
    ),
    // Another account's store (--root, --runroot in podmanArgs): podman cannot even open it.
    quoting(
      /^Error: .*?(?:mkdir|open|stat|lstat) (\/[^\s:"']{1,200}): permission denied/im,
      NotAllowedError,
      ([, path]) =>
        `this account (${accountName()}) may not use the Podman store on ${machine} (${path}): start the context as the account that owns it (via sudo), or give podmanArgs --root and --runroot of this account's own`,
    ),
    failure(
      /unable to find user|no matching entries in passwd file|unknown user/i,
      UnknownUserError,
      `user '${options.user}' does not exist in ${subject(options)} on ${machine}`,
    ),
    failure(
      /image not known|initializing source|manifest unknown|requested access to the resource is denied|short-name \S+ did not resolve/i,
      ContainerNotFoundError,
      `${subject(options)} is not on ${machine} and could not be pulled`,
    ),
    noShell(subject(options), machine),
  ],
});
