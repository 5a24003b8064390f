/**
 * What `ssh -G` would say about a host, and the hops of its ProxyJump
 * chain: the config read in passes, then defaults and expansions applied
 * in the order ssh.c applies them, so each field is what OpenSSH would use.
 */
import { isIP } from 'node:net';
import { homedir, userInfo } from 'node:os';
import { connectionTokens, expandTilde, expandTokens } from './expand.js';
import { formatJumpHost, formatJumpSetting, type JumpHost, parseJumpSetting, parseProxyJump } from './proxy-jump.js';
import { ConfigReader } from './reader.js';
import type { Local, Settings, StrictHostKeyChecking } from './settings.js';

/** What tendril will use for one host, after the ssh config and defaults (the fields `ssh -G` prints). */
export interface ResolvedHost {
  /** The name asked for, before HostName (OpenSSH's `%n`). */
  host: string;
  /** The name or address to connect to: HostName with `%h` expanded, lowercased unless an address. */
  hostname: string;
  /** TCP port; 22 unless set. */
  port: number;
  /** Remote account; the local account's name unless set. */
  user: string;
  /**
   * Private key files to try, in order, with `~`, tokens and `${VAR}`
   * expanded: the IdentityFile entries, else OpenSSH's defaults
   * (`~/.ssh/id_rsa`, `id_ecdsa`, `id_ecdsa_sk`, `id_ed25519`,
   * `id_ed25519_sk`, `id_xmss`, `id_dsa`). Files that do not exist are
   * skipped when connecting.
   */
  identityFiles: string[];
  /** True when `identityFiles` come from IdentityFile lines, false when they are OpenSSH's defaults. */
  identityFilesConfigured: boolean;
  /** UserKnownHostsFile, expanded (default `~/.ssh/known_hosts`, `~/.ssh/known_hosts2`; `none`: empty). New keys are recorded in the first. */
  userKnownHostsFiles: string[];
  /** GlobalKnownHostsFile, `~` expanded (default `/etc/ssh/ssh_known_hosts`, `/etc/ssh/ssh_known_hosts2`; `none`: empty). Read only. */
  globalKnownHostsFiles: string[];
  /** StrictHostKeyChecking; `ask` unless set. */
  strictHostKeyChecking: StrictHostKeyChecking;
  /** IdentitiesOnly: offer only the configured identities (agent keys only when they are among them). */
  identitiesOnly: boolean;
  /** IdentityAgent as `ssh -G` prints it: a path (expanded), `none`, `SSH_AUTH_SOCK` or `$VARIABLE`; undefined: `$SSH_AUTH_SOCK`. */
  identityAgent: string | undefined;
  /** ProxyJump as `ssh -G` prints it (the hops before the last as written, the last as `[user@]host[:port]`); undefined: none. */
  proxyJump: string | undefined;
  /** ProxyCommand, unexpanded; undefined: none. The `ssh` method cannot run one. */
  proxyCommand: string | undefined;
  /** ConnectTimeout in seconds; undefined: none. */
  connectTimeout: number | undefined;
  /** ServerAliveInterval in seconds; undefined when not set (OpenSSH then sends none; tendril probes every 15 s). */
  serverAliveInterval: number | undefined;
  /** ServerAliveCountMax; 3 unless set. */
  serverAliveCountMax: number;
  /** HashKnownHosts: record new host keys under hashed names. */
  hashKnownHosts: boolean;
  /** HostKeyAlias (lowercased): the name looked up in known_hosts instead of host and port. */
  hostKeyAlias: string | undefined;
  /** The config files read, in order, for messages. */
  configFiles: string[];
}

/** Where the configuration comes from and what stands in for ssh's command line. */
export interface SshConfigOptions {
  /**
   * `undefined`: `~/.ssh/config`, then `/etc/ssh/ssh_config` (as `ssh`
   * does); a path: that file only (`ssh -F path`); `false`: no file, only
   * defaults (`ssh -F none`).
   */
  configFile?: string | false;
  /** Remote account given outside the config (`ssh -l`): wins over User, and `Match user` and `%r` see it. */
  user?: string;
  /** Port given outside the config (`ssh -p`): wins over Port. */
  port?: number;
  /** Jump hosts given outside the config (`ssh -J`): win over ProxyJump. */
  proxyJump?: string;
  /** Home directory for `~`, `%d` and relative Includes. Default `os.homedir()`. */
  home?: string;
  /** Local account name for `%u` and `Match localuser`. Default `os.userInfo().username`. */
  localUser?: string;
  /** Environment for `${VAR}` and `$VAR`. Default `process.env`. */
  env?: Record<string, string | undefined>;
  /**
   * Run the commands of `Match exec` lines with `/bin/sh -c`, as OpenSSH
   * does, a zero exit status matching. Default false: they count as
   * commands that failed, so reading a config never runs anything.
   */
  matchExec?: boolean;
}

