import { InvalidOptionError } from './errors.js';

/**
 * Checks of the options tendril's functions take, in one place: each
 * returns the value (or the default when it is undefined) and throws
 * `InvalidOptionError` naming the option, where it was passed and what it
 * must be.
 */

/** Longest timer Node accepts, in ms (about 24.8 days). */
export const MAX_TIMER = 2_147_483_647;

/**
 * How long an operation that was stopped (its signal aborted, its timeout
 * passed) waits for the other side to clean up and say so, in ms, before
 * it settles anyway: nothing waits on a hung or hostile context longer.
 * Used by `Cancellation` (src/services) and by the master's own waits.
 */
export const STOP_GRACE = 2000;

/** A duration in ms from `min` (default 0) to `MAX_TIMER`, or `fallback` when undefined. */
export function milliseconds<F extends number | undefined>(
  value: unknown,
  option: string,
  where: string,
  fallback: F,
  min = 0,
): number | F {
  if (value === undefined) return fallback;
  if (typeof value !== 'number' || Number.isNaN(value) || value < min || value > MAX_TIMER) {
    throw new InvalidOptionError(option, where, `a number of milliseconds from ${min} to ${MAX_TIMER}`, value);
  }
  return value;
}

/** An integer from `min` to `max`, or `fallback` when undefined. */
export function integer<F extends number | undefined>(
  value: unknown,
  option: string,
  where: string,
  fallback: F,
  min: number,
  max: number,
): number | F {
  if (value === undefined) return fallback;
  if (typeof value !== 'number' || !Number.isInteger(value) || value < min || value > max) {
    throw new InvalidOptionError(option, where, `an integer from ${min} to ${max}`, value);
  }
  return value;
}

/** A non-empty string of at most `maxLength` characters, or `fallback` when undefined. */
export function text<F extends string | undefined>(
  value: unknown,
  option: string,
  where: string,
  fallback: F,
  maxLength = 256,
): string | F {
  if (value === undefined) return fallback;
  if (typeof value !== 'string' || value.length === 0 || value.length > maxLength) {
    throw new InvalidOptionError(option, where, `a non-empty string of at most ${maxLength} characters`, value);
  }
  return value;
}

/** A string or a URL (a module path, a file URL or a directory), or undefined. */
export function location(value: unknown, option: string, where: string): string | URL | undefined {
  if (value === undefined || typeof value === 'string' || value instanceof URL) return value;
  throw new InvalidOptionError(option, where, 'a path, a file URL string or a URL', value);
}

/** A boolean, or `fallback` when undefined. */
export function boolean<F extends boolean | undefined>(
  value: unknown,
  option: string,
  where: string,
  fallback?: F,
): boolean | F {
  if (value === undefined) return fallback as F;
  if (typeof value !== 'boolean') throw new InvalidOptionError(option, where, 'true or false', value);
  return value;
}

/** One of the strings `choices`, or `fallback` when undefined. */
export function oneOf<C extends string, F extends C | undefined>(
  value: unknown,
  option: string,
  where: string,
  choices: readonly C[],
  fallback: F,
): C | F {
  if (value === undefined) return fallback;
  if (typeof value === 'string' && (choices as readonly string[]).includes(value)) return value as C;
  const quoted = choices.map((choice) => `'${choice}'`);
  const last = quoted.pop();
  throw new InvalidOptionError(option, where, quoted.length ? `${quoted.join(', ')} or ${last}` : `${last}`, value);
}

/** An AbortSignal, or undefined. */
export function abortSignal(value: unknown, option: string, where: string): AbortSignal | undefined {
  if (value === undefined) return undefined;
  if (typeof value === 'object' && value !== null && typeof (value as AbortSignal).aborted === 'boolean') {
    return value as AbortSignal;
  }
  throw new InvalidOptionError(option, where, 'an AbortSignal', value);
}

/**
 * Refuses an option of `given` that is not one of `known`: a misspelt
 * option would else be ignored, and its default used without a word.
 * @throws InvalidOptionError naming the option, the known option it most
 *   likely meant ("did you mean"), and the known ones.
 */
