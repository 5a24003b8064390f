import { hasParentAuthority } from '../policy.js';
import { integer, MAX_TEXT_LENGTH, record, string, strings, tuple, Violation } from './check.js';
import { CALL_FUNCTION } from './handles.js';
import type { HandleSpec } from './spec.js';

/**
 * Request of CALL_FUNCTION: a shipped function (`f`) or an export (`e`) of
 * a module (`m`), its arguments, and where its `require()`s resolve.
 */
export interface CallPayload {
  /** Source of the function to run. */
  f?: string;
  /** Path (on the master) of the module whose export `e` to run. */
  m?: string;
  /** Name of the export of `m` to run. */
  e?: string;
  /** Arguments. */
  a: unknown[];
  /**
   * File (a path on the master) the function's `require()` and `import()`
   * resolve from, as if written there: a module, or `<dir>/[tendril call]`.
   */
  b?: string;
  /** Specifiers the function requires literally, fetched before it runs. */
  p?: string[];
  /** 1: load the modules the call uses anew, in a module cache of its own (`CallOptions.fresh`). */
  r?: 1;
  /**
   * Where the function's source was written, when the master could tell:
   * its stack frames then name that file and line (see `CallLocation`).
   */
  l?: CallLocation;
}

/**
 * Where a shipped function's source text starts in the file it was
 * written in: the file as the master's stack frames name it (a path, or a
 * `file:` URL), and the 0-based line and column of the text's first
 * character there.
 */
export type CallLocation = [file: string, line: number, column: number];

/** Longest path or specifier in a call, in characters. */
const MAX_PATH = 4096;
/** Largest line or column of a `CallLocation`: well inside what `vm` takes as an offset (an int32). */
const MAX_POSITION = 2 ** 30;

/**
 * `value` as a `CallLocation`: a file of at most 4096 characters, and a
 * line and a column that are integers from 0 to 2^30.
 * @param what how to name it in the error, e.g. `'call.l'`.
 * @throws Violation when it is anything else.
 */
export function callLocation(value: unknown, what: string): CallLocation {
  const [file, line, column] = tuple(value, what, 3);
  return [
    string(file, `${what}[0]`, MAX_PATH),
    integer(line, `${what}[1]`, 0, MAX_POSITION),
    integer(column, `${what}[2]`, 0, MAX_POSITION),
  ];
}

/**
 * CALL_FUNCTION: run a shipped function or a module's export and reply
 * with its result. Parent authority only; arguments and results may carry
 * Senders.
 */
export const CALL_FUNCTION_SPEC: HandleSpec<CallPayload, unknown> = {
  handle: CALL_FUNCTION,
  name: 'CALL_FUNCTION',
  policy: hasParentAuthority,
  senders: true,
  replyName: 'return value',
  request(value) {
    const call = record(value, 'call');
    if (!Array.isArray(call.a)) throw new Violation('call.a: expected the arguments as an array');
    const payload: CallPayload = { a: call.a };
    if (call.m !== undefined) {
      payload.m = string(call.m, 'call.m', MAX_PATH);
      payload.e = string(call.e, 'call.e', MAX_PATH);
    } else payload.f = string(call.f, 'call.f', Number.MAX_SAFE_INTEGER);
    if (call.b !== undefined) payload.b = string(call.b, 'call.b', MAX_PATH);
    if (call.p !== undefined) payload.p = strings(call.p, 'call.p', 10_000, MAX_TEXT_LENGTH);
    if (call.r !== undefined) {
      if (call.r !== 1) throw new Violation('call.r: expected 1 or nothing');
      payload.r = 1;
    }
    if (call.l !== undefined) payload.l = callLocation(call.l, 'call.l');
    return payload;
  },
};