/** A hop of a resolved chain: its settings, and the jump spec it was reached by (undefined for the destination). */
export interface ResolvedHop<J extends JumpHost = JumpHost> extends ResolvedHost {
  /** The ProxyJump entry (or the object given in the array form) this hop came from; undefined for the destination. */
  jump: J | undefined;
}

/** Hops in one ProxyJump chain, counting the ones jump hosts bring from the config; past it, a loop is assumed. */
export const MAX_JUMP_HOPS = 16;

const DEFAULT_IDENTITY_FILES = [
  '~/.ssh/id_rsa',
  '~/.ssh/id_ecdsa',
  '~/.ssh/id_ecdsa_sk',
  '~/.ssh/id_ed25519',
  '~/.ssh/id_ed25519_sk',
  '~/.ssh/id_xmss',
  '~/.ssh/id_dsa',
];
const DEFAULT_USER_KNOWN_HOSTS = ['~/.ssh/known_hosts', '~/.ssh/known_hosts2'];
const DEFAULT_GLOBAL_KNOWN_HOSTS = ['/etc/ssh/ssh_known_hosts', '/etc/ssh/ssh_known_hosts2'];

/**
 * Resolves `host` as `ssh -G` would: reads the config files, applies
 * `Host`/`Match` blocks, Includes, a `Match final` pass, defaults, and
 * expands `~`, tokens and `${VAR}` in IdentityFile, UserKnownHostsFile and
 * IdentityAgent (`%%`, `%C`, `%d`, `%h`, `%i`, `%k`, `%L`, `%l`, `%n`,
 * `%p`, `%r`, `%u`) and HostName (`%h`, `%%`). `Match exec` runs only
 * with `matchExec`; otherwise it counts as a command that failed. Not supported: CanonicalizeHostname
 * (names are never canonicalised, so `Match canonical` holds only in the
 * final pass, like `final`).
 *
 * @param host the name to connect to, as given (an alias, a name or an address).
 * @returns the resolved settings.
 * @throws Error naming the file and line when a config file cannot be read
 *   or has a bad line, an Include nests deeper than 16, a file has unsafe
 *   permissions, or a token or `${VAR}` cannot be expanded.
 */
export function resolveHost(host: string, options: SshConfigOptions = {}): ResolvedHost {
  if (!host) throw new Error('no host name to resolve in the ssh config');
  const local: Local = {
    home: options.home ?? homedir(),
    user: options.localUser ?? userInfo().username,
    env: options.env ?? process.env,
    matchExec: options.matchExec === true,
  };
  const settings: Settings = { identityFiles: [] };
  if (options.user !== undefined) settings.user = options.user;
  if (options.port !== undefined) settings.port = options.port;
  if (options.proxyJump !== undefined) settings.proxy = parseJumpSetting(options.proxyJump, 'the proxyJump option');
  const reader = new ConfigReader(local, settings, host);
  reader.readAll(options.configFile, false);

  // As ssh.c: HostName takes effect (with %h) once the files are read.
  let hostname = host;
  if (settings.hostname !== undefined) {
    hostname = expandTokens(settings.hostname, { h: host }, undefined, `HostName for ${host}`);
  }
  if (isIP(hostname) === 0) hostname = hostname.toLowerCase();
  if (reader.wantFinal) {
    settings.hostname = hostname;
    reader.readAll(options.configFile, true, hostname);
  }

  const user = settings.user ?? local.user;
  const port = settings.port ?? 22;
  const hostKeyAlias = settings.hostKeyAlias?.toLowerCase();
  const tokens: Record<string, string> = {
    ...connectionTokens({ host, hostname, port, user, home: local.home, localUser: local.user }),
    i: String(process.getuid?.() ?? ''),
    k: hostKeyAlias ?? host,
  };
  const path = (value: string, what: string) => expandTokens(expandTilde(value, local.home), tokens, local.env, what);

  const identitySource =
    settings.identityFiles.length > 0 ? settings.identityFiles.map((entry) => entry.path) : DEFAULT_IDENTITY_FILES;
  const userFiles = noneMeansEmpty(settings.userKnownHostsFiles ?? DEFAULT_USER_KNOWN_HOSTS);
  const globalFiles = noneMeansEmpty(settings.globalKnownHostsFiles ?? DEFAULT_GLOBAL_KNOWN_HOSTS);
  const proxy = settings.proxy;
  return {
    host,
    hostname,
    port,
    user,
    identityFiles: identitySource.map((file) => path(file, `IdentityFile ${file} for ${host}`)),
    identityFilesConfigured: settings.identityFiles.length > 0,
    userKnownHostsFiles: userFiles.map((file) => path(file, `UserKnownHostsFile ${file} for ${host}`)),
    globalKnownHostsFiles: globalFiles.map((file) => expandTilde(file, local.home)),
    strictHostKeyChecking: settings.strictHostKeyChecking ?? 'ask',
    identitiesOnly: settings.identitiesOnly ?? false,
    identityAgent:
      settings.identityAgent === undefined
        ? undefined
        : path(settings.identityAgent, `IdentityAgent ${settings.identityAgent} for ${host}`),
    proxyJump: proxy && 'jump' in proxy && proxy.last ? formatJumpSetting(proxy.last, proxy.extra) : undefined,
    proxyCommand: proxy && 'command' in proxy && proxy.command.toLowerCase() !== 'none' ? proxy.command : undefined,
    connectTimeout: settings.connectTimeout,
    serverAliveInterval: settings.serverAliveInterval,
    serverAliveCountMax: settings.serverAliveCountMax ?? 3,
    hashKnownHosts: settings.hashKnownHosts ?? false,
    hostKeyAlias,
    configFiles: reader.files,
  };
}

