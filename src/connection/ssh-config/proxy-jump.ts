/**
 * ProxyJump values: the comma-separated jump hosts of `ssh -J` and the
 * ProxyJump directive, parsed as OpenSSH parses them (parse_ssh_uri and
 * parse_user_host_port) and written back the way `ssh -G` prints them, so
 * that a chain tendril reports reads like the one OpenSSH would follow.
 */
import { parsePort } from './words.js';

/** One hop of a ProxyJump list: `[user@]host[:port]` or `ssh://[user@]host[:port]`. */
export interface JumpHost {
  /** Account on the jump host, if given. */
  user?: string;
  /** Host name, alias or address, without brackets. */
  host: string;
  /** Port, if given. */
  port?: number;
}

/**
 * A ProxyJump setting as the config keeps it: OpenSSH stores the last hop
 * parsed and the hops before it as written, and prints them that way.
 */
export interface JumpSetting {
  /** The value, comment stripped. */
  jump: string;
  /** The last hop; undefined for `none` or an empty value. */
  last: JumpHost | undefined;
  /** The hops before the last, as written; undefined when there is one hop or none. */
  extra: string | undefined;
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

/**
 * ProxyJump's slot: the raw value validated, and the last entry parsed as OpenSSH keeps it.
 * @throws Error prefixed with `where` when an entry cannot be parsed.
 */
export function parseJumpSetting(value: string, where: string): JumpSetting {
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

/** The ProxyJump line of `ssh -G`: the earlier hops as written, the last one normalised. */
export function formatJumpSetting(last: JumpHost, extra: string | undefined): string {
  return `${extra !== undefined ? `${extra},` : ''}${formatJumpHost(last)}`;
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
