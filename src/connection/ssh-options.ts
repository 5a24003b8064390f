/** What `router.ssh()` takes: the destination, its jump hosts, and how to authenticate to and check each. */
import { InvalidOptionError } from '../core/errors.js';
import { boolean, integer, knownOptions, milliseconds, optionsObject, text } from '../core/options.js';
import type { CommonOptions } from './bootstrap.js';
import { COMMON_OPTIONS, optionNames, requireHostname, secret } from './method-options.js';

/** How unknown and changed host keys are treated. */
export type HostKeyPolicy = 'strict' | 'accept-new' | 'ignore';

/**
 * One SSH host and what to authenticate to it and check it with: the
 * destination of `router.ssh()`, or a jump host in the array form of
 * `proxyJump` (for programs without an ssh config, or to give a jump host
 * credentials of its own). These reach only that host: a destination's
 * never reach its jump hosts. Whatever is not given comes from the ssh
 * config for `hostname`, as for any host.
 */
export interface SshJumpHost {
  /** Host name or address, or a `Host` alias of the ssh config. */
  hostname: string;
  /** Port. Wins over the ssh config (like `ssh -p`). Default: the ssh config's Port, else 22. */
  port?: number;
  /** Account. Wins over the ssh config and is what `Match user` sees (like `ssh -l`). Default: the ssh config's User, else the local account's name. */
  username?: string;
  /**
   * Path of a private key. When given (or `privateKey` is), the ssh
   * config's IdentityFile entries are not used for this host. Default: the
   * ssh config's IdentityFile, else `~/.ssh/id_rsa`, `id_ecdsa`, `id_ed25519`,
   * `id_dsa` (those that exist; as OpenSSH).
   */
  identityFile?: string;
  /** A private key itself (PEM or OpenSSH format), instead of `identityFile`. */
  privateKey?: string | Buffer;
  /** Passphrase of this host's encrypted private key. */
  passphrase?: string;
  /** Password, for password and keyboard-interactive authentication to this host. */
  password?: string;
  /** An ssh-agent socket path, or true for `$SSH_AUTH_SOCK`, or false for none. Default: the ssh config's IdentityAgent, else `$SSH_AUTH_SOCK` if set. */
  agent?: string | boolean;
  /**
   * `strict`: only keys on record; `accept-new`: record the key of a host
   * not yet known (a changed key is still refused); `ignore`: no check.
   * Default: the ssh config's StrictHostKeyChecking (yes and ask: strict;
   * accept-new; no: record new keys and accept changed ones without
   * password authentication, as OpenSSH), else `strict`.
   */
  hostKeyPolicy?: HostKeyPolicy;
  /** known_hosts file, read and written, instead of the ssh config's UserKnownHostsFile. Default: UserKnownHostsFile, else `~/.ssh/known_hosts` (and `known_hosts2`). GlobalKnownHostsFile is read either way. */
  knownHostsFile?: string;
}

/** Options of the `ssh` connection method (over ssh2, in JavaScript): the destination host, and how to reach it. */
export interface SshOptions extends CommonOptions, SshJumpHost {
  /**
   * Jump hosts, like `ssh -J`: a string `[user@]host[:port]` separated by
   * commas (each hop then uses only its own ssh config), or an array of
   * `SshJumpHost` (each with its own credentials and checks), first hop
   * first. Default: the ssh config's ProxyJump.
   */
  proxyJump?: string | SshJumpHost[];
  /** Milliseconds between keepalive probes; the link is declared dead after ServerAliveCountMax (default 3) unanswered. Default: the ssh config's ServerAliveInterval, else 15000. 0 disables. */
  keepaliveInterval?: number;
  /** An OpenSSH client config file to honour instead of `~/.ssh/config` and `/etc/ssh/ssh_config` (like `ssh -F`), or false for none. */
  sshConfig?: string | false;
  /**
   * Run the ssh config's `Match exec` commands (with `/bin/sh -c`, in the
   * context that connects), as OpenSSH does. Default false: they count as
   * commands that failed, so a config file never makes tendril run anything.
   */
  matchExec?: boolean;
}

