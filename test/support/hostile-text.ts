/**
 * Hostile text for the patterns and buffers that see what a target, a
 * child or another account writes: the inputs that make a backtracking
 * regular expression quadratic or worse (a word repeated without what
 * must follow it, long runs of one character, runs of whitespace before
 * a non-space), and a check that a matcher gets through MiBs of each in
 * well under a second. A linear pattern takes milliseconds on them; a
 * quadratic one takes minutes, so the bound is generous and never flaky.
 */
import assert from 'node:assert/strict';

export const MiB = 1024 * 1024;

/** `unit` repeated to exactly `size` characters. */
export function repeated(unit: string, size: number): string {
  return unit.repeat(Math.ceil(size / unit.length)).slice(0, size);
}

/**
 * The literal words of a regular expression: each run of plain
 * characters in its source (escapes of punctuation taken as the
 * character), and the space-separated parts of each.
 */
export function wordsOf(pattern: RegExp): string[] {
  const words = new Set<string>();
  const source = pattern.source.replace(/\\([^\w\s])/g, '$1');
  // Whatever is not a plain character ends a run: classes, groups, quantifiers, anchors, escapes like \s.
  for (const run of source.split(/\\[a-zA-Z]|[()[\]{}|*+?^$]+/)) {
    if (run.length === 0) continue;
    words.add(run);
    for (const part of run.split(' ')) if (part.length > 1) words.add(part);
  }
  return [...words];
}

/** What follows a repeated word in a family: nothing, or a character a gap like `.*`, `\S+` or `[^:]*` accepts. */
const FILLERS = ['', ' ', 'x', '\t', '/'];

/** Characters repeated alone, with and without a different one at the end. */
const RUNS = [' ', '\t', '\n', 'x', '=', '/', ':', '"', '\\'];

/**
 * Hostile families of `size` characters each, named: every word
 * repeated (alone, and followed by each of `FILLERS`), and runs of single
 * characters (ending in one that is not of the run, so a `\s+$` or `=+$`
 * fails at every start).
 */
export function hostileFamilies(words: readonly string[], size: number): [string, string][] {
  const families: [string, string][] = [];
  for (const word of words) {
    for (const filler of FILLERS)
      families.push([`${JSON.stringify(word + filler)} repeated`, repeated(word + filler, size)]);
  }
  for (const char of RUNS) {
    families.push([`a run of ${JSON.stringify(char)}`, repeated(char, size)]);
    families.push([`a run of ${JSON.stringify(char)} then another`, `${repeated(char, size - 1)}\u0001`]);
  }
  return families;
}

/**
 * Runs `match` over each of `families` and asserts that each takes less
 * than `limitMs` (default 1000 ms: a linear pattern needs a few ms per MiB,
 * a quadratic one minutes).
 * @returns the slowest family's time, in ms.
 */
export function assertLinear(
  what: string,
  match: (text: string) => unknown,
  families: readonly [string, string][],
  limitMs = 1000,
): number {
  let slowest = 0;
  for (const [name, text] of families) {
    const started = process.hrtime.bigint();
    match(text);
    const ms = Number(process.hrtime.bigint() - started) / 1e6;
    slowest = Math.max(slowest, ms);
    assert.ok(
      ms < limitMs,
      `${what} took ${ms.toFixed(0)} ms on ${name} (${text.length} characters): at most ${limitMs} ms`,
    );
  }
  return slowest;
}

/** `assertLinear` for a regular expression: `test`, then every `exec` of a global one. */
export function assertPatternLinear(pattern: RegExp, families: readonly [string, string][], limitMs = 1000): number {
  return assertLinear(
    String(pattern).slice(0, 120),
    (text) => {
      pattern.lastIndex = 0;
      if (!pattern.global) return pattern.test(text);
      return text.replace(pattern, '');
    },
    families,
    limitMs,
  );
}

/**
 * Runs `body` and measures the longest the event loop went without
 * running a 10 ms timer meanwhile: how long synchronous work held it.
 * @returns what `body` resolved with, and that stall in ms.
 */
export async function longestStall<T>(body: () => Promise<T>): Promise<{ value: T; stall: number }> {
  let last = Date.now();
  let stall = 0;
  const ticker = setInterval(() => {
    const now = Date.now();
    stall = Math.max(stall, now - last);
    last = now;
  }, 10);
  try {
    const value = await body();
    return { value, stall: Math.max(stall, Date.now() - last) };
  } finally {
    clearInterval(ticker);
  }
}
