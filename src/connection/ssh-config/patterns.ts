/**
 * Host and user patterns as OpenSSH's match.c matches them: only `*` and
 * `?` are special (no `[...]`, unlike the file globs of Include), and a
 * list's negated entry vetoes the whole list, whatever else matched.
 */

/**
 * OpenSSH's match_pattern: `*` and `?` wildcards, case as written. At
 * most text length × pattern length steps, however many `*` the pattern
 * has (a regular expression of `.*` for each backtracked exponentially in
 * their number: `*a*a*a*a*a*a*a*ab` took 3 s on a 40-character name).
 */
export function matchPattern(text: string, pattern: string): boolean {
  let t = 0;
  let p = 0;
  // The last `*` seen, and where in the text it was last made to end: the only backtrack kept.
  let star = -1;
  let starEnd = 0;
  while (t < text.length) {
    if (p < pattern.length && pattern[p] === '*') {
      star = p++;
      starEnd = t;
    } else if (p < pattern.length && (pattern[p] === '?' || pattern[p] === text[t])) {
      p++;
      t++;
    } else if (star !== -1) {
      p = star + 1;
      t = ++starEnd;
    } else {
      return false;
    }
  }
  while (pattern[p] === '*') p++;
  return p === pattern.length;
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