/** The keys of one host: the destination, or a jump host in the array form of `proxyJump`. */
const HOST_OPTIONS: Record<keyof Required<SshJumpHost>, true> = {
  hostname: true,
  port: true,
  username: true,
  identityFile: true,
  privateKey: true,
  passphrase: true,
  password: true,
  agent: true,
  hostKeyPolicy: true,
  knownHostsFile: true,
};

/** The keys of a jump host in the array form of `proxyJump`. */
const JUMP_HOST_NAMES = optionNames<SshJumpHost>(HOST_OPTIONS);

/** The options of `router.ssh()`. */
export const SSH_OPTION_NAMES = optionNames<SshOptions>({
  ...COMMON_OPTIONS,
  ...HOST_OPTIONS,
  proxyJump: true,
  keepaliveInterval: true,
  sshConfig: true,
  matchExec: true,
});

/** Longest path option. */
const MAX_PATH = 4096;

/**
 * Checks what `ssh` and `openssh` share: the host and how to log in to and
 * check it.
 * @throws InvalidOptionError naming the first bad option.
 */
export function checkHostOptions(
  options: Partial<Pick<SshJumpHost, 'hostname' | 'port' | 'username' | 'identityFile' | 'passphrase' | 'password'>> & {
    hostKeyPolicy?: unknown;
    knownHostsFile?: unknown;
  },
  known: ReadonlySet<string>,
  where: string,
): void {
  requireHostname(options, known, where);
  integer(options.port, 'port', where, undefined, 1, 65_535);
  text(options.username, 'username', where, undefined);
  text(options.identityFile, 'identityFile', where, undefined, MAX_PATH);
  secret(options.passphrase, 'passphrase', where);
  secret(options.password, 'password', where);
  const policy = options.hostKeyPolicy;
  if (policy !== undefined && policy !== 'strict' && policy !== 'accept-new' && policy !== 'ignore') {
    throw new InvalidOptionError('hostKeyPolicy', where, "'strict', 'accept-new' or 'ignore'", policy);
  }
  text(options.knownHostsFile, 'knownHostsFile', where, undefined, MAX_PATH);
}

/**
 * Checks the values of `router.ssh()`'s own options (jump hosts of the
 * array form included, each against the keys of `SshJumpHost`).
 * @throws InvalidOptionError naming the first bad option.
 */
export function checkSshOptions(options: SshOptions, where: string): void {
  checkHostOptions(options, SSH_OPTION_NAMES, where);
  checkHostCredentials(options, where);
  const { proxyJump } = options;
  if (Array.isArray(proxyJump)) {
    proxyJump.forEach((jump: unknown, i) => {
      const at = `${where} proxyJump[${i}]`;
      const entry = optionsObject(jump as SshJumpHost, at);
      checkHostOptions(entry, JUMP_HOST_NAMES, at);
      checkHostCredentials(entry, at);
      knownOptions(entry, JUMP_HOST_NAMES, at);
    });
  } else if (proxyJump !== undefined) {
    text(proxyJump, 'proxyJump', where, undefined, MAX_PATH);
  }
  milliseconds(options.keepaliveInterval, 'keepaliveInterval', where, undefined);
  if (options.sshConfig !== undefined && options.sshConfig !== false) {
    text(options.sshConfig, 'sshConfig', where, undefined, MAX_PATH);
  }
  boolean(options.matchExec, 'matchExec', where);
}

/** The credentials only `ssh` takes: a key itself, and the agent. */
function checkHostCredentials(options: Pick<SshJumpHost, 'privateKey' | 'agent'>, where: string): void {
  const { privateKey, agent } = options;
  if (privateKey !== undefined && typeof privateKey !== 'string' && !(privateKey instanceof Uint8Array)) {
    throw new InvalidOptionError('privateKey', where, 'a string or a Buffer', privateKey);
  }
  if (agent !== undefined && typeof agent !== 'boolean') text(agent, 'agent', where, undefined, MAX_PATH);
}