/**
 * Resolves the hops to reach `host`, jump hosts first, destination last,
 * as OpenSSH does: ProxyJump `a,b,c` reaches the destination through `c`,
 * which is resolved under its own name as if by `ssh -J a,b c` (so its
 * own ProxyJump in the config is overridden), and so on down to `a`, which
 * is resolved as if by `ssh a`: its ProxyJump in the config applies, so
 * chains grow through the config. A jump host gets its user and port from
 * the ProxyJump entry if written there (like `-l` and `-p`), and nothing
 * else of the destination's.
 *
 * @param proxyJump jump hosts that win over the destination's ProxyJump (`ssh -J`):
 *   a ProxyJump string, or jump hosts as objects, which come back as the `jump` of their hop.
 * @returns the hops, the destination last.
 * @throws Error as `resolveHost`, for a bad ProxyJump entry, a jump host
 *   that is the destination itself ("jumphost loop"), or a chain longer than
 *   `MAX_JUMP_HOPS` (a loop through the config).
 */
export function resolveChain<J extends JumpHost = JumpHost>(
  host: string,
  options: Omit<SshConfigOptions, 'proxyJump'> & { proxyJump?: string | J[] },
): ResolvedHop<J | JumpHost>[] {
  const hops: ResolvedHop<J | JumpHost>[] = [];
  const visit = (
    name: string,
    cmd: { user?: string; port?: number; jumps?: (J | JumpHost)[] },
    spec: J | JumpHost | undefined,
    depth: number,
  ) => {
    if (depth > MAX_JUMP_HOPS) {
      throw new Error(
        `the ProxyJump chain to ${host} is longer than ${MAX_JUMP_HOPS} hops: a jump host's ProxyJump in the ssh config probably leads back (last seen: ${name})`,
      );
    }
    const settings = resolveHost(name, {
      ...options,
      user: cmd.user,
      port: cmd.port,
      proxyJump: cmd.jumps === undefined ? undefined : cmd.jumps.map((jump) => formatJumpHost(jump)).join(','),
    });
    const jumps = cmd.jumps ?? parseProxyJump(settings.proxyJump);
    const last = jumps[jumps.length - 1];
    if (last) {
      if (
        last.host === settings.hostname &&
        (last.port ?? 22) === settings.port &&
        (last.user ?? settings.user) === settings.user
      ) {
        throw new Error(`jumphost loop via ${last.host}: ProxyJump for ${name} names the host itself`);
      }
      const rest = jumps.slice(0, -1);
      visit(last.host, { user: last.user, port: last.port, ...(rest.length > 0 && { jumps: rest }) }, last, depth + 1);
    }
    hops.push({ ...settings, jump: spec });
  };
  const given = options.proxyJump;
  visit(
    host,
    {
      user: options.user,
      port: options.port,
      ...(given !== undefined && { jumps: typeof given === 'string' ? parseProxyJump(given) : given }),
    },
    undefined,
    0,
  );
  return hops;
}

/** `none` as the only file: no files (UserKnownHostsFile none, GlobalKnownHostsFile none). */
function noneMeansEmpty(files: string[]): string[] {
  return files.length === 1 && (files[0] as string).toLowerCase() === 'none' ? [] : files;
}
