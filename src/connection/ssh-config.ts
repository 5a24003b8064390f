import { readFileSync } from 'node:fs';
import { homedir, userInfo } from 'node:os';
import { join } from 'node:path';
import { importPackage } from './packages.js';

/** What `~/.ssh/config` says about a host, for the settings tendril honours. */
export interface HostSettings {
  /** HostName: the real host behind an alias. */
  hostName?: string;
  /** User. */
  user?: string;
  /** Port. */
  port?: number;
  /** IdentityFile entries, with `~` and `%d %u %h %r` expanded. */
  identityFiles: string[];
  /** ProxyJump. */
  proxyJump?: string;
  /** Seconds, as in the file. */
  connectTimeout?: number;
  /** Seconds, as in the file. */
  serverAliveInterval?: number;
}

/** The default config file: `~/.ssh/config`. */
export function defaultConfigFile(): string {
  return join(homedir(), '.ssh', 'config');
}

/**
 * The settings for `host` from an OpenSSH client config file, through the
 * `ssh-config` package: Host and Match blocks (`Match exec` is never run),
 * first value wins. A missing file yields no settings (and the package is
 * not even loaded, which matters on old Node in a `via` context).
 * @throws Error when the file exists but cannot be parsed.
 */
export async function hostSettings(host: string, file: string): Promise<HostSettings> {
  let text: string;
  try {
    text = readFileSync(file, 'utf8');
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ENOENT') return { identityFiles: [] };
    throw error;
  }
  const SSHConfig = await importPackage<typeof import('ssh-config').default>('ssh-config');
  const computed = SSHConfig.parse(text).compute(host, { matchExec: false, ignoreCase: true }) as Record<
    string,
    string | string[] | undefined
  >;
  const one = (key: string) => {
    const value = computed[key];
    return Array.isArray(value) ? value[0] : value;
  };
  const number = (key: string) => {
    const value = one(key);
    return value === undefined ? undefined : Number(value);
  };
  const hostName = one('hostname');
  const user = one('user');
  const expand = (path: string) =>
    path
      .replace(/^~(?=\/|$)/, homedir())
      .replace(/%d/g, homedir())
      .replace(/%u/g, userInfo().username)
      .replace(/%h/g, hostName ?? host)
      .replace(/%r/g, user ?? userInfo().username)
      .replace(/%%/g, '%');
  const identity = computed.identityfile;
  return {
    ...(hostName !== undefined && { hostName: hostName.replace(/%h/g, host) }),
    ...(user !== undefined && { user }),
    ...(number('port') !== undefined && { port: number('port') }),
    identityFiles: (Array.isArray(identity) ? identity : identity ? [identity] : []).map(expand),
    ...(one('proxyjump') !== undefined && { proxyJump: one('proxyjump') }),
    ...(number('connecttimeout') !== undefined && { connectTimeout: number('connecttimeout') }),
    ...(number('serveraliveinterval') !== undefined && { serverAliveInterval: number('serveraliveinterval') }),
  };
}

/** One hop of a ProxyJump list: `[user@]host[:port]`. */
export interface JumpHost {
  /** Account on the jump host, if given. */
  user?: string;
  /** Host name or address. */
  host: string;
  /** Port, if given. */
  port?: number;
}

/** Parses a ProxyJump value (`none` and empty mean no jump). */
export function parseProxyJump(value: string | undefined): JumpHost[] {
  if (!value || value === 'none') return [];
  return value.split(',').map((hop) => {
    const match = /^(?:([^@]+)@)?(\[[^\]]+\]|[^:]+)(?::(\d+))?$/.exec(hop.trim());
    if (!match) throw new Error(`cannot parse ProxyJump hop '${hop}'`);
    const host = (match[2] as string).replace(/^\[|\]$/g, '');
    return { host, ...(match[1] && { user: match[1] }), ...(match[3] && { port: Number(match[3]) }) };
  });
}
