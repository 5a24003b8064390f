/**
 * The words and numbers of a config line, cut and read as OpenSSH's misc.c
 * does (argv_split, strdelim, a2port, convtime), so a line means to tendril
 * what it means to `ssh`, quoting and odd spacing included.
 */

/**
 * Splits arguments as OpenSSH's argv_split: whitespace, "double" and 'single' quotes, backslash escapes, `#` comments.
 * @throws Error naming `where` for an unbalanced quote.
 */
export function splitArguments(text: string, where: string): string[] {
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

/**
 * Splits a Match condition as strdelim does: whitespace or one '=', double quotes only.
 * @throws Error naming `where` for an unbalanced quote.
 */
export function splitMatchWords(text: string, where: string): string[] {
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

/** A port as a2port takes it: 1 to 65535 (named services are not looked up). */
export function parsePort(text: string): number | undefined {
  if (!/^\d+$/.test(text)) return undefined;
  const port = Number(text);
  return port > 0 && port <= 65535 ? port : undefined;
}

/** OpenSSH's convtime: `90`, `1m30s`, `2h`, `1d`, `1w`; null when invalid. */
export function parseTime(text: string): number | null {
  // Not `(\d+[unit]?)+`: a run of digits could be split among its repeats in exponentially many ways.
  if (!/^(?:\d+[sSmMhHdDwW])*\d+[sSmMhHdDwW]?$/.test(text)) return null;
  const units: Record<string, number> = { s: 1, m: 60, h: 3600, d: 86400, w: 604800 };
  let total = 0;
  for (const [, digits, unit] of text.matchAll(/(\d+)([sSmMhHdDwW]?)/g)) {
    total += Number(digits) * (unit ? (units[unit.toLowerCase()] as number) : 1);
  }
  return total > 2 ** 31 - 1 ? null : total;
}
