import { hasParentAuthority } from '../policy.js';
import { MAX_TEXT_LENGTH, record, string, strings, Violation } from './check.js';
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
}

/** Longest path or specifier in a call, in characters. */
const MAX_PATH = 4096;

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
    return payload;
  },
};
