/**
 * What OpenSSH expands inside values: `%` tokens, `${VAR}` and `~`. Each
 * directive expands only what OpenSSH expands in it, so the callers choose
 * which of these apply; an unknown token or unset variable is an error, as
 * in OpenSSH, rather than a path quietly left with a `%` in it.
 */
import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { hostname as localHostname } from 'node:os';

/** The facts the `%` tokens common to `Match exec` and the path directives stand for. */
export interface TokenFacts {
  /** The name as given (`%n`). */
  host: string;
  /** The name connected to, HostName applied (`%h`). */
  hostname: string;
  /** `%p`. */
  port: number;
  /** The remote account (`%r`). */
  user: string;
  /** The home directory (`%d`). */
  home: string;
  /** The local account (`%u`). */
  localUser: string;
}

/** `%C`, `%L`, `%d`, `%h`, `%l`, `%n`, `%p`, `%r` and `%u` for `facts` (`%C` is the SHA-1 of `%l%h%p%r`). */
export function connectionTokens(facts: TokenFacts): Record<string, string> {
  const thisHost = localHostname();
  const port = String(facts.port);
  return {
    C: createHash('sha1').update(`${thisHost}${facts.hostname}${port}${facts.user}`).digest('hex'),
    L: thisHost.split('.')[0] as string,
    d: facts.home,
    h: facts.hostname,
    l: thisHost,
    n: facts.host,
    p: port,
    r: facts.user,
    u: facts.localUser,
  };
}

/**
 * Expands `%x` tokens (when `tokens` is given) and `${VAR}` (when `env`
 * is given), as OpenSSH's percent_dollar_expand.
 * @throws Error for an unknown token, a lone `%`, or a variable that is not set.
 */
export function expandTokens(
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

/**
 * `~`, `~/path`, `~user/path` (from /etc/passwd); other paths unchanged.
 * @throws Error when `~user` names no account.
 */
export function expandTilde(path: string, home: string): string {
  if (!path.startsWith('~')) return path;
  const slash = path.indexOf('/');
  const name = slash === -1 ? path.slice(1) : path.slice(1, slash);
  const rest = slash === -1 ? '' : path.slice(slash + 1).replace(/^\/+/, '');
  const dir = name ? passwdHome(name) : home;
  if (dir === undefined) throw new Error(`cannot expand ${path}: no such user ${name}`);
  return `${dir.endsWith('/') ? dir : `${dir}/`}${rest}`;
}

/** `user`'s home from /etc/passwd, read directly because Node has no getpwnam. */
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
