/**
 * Host and user patterns as OpenSSH's match.c matches them: only `*` and
 * `?` are special (no `[...]`, unlike the file globs of Include), and a
 * list's negated entry vetoes the whole list, whatever else matched.
 */

/** OpenSSH's match_pattern: `*` and `?` wildcards, case as written. */
export function matchPattern(text: string, pattern: string): boolean {
  let regex = '';
  for (const c of pattern) regex += c === '*' ? '.*' : c === '?' ? '.' : c.replace(/[.+^${}()|[\]\\]/g, '\\$&');
  return new RegExp(`^${regex}$`, 's').test(text);
}

/**
 * OpenSSH's match_pattern_list: 1 for a match, -1 when a negated pattern matches, 0 for none.
 * @param lower lowercase the patterns, for host names (which the caller lowercases too); user names keep their case.
 */
export function matchPatternList(text: string, list: string, lower: boolean): -1 | 0 | 1 {
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