export function knownOptions(given: object, known: ReadonlySet<string>, where: string): void {
  for (const key of Object.keys(given)) {
    if (known.has(key)) continue;
    const near = closestName(key, known);
    const list = [...known].join(', ');
    throw new InvalidOptionError(
      key,
      where,
      near === undefined ? `one of ${list}` : `one of its options (did you mean ${near}?): ${list}`,
      'an unknown option',
    );
  }
}

/**
 * The name of `names` that `given` most likely misspells, or undefined:
 * the same but for case (`keepAliveInterval`), one a typo or two away
 * (`prot`, `conectTimeout`), else one that contains it or that it
 * contains, of at least 3 letters (`host` for `hostname`, `user` for
 * `username`).
 */
export function closestName(given: string, names: Iterable<string>): string | undefined {
  const lower = given.toLowerCase();
  const candidates = [...names];
  const sameButCase = candidates.find((name) => name.toLowerCase() === lower);
  if (sameButCase !== undefined) return sameButCase;
  const allowed = given.length <= 4 ? 1 : given.length <= 8 ? 2 : 3;
  let best: string | undefined;
  let bestDistance = allowed + 1;
  for (const name of candidates) {
    const distance = editDistance(lower, name.toLowerCase());
    if (distance < bestDistance) {
      best = name;
      bestDistance = distance;
    }
  }
  if (best !== undefined) return best;
  if (lower.length < 3) return undefined;
  return candidates
    .filter((name) => {
      const other = name.toLowerCase();
      return other.includes(lower) || (other.length >= 3 && lower.includes(other));
    })
    .sort((a, b) => Math.abs(a.length - given.length) - Math.abs(b.length - given.length))[0];
}

/** Edits (insert, delete, replace, swap two neighbours) from `a` to `b`: the optimal string alignment distance. */
function editDistance(a: string, b: string): number {
  const rows: number[][] = [];
  for (let i = 0; i <= a.length; i++) {
    const row: number[] = [i];
    for (let j = 1; j <= b.length; j++) {
      if (i === 0) {
        row.push(j);
        continue;
      }
      const above = rows[i - 1] as number[];
      let cost = Math.min(
        (above[j] as number) + 1,
        (row[j - 1] as number) + 1,
        (above[j - 1] as number) + (a[i - 1] === b[j - 1] ? 0 : 1),
      );
      if (i > 1 && j > 1 && a[i - 1] === b[j - 2] && a[i - 2] === b[j - 1]) {
        cost = Math.min(cost, ((rows[i - 2] as number[])[j - 2] as number) + 1);
      }
      row.push(cost);
    }
    rows.push(row);
  }
  return (rows[a.length] as number[])[b.length] as number;
}

/**
 * An object of options (or undefined, read as `{}`), with only the keys
 * of `known` when given (see `knownOptions`).
 * @throws InvalidOptionError when it is not an object, or has an unknown key.
 */
export function optionsObject<T extends object>(value: T | undefined, where: string, known?: ReadonlySet<string>): T {
  if (value === undefined) return {} as T;
  if (typeof value !== 'object' || value === null || Array.isArray(value)) {
    throw new InvalidOptionError('options', where, 'an object', value);
  }
  if (known) knownOptions(value, known, where);
  return value;
}

/**
 * How long the caller waits for an operation on a context, as Node's and
 * execa's options say it: `moduleStats()`, `tmpdir()`, `jobs()`, a job's
 * `status()`, `cancel()`, `remove()` and `output()`, a Sender's `send()`.
 */
export interface OperationOptions {
  /**
   * Reject with `TimeoutError` after this many milliseconds. Default: no
   * limit (`moduleStats()`: 30000).
   */
  timeout?: number;
  /** Reject with the signal's reason (an `AbortError` by default) when it aborts. */
  signal?: AbortSignal;
}

const OPERATION_OPTIONS: ReadonlySet<string> = new Set(['timeout', 'signal']);

/**
 * Checks the options of an operation on a context (`OperationOptions`):
 * an object (or undefined) with at most a timeout in ms and an AbortSignal.
 * @returns the options, as given (an empty object for undefined).
 * @throws InvalidOptionError naming the bad option.
 */
export function checkOperationOptions(options: OperationOptions | undefined, where: string): OperationOptions {
  const given = optionsObject(options, where, OPERATION_OPTIONS);
  milliseconds(given.timeout, 'timeout', where, undefined);
  abortSignal(given.signal, 'signal', where);
  return given;
}
