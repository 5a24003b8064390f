/**
 * glob(3) as OpenSSH calls it for Include, written out because
 * `fs.globSync` is not in Node 12, which a child reached with `via` may
 * run: `*`, `?` and `[...]` in any path component, no hidden files unless
 * the pattern starts with `.`, existing paths only, sorted.
 */
import { readdirSync, statSync } from 'node:fs';
import { join } from 'node:path';

/** The existing paths `pattern` names, sorted. */
export function glob(pattern: string): string[] {
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

/** One path component's pattern as a regular expression; an unclosed `[` is a literal, as in glob(3). */
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
