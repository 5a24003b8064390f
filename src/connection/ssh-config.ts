/**
 * The OpenSSH client configuration, read the way OpenSSH 9 reads it
 * (ssh_config(5); readconf.c and ssh.c are the reference): the same
 * tokenising, first value wins, `Host` and `Match` evaluated line by line
 * against the state reached so far, `Include` processed where it appears
 * (globs, `~`, paths relative to ~/.ssh or /etc/ssh, nested, inside
 * blocks), a `Match final` pass, `%` tokens and `${VAR}` where OpenSSH
 * expands them, and ProxyJump chains resolved hop by hop.
 *
 * This is written here rather than taken from the `ssh-config` package:
 * that package has no `Include`, evaluates whole blocks rather than lines
 * in order, cannot negate Match criteria, and does not load on Node 12,
 * which a child reached with `via` may run. Everything here uses APIs
 * Node 12 has.
 *
 * One deliberate difference: `~` and `%d` are the home directory Node
 * reports (`os.homedir()`: `$HOME`, else the passwd entry), everywhere.
 * OpenSSH takes the passwd entry for most of them and `$HOME` only in
 * Include globs; the two agree unless `$HOME` was changed.
 */
import { spawnSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { closeSync, fstatSync, openSync, readdirSync, readFileSync, statSync } from 'node:fs';
import { isIP } from 'node:net';
import { homedir, hostname as localHostname, userInfo } from 'node:os';
import { isAbsolute, join } from 'node:path';

/** OpenSSH's StrictHostKeyChecking values (`true`/`false`/`off` normalised to these). */
export type StrictHostKeyChecking = 'yes' | 'no' | 'ask' | 'accept-new';

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

/** One hop of a ProxyJump list: `[user@]host[:port]` or `ssh://[user@]host[:port]`. */
export interface JumpHost {
  /** Account on the jump host, if given. */
  user?: string;
  /** Host name, alias or address, without brackets. */
  host: string;
  /** Port, if given. */
  port?: number;
}

/** A hop of a resolved chain: its settings, and the jump spec it was reached by (undefined for the destination). */
export interface ResolvedHop<J extends JumpHost = JumpHost> extends ResolvedHost {
  /** The ProxyJump entry (or the object given in the array form) this hop came from; undefined for the destination. */
  jump: J | undefined;
}

/** The user's config file: `~/.ssh/config`. */
export function defaultConfigFile(home = homedir()): string {
  return join(home, '.ssh', 'config');
}

/** The system-wide config file, read after the user's when no file is given. */
export const SYSTEM_CONFIG_FILE = '/etc/ssh/ssh_config';

/** OpenSSH refuses deeper Include nesting (READCONF_MAX_DEPTH). */
const MAX_INCLUDE_DEPTH = 16;
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

/** The local facts tokens and Match criteria use. */
interface Local {
  home: string;
  user: string;
  env: Record<string, string | undefined>;
  matchExec: boolean;
}

/** What the config set so far; unset fields are undefined, and only an unset field takes a value. */
interface Settings {
  hostname?: string;
  user?: string;
  port?: number;
  identityFiles: { path: string; userProvided: boolean }[];
  userKnownHostsFiles?: string[];
  globalKnownHostsFiles?: string[];
  strictHostKeyChecking?: StrictHostKeyChecking;
  identitiesOnly?: boolean;
  identityAgent?: string;
  /** ProxyJump and ProxyCommand share one slot: whichever comes first wins. */
  proxy?: { jump: string; last: JumpHost | undefined; extra: string | undefined } | { command: string };
  connectTimeout?: number;
  serverAliveInterval?: number;
  serverAliveCountMax?: number;
  hashKnownHosts?: boolean;
  hostKeyAlias?: string;
}

interface ReadFlags {
  /** A user config: relative Includes are under ~/.ssh and may use `~`. */
  user: boolean;
  /** OpenSSH refuses files others can write (SSHCONF_CHECKPERM). */
  checkPerm: boolean;
  /** An Include from an inactive block: parse only, apply nothing. */
  neverMatch: boolean;
  /** The second pass `Match final` asked for. */
  final: boolean;
}

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
  const thisHost = localHostname();
  const portText = String(port);
  const tokens: Record<string, string> = {
    C: createHash('sha1').update(`${thisHost}${hostname}${portText}${user}`).digest('hex'),
    L: thisHost.split('.')[0] as string,
    i: String(process.getuid?.() ?? ''),
    k: hostKeyAlias ?? host,
    l: thisHost,
    n: host,
    p: portText,
    d: local.home,
    h: hostname,
    r: user,
    u: local.user,
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

/**
 * Parses a ProxyJump value: comma-separated `[user@]host[:port]` (IPv6
 * addresses in brackets) or `ssh://[user@]host[:port]`; `none` and empty
 * mean no jump. A `#` starts a comment.
 * @throws Error naming the entry when one cannot be parsed.
 */
export function parseProxyJump(value: string | undefined): JumpHost[] {
  const text = stripComment(value ?? '');
  if (!text || text.toLowerCase() === 'none') return [];
  return text.split(',').map((entry) => parseJumpHost(entry));
}

/** `[user@]host[:port]` for a hop, as `ssh -G` writes the last ProxyJump entry. */
export function formatJumpHost(jump: JumpHost): string {
  const bracket = jump.host.includes(':') || /^[0-9.]+$/.test(jump.host);
  return `${jump.user !== undefined ? `${jump.user}@` : ''}${bracket ? `[${jump.host}]` : jump.host}${jump.port !== undefined && jump.port > 0 ? `:${jump.port}` : ''}`;
}

function stripComment(value: string): string {
  const hash = value.indexOf('#');
  return (hash === -1 ? value : value.slice(0, hash)).trim();
}

function parseJumpHost(entry: string): JumpHost {
  const text = entry.trim();
  const fail = (): never => {
    throw new Error(`cannot parse ProxyJump entry '${text}': expected [user@]host[:port] or ssh://[user@]host[:port]`);
  };
  let user: string | undefined;
  let rest = text;
  if (text.startsWith('ssh://')) {
    rest = text.slice(6);
    const at = rest.indexOf('@');
    if (at !== -1) {
      const info = rest.slice(0, at).split(';')[0] as string;
      if (!info) fail();
      try {
        user = decodeURIComponent(info.replace(/\+/g, ' '));
      } catch {
        fail();
      }
      rest = rest.slice(at + 1);
    }
    if (rest.endsWith('/')) rest = rest.slice(0, -1);
    if (rest.includes('/')) fail();
  } else {
    const at = rest.lastIndexOf('@');
    if (at !== -1) {
      user = rest.slice(0, at);
      if (!user) fail();
      rest = rest.slice(at + 1);
    }
  }
  const match = /^(?:\[([^\]]*)\]|([^:/[\]]+))(?:[:/](.*))?$/.exec(rest);
  if (!match) return fail();
  const host = (match[1] ?? match[2]) as string;
  if (!host) fail();
  const portText = match[3];
  let port: number | undefined;
  if (portText !== undefined && portText !== '') {
    port = parsePort(portText);
    if (port === undefined) fail();
  }
  return { host, ...(user !== undefined && { user }), ...(port !== undefined && { port }) };
}

/** ProxyJump's slot: the raw value validated, and the last entry parsed as OpenSSH keeps it. */
function parseJumpSetting(value: string, where: string): NonNullable<Settings['proxy']> {
  const text = stripComment(value);
  let jumps: JumpHost[];
  try {
    jumps = parseProxyJump(text);
  } catch (error) {
    throw new Error(`${where}: ${(error as Error).message}`);
  }
  const comma = text.lastIndexOf(',');
  return { jump: text, last: jumps[jumps.length - 1], extra: comma > 0 ? text.slice(0, comma) : undefined };
}

function formatJumpSetting(last: JumpHost, extra: string | undefined): string {
  return `${extra !== undefined ? `${extra},` : ''}${formatJumpHost(last)}`;
}

function noneMeansEmpty(files: string[]): string[] {
  return files.length === 1 && (files[0] as string).toLowerCase() === 'none' ? [] : files;
}

/** Reads config files into `settings`, line by line, as readconf.c does. */
class ConfigReader {
  /** Files read, in order. */
  readonly files: string[] = [];
  /** A `Match final` was seen: a second pass is due. */
  wantFinal = false;

  constructor(
    private readonly local: Local,
    private readonly settings: Settings,
    private readonly hostArg: string,
  ) {}

  /**
   * Reads the configured files for one pass. `host` is what `Host` lines
   * match: the name as given in the first pass, the resolved name in the final one.
   */
  readAll(configFile: string | false | undefined, final: boolean, host = this.hostArg): void {
    const flags = { user: true, checkPerm: false, neverMatch: false, final };
    if (configFile === false) return;
    if (configFile !== undefined) {
      // As `ssh -F`: the file must exist.
      this.read(configFile, flags, { active: true }, 0, host, true);
      return;
    }
    this.read(defaultConfigFile(this.local.home), { ...flags, checkPerm: true }, { active: true }, 0, host, false);
    this.read(SYSTEM_CONFIG_FILE, { ...flags, user: false }, { active: true }, 0, host, false);
  }

  private read(
    file: string,
    flags: ReadFlags,
    state: { active: boolean },
    depth: number,
    host: string,
    mustExist: boolean,
  ): void {
    if (depth > MAX_INCLUDE_DEPTH) {
      throw new Error(`${file}: Include nested more than ${MAX_INCLUDE_DEPTH} deep (does an Include include itself?)`);
    }
    let text: string;
    try {
      text = readChecked(file, flags.checkPerm);
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code === 'ENOENT' && !mustExist) return;
      if ((error as NodeJS.ErrnoException).code === 'EISDIR') return;
      throw error instanceof Error && (error as NodeJS.ErrnoException).code === undefined
        ? error
        : new Error(`cannot read the ssh config ${file}: ${(error as Error).message}`);
    }
    if (!flags.final) this.files.push(file);
    const lines = text.split('\n');
    for (let i = 0; i < lines.length; i++) {
      this.line(lines[i] as string, file, i + 1, flags, state, depth, host);
    }
  }

  private line(
    raw: string,
    file: string,
    lineNumber: number,
    flags: ReadFlags,
    state: { active: boolean },
    depth: number,
    host: string,
  ): void {
    const where = `${file} line ${lineNumber}`;
    const line = raw.replace(/[ \t\r\n\f]+$/, '');
    // The keyword ends at whitespace, a quote or one '=' (strdelim).
    const head = /^[ \t\r\n]*([^ \t\r\n"=]*)/.exec(line) as RegExpExecArray;
    const keywordText = head[1] as string;
    if (!keywordText || keywordText.startsWith('#')) return;
    const keyword = keywordText.toLowerCase();
    const rest = line.slice(head[0].length).replace(/^[ \t\r\n]*=?[ \t\r\n]*/, '');
    if (!rest) throw new Error(`${where}: no argument after keyword "${keywordText}"`);
    const args = splitArguments(rest, where);
    const apply = state.active;
    const s = this.settings;
    const one = (): string => {
      if (args.length === 0 || args[0] === '') throw new Error(`${where}: missing argument for ${keywordText}`);
      if (args.length > 1) throw new Error(`${where}: ${keywordText} has extra arguments at the end of the line`);
      return args[0] as string;
    };

    switch (keyword) {
      case 'host': {
        state.active = false;
        if (flags.neverMatch) return;
        for (const arg of args) {
          if (!arg) throw new Error(`${where}: empty Host pattern`);
          const negated = arg.startsWith('!');
          // Host patterns are matched as written, case included (match_pattern, not match_hostname).
          if (matchPattern(host, negated ? arg.slice(1) : arg)) {
            if (negated) {
              state.active = false;
              return;
            }
            state.active = true;
          }
        }
        return;
      }
      case 'match': {
        const result = this.match(rest, where, flags.final);
        state.active = flags.neverMatch ? false : result;
        return;
      }
      case 'include': {
        for (const arg of args) {
          if (!arg) throw new Error(`${where}: empty Include path`);
          if (arg.startsWith('~') && !flags.user)
            throw new Error(`${where}: bad include path ${arg} (no ~ in /etc/ssh)`);
          const anchored =
            isAbsolute(arg) || arg.startsWith('~') ? arg : `${flags.user ? '~/.ssh' : '/etc/ssh'}/${arg}`;
          const outer = state.active;
          for (const path of glob(expandTilde(anchored, this.local.home))) {
            this.read(
              path,
              { ...flags, checkPerm: true, neverMatch: flags.neverMatch || !outer },
              state,
              depth + 1,
              host,
              false,
            );
            // A Host or Match inside the included file ends with it.
            state.active = outer;
          }
        }
        return;
      }
      case 'hostname':
        if (apply && s.hostname === undefined) s.hostname = one();
        else one();
        return;
      case 'user':
        if (apply && s.user === undefined) s.user = one();
        else one();
        return;
      case 'port': {
        const port = parsePort(one());
        if (port === undefined) throw new Error(`${where}: bad port '${args[0]}'`);
        if (apply && s.port === undefined) s.port = port;
        return;
      }
      case 'identityfile': {
        const path = one();
        if (apply && !s.identityFiles.some((entry) => entry.path === path && entry.userProvided === flags.user)) {
          s.identityFiles.push({ path, userProvided: flags.user });
        }
        return;
      }
      case 'userknownhostsfile':
      case 'globalknownhostsfile': {
        const key = keyword === 'userknownhostsfile' ? 'userKnownHostsFiles' : 'globalKnownHostsFiles';
        args.forEach((arg, i) => {
          if (!arg) throw new Error(`${where}: empty argument for ${keywordText}`);
          if (arg.toLowerCase() === 'none' && (i > 0 || args.length > 1)) {
            throw new Error(`${where}: ${keywordText} "none" must appear alone`);
          }
        });
        if (apply && s[key] === undefined) s[key] = args;
        return;
      }
      case 'stricthostkeychecking': {
        const value = STRICT[one().toLowerCase()];
        if (value === undefined) throw new Error(`${where}: StrictHostKeyChecking must be yes, no, ask or accept-new`);
        if (apply && s.strictHostKeyChecking === undefined) s.strictHostKeyChecking = value;
        return;
      }
      case 'identitiesonly':
      case 'hashknownhosts': {
        const value = FLAG[one().toLowerCase()];
        if (value === undefined) throw new Error(`${where}: ${keywordText} must be yes or no`);
        const key = keyword === 'identitiesonly' ? 'identitiesOnly' : 'hashKnownHosts';
        if (apply && s[key] === undefined) s[key] = value;
        return;
      }
      case 'identityagent': {
        const value = one();
        // OpenSSH checks the variables at once, even in blocks that do not apply.
        expandTokens(value, undefined, this.local.env, `${where}: IdentityAgent`);
        if (value.startsWith('$') && !value.startsWith('${') && !/^\$[A-Za-z_][A-Za-z0-9_]*$/.test(value)) {
          throw new Error(`${where}: invalid environment variable name ${value}`);
        }
        if (apply && s.identityAgent === undefined) s.identityAgent = value;
        return;
      }
      case 'proxyjump': {
        const value = parseJumpSetting(rest.replace(/^[ \t\r\n=]*/, ''), where);
        if (apply && s.proxy === undefined) s.proxy = value;
        return;
      }
      case 'proxycommand':
        if (apply && s.proxy === undefined) s.proxy = { command: rest.replace(/^[ \t\r\n=]*/, '') };
        return;
      case 'connecttimeout':
      case 'serveraliveinterval': {
        const text = one();
        const seconds = text === 'none' ? undefined : parseTime(text);
        if (seconds === null) throw new Error(`${where}: invalid time value '${text}' for ${keywordText}`);
        const key = keyword === 'connecttimeout' ? 'connectTimeout' : 'serverAliveInterval';
        // `none` leaves the setting unset, so a later line may still set it (as in readconf.c).
        if (apply && s[key] === undefined && seconds !== undefined) s[key] = seconds;
        return;
      }
      case 'serveralivecountmax': {
        const text = one();
        if (!/^-?\d+$/.test(text)) throw new Error(`${where}: ServerAliveCountMax must be an integer`);
        if (apply && s.serverAliveCountMax === undefined) s.serverAliveCountMax = Number(text);
        return;
      }
      case 'hostkeyalias':
        if (apply && s.hostKeyAlias === undefined) s.hostKeyAlias = one();
        else one();
        return;
      default:
        // Directives the ssh method has no use for; OpenSSH's own checks of them do not apply.
        return;
    }
  }

  /** Runs a `Match exec` command with the tokens of the state so far; true when it exits 0. */
  private exec(command: string, host: string, user: string, where: string): boolean {
    const thisHost = localHostname();
    const port = String(this.settings.port ?? 22);
    const tokens: Record<string, string> = {
      C: createHash('sha1').update(`${thisHost}${host}${port}${user}`).digest('hex'),
      L: thisHost.split('.')[0] as string,
      d: this.local.home,
      h: host,
      l: thisHost,
      n: this.hostArg,
      p: port,
      r: user,
      u: this.local.user,
    };
    const expanded = expandTokens(command, tokens, undefined, `${where}: Match exec`);
    return spawnSync('/bin/sh', ['-c', expanded], { stdio: 'ignore', env: this.local.env }).status === 0;
  }

  /** Evaluates a Match line against the state so far (match_cfg_line). */
  private match(condition: string, where: string, final: boolean): boolean {
    const s = this.settings;
    const host =
      final && s.hostname !== undefined
        ? s.hostname
        : s.hostname !== undefined
          ? expandTokens(s.hostname, { h: this.hostArg }, undefined, `${where}: HostName`)
          : this.hostArg;
    const user = s.user ?? this.local.user;
    const words = splitMatchWords(condition, where);
    let result = true;
    let attributes = 0;
    for (let i = 0; i < words.length; i++) {
      const word = words[i] as string;
      if (word.startsWith('#')) break;
      const negate = word.startsWith('!');
      const attribute = (negate ? word.slice(1) : word).toLowerCase();
      if (attribute === 'all') {
        const next = words[i + 1];
        if (attributes > 1 || (next !== undefined && !next.startsWith('#'))) {
          throw new Error(`${where}: Match '${word}' cannot be combined with other criteria`);
        }
        return result ? !negate : false;
      }
      attributes++;
      if (attribute === 'canonical' || attribute === 'final') {
        if (attribute === 'final' && !final) this.wantFinal = true;
        // Names are never canonicalised, so `canonical` holds only in the final pass, as with `final`.
        if (final === negate) result = false;
        continue;
      }
      const argument = words[++i];
      if (argument === undefined || argument === '' || argument.startsWith('#')) {
        throw new Error(`${where}: missing Match criteria for ${attribute}`);
      }
      let matched: boolean;
      switch (attribute) {
        case 'host':
          matched = matchPatternList(host.toLowerCase(), argument, true) === 1;
          break;
        case 'originalhost':
          matched = matchPatternList(this.hostArg.toLowerCase(), argument, true) === 1;
          break;
        case 'user':
          matched = matchPatternList(user, argument, false) === 1;
          break;
        case 'localuser':
          matched = matchPatternList(this.local.user, argument, false) === 1;
          break;
        case 'exec':
          // Unless asked, the ssh method runs no local commands on a config's say: a failed command.
          matched = this.local.matchExec && this.exec(argument, host, user, where);
          break;
        default:
          throw new Error(`${where}: unsupported Match attribute ${attribute}`);
      }
      if (matched === negate) result = false;
    }
    if (attributes === 0) throw new Error(`${where}: one or more attributes required for Match`);
    return result;
  }
}

const STRICT: Record<string, StrictHostKeyChecking> = {
  yes: 'yes',
  true: 'yes',
  no: 'no',
  false: 'no',
  off: 'no',
  ask: 'ask',
  'accept-new': 'accept-new',
};
const FLAG: Record<string, boolean> = { yes: true, true: true, no: false, false: false };

/** A config file's text; with `checkPerm`, refused as OpenSSH refuses it when others could have written it. */
function readChecked(file: string, checkPerm: boolean): string {
  const fd = openSync(file, 'r');
  try {
    if (checkPerm) {
      const stat = fstatSync(fd);
      const uid = process.getuid?.();
      if (uid !== undefined && ((stat.uid !== 0 && stat.uid !== uid) || (stat.mode & 0o022) !== 0)) {
        throw new Error(
          `bad owner or permissions on the ssh config ${file}: it must belong to you or root and not be writable by group or others (OpenSSH refuses it too; chmod go-w ${file})`,
        );
      }
    }
    return readFileSync(fd, 'utf8');
  } finally {
    closeSync(fd);
  }
}

/** Splits arguments as OpenSSH's argv_split: whitespace, "double" and 'single' quotes, backslash escapes, `#` comments. */
function splitArguments(text: string, where: string): string[] {
  const args: string[] = [];
  let i = 0;
  while (i < text.length) {
    const c = text[i] as string;
    if (c === ' ' || c === '\t') {
      i++;
      continue;
    }
    if (c === '#') break;
    let arg = '';
    let quote = '';
    for (; i < text.length; i++) {
      const ch = text[i] as string;
      const next = text[i + 1];
      if (ch === '\\') {
        if (next === "'" || next === '"' || next === '\\' || (quote === '' && next === ' ')) {
          arg += next;
          i++;
        } else {
          arg += ch;
        }
      } else if (quote === '' && (ch === ' ' || ch === '\t')) {
        break;
      } else if (quote === '' && (ch === '"' || ch === "'")) {
        quote = ch;
      } else if (quote !== '' && ch === quote) {
        quote = '';
      } else {
        arg += ch;
      }
    }
    if (quote !== '') throw new Error(`${where}: unbalanced quotes`);
    args.push(arg);
  }
  return args;
}

/** Splits a Match condition as strdelim does: whitespace or one '=', double quotes only. */
function splitMatchWords(text: string, where: string): string[] {
  const words: string[] = [];
  let i = 0;
  while (i < text.length) {
    while (i < text.length && /[ \t\r\n]/.test(text[i] as string)) i++;
    if (i >= text.length) break;
    if (text[i] === '"') {
      const end = text.indexOf('"', i + 1);
      if (end === -1) throw new Error(`${where}: unbalanced quotes`);
      words.push(text.slice(i + 1, end));
      i = end + 1;
    } else {
      let j = i;
      while (j < text.length && !/[ \t\r\n"=]/.test(text[j] as string)) j++;
      words.push(text.slice(i, j));
      i = j;
    }
    while (i < text.length && /[ \t\r\n]/.test(text[i] as string)) i++;
    if (text[i] === '=') i++;
  }
  return words;
}

/** OpenSSH's match_pattern: `*` and `?` wildcards, case as written. */
function matchPattern(text: string, pattern: string): boolean {
  let regex = '';
  for (const c of pattern) regex += c === '*' ? '.*' : c === '?' ? '.' : c.replace(/[.+^${}()|[\]\\]/g, '\\$&');
  return new RegExp(`^${regex}$`, 's').test(text);
}

/** OpenSSH's match_pattern_list: 1 for a match, -1 when a negated pattern matches, 0 for none. */
function matchPatternList(text: string, list: string, lower: boolean): -1 | 0 | 1 {
  let positive = false;
  for (const entry of list.split(',')) {
    const negated = entry.startsWith('!');
    const pattern = negated ? entry.slice(1) : entry;
    if (matchPattern(text, lower ? pattern.toLowerCase() : pattern)) {
      if (negated) return -1;
      positive = true;
    }
  }
  return positive ? 1 : 0;
}

/** A port as a2port takes it: 1 to 65535 (named services are not looked up). */
function parsePort(text: string): number | undefined {
  if (!/^\d+$/.test(text)) return undefined;
  const port = Number(text);
  return port > 0 && port <= 65535 ? port : undefined;
}

/** OpenSSH's convtime: `90`, `1m30s`, `2h`, `1d`, `1w`; null when invalid. */
function parseTime(text: string): number | null {
  if (!/^(\d+[sSmMhHdDwW]?)+$/.test(text)) return null;
  const units: Record<string, number> = { s: 1, m: 60, h: 3600, d: 86400, w: 604800 };
  let total = 0;
  for (const [, digits, unit] of text.matchAll(/(\d+)([sSmMhHdDwW]?)/g)) {
    total += Number(digits) * (unit ? (units[unit.toLowerCase()] as number) : 1);
  }
  return total > 2 ** 31 - 1 ? null : total;
}

/**
 * Expands `%x` tokens (when `tokens` is given) and `${VAR}` (when `env`
 * is given), as OpenSSH's percent_dollar_expand.
 * @throws Error for an unknown token, a lone `%`, or a variable that is not set.
 */
function expandTokens(
  value: string,
  tokens: Record<string, string> | undefined,
  env: Record<string, string | undefined> | undefined,
  what: string,
): string {
  let out = '';
  for (let i = 0; i < value.length; i++) {
    const c = value[i] as string;
    if (env && c === '$' && value[i + 1] === '{') {
      const end = value.indexOf('}', i + 2);
      if (end === -1) throw new Error(`${what}: environment variable '${value.slice(i)}' has no closing '}'`);
      const name = value.slice(i + 2, end);
      if (!name) throw new Error(`${what}: empty environment variable name`);
      const found = env[name];
      if (found === undefined) throw new Error(`${what}: environment variable \${${name}} is not set`);
      out += found;
      i = end;
      continue;
    }
    if (c !== '%' || !tokens) {
      out += c;
      continue;
    }
    const key = value[++i];
    if (key === '%') out += '%';
    else if (key === undefined) throw new Error(`${what}: a '%' ends the value (write %% for a literal %)`);
    else if (tokens[key] !== undefined) out += tokens[key];
    else throw new Error(`${what}: unknown token %${key}`);
  }
  return out;
}

/** `~`, `~/path`, `~user/path` (from /etc/passwd); other paths unchanged. */
function expandTilde(path: string, home: string): string {
  if (!path.startsWith('~')) return path;
  const slash = path.indexOf('/');
  const name = slash === -1 ? path.slice(1) : path.slice(1, slash);
  const rest = slash === -1 ? '' : path.slice(slash + 1).replace(/^\/+/, '');
  const dir = name ? passwdHome(name) : home;
  if (dir === undefined) throw new Error(`cannot expand ${path}: no such user ${name}`);
  return `${dir.endsWith('/') ? dir : `${dir}/`}${rest}`;
}

function passwdHome(user: string): string | undefined {
  try {
    for (const line of readFileSync('/etc/passwd', 'utf8').split('\n')) {
      const fields = line.split(':');
      if (fields[0] === user && fields.length >= 7) return fields[5];
    }
  } catch {
    // No passwd file: the user is unknown.
  }
  return undefined;
}

/**
 * glob(3) as OpenSSH calls it for Include: `*`, `?` and `[...]` in any
 * path component, no hidden files unless the pattern starts with `.`,
 * existing paths only, sorted. (`fs.globSync` is not in Node 12.)
 */
function glob(pattern: string): string[] {
  let paths = [pattern.startsWith('/') ? '/' : ''];
  for (const part of pattern.split('/')) {
    if (part === '') continue;
    if (!/[*?[]/.test(part)) {
      const literal = part.replace(/\\(.)/g, '$1');
      paths = paths.map((dir) => join(dir, literal));
      continue;
    }
    const regex = globRegex(part);
    const next: string[] = [];
    for (const dir of paths) {
      let names: string[];
      try {
        names = readdirSync(dir || '.');
      } catch {
        continue;
      }
      for (const name of names) {
        if (name.startsWith('.') && !part.startsWith('.')) continue;
        if (regex.test(name)) next.push(join(dir, name));
      }
    }
    paths = next;
  }
  return paths
    .filter((path) => {
      try {
        statSync(path);
        return true;
      } catch {
        return false;
      }
    })
    .sort((a, b) => (a < b ? -1 : a > b ? 1 : 0));
}

function globRegex(part: string): RegExp {
  let regex = '';
  for (let i = 0; i < part.length; i++) {
    const c = part[i] as string;
    if (c === '\\' && i + 1 < part.length) {
      regex += (part[++i] as string).replace(/[.+^${}()|[\]\\*?]/g, '\\$&');
    } else if (c === '*') {
      regex += '[^/]*';
    } else if (c === '?') {
      regex += '[^/]';
    } else if (c === '[') {
      const end = part.indexOf(']', i + 2);
      if (end === -1) {
        regex += '\\[';
        continue;
      }
      let body = part.slice(i + 1, end);
      const negated = body.startsWith('!') || body.startsWith('^');
      if (negated) body = body.slice(1);
      regex += `[${negated ? '^' : ''}${body.replace(/[\\\]^]/g, '\\$&')}]`;
      i = end;
    } else {
      regex += c.replace(/[.+^${}()|[\]\\]/g, '\\$&');
    }
  }
  return new RegExp(`^${regex}$`, 's');
}
