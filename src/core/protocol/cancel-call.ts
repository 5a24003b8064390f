import { hasParentAuthority } from '../policy.js';
import { integer, tuple, Violation } from './check.js';
import { CANCEL_CALL, FIRST_DYNAMIC_HANDLE } from './handles.js';
import type { HandleSpec } from './spec.js';

/**
 * Request of CANCEL_CALL: the reply-to handle of the sender's call to
 * stop, why (its timeout, with the limit in ms, or its signal).
 */
export type CancelCallRequest = [replyTo: number, kind: 'timeout' | 'abort', timeoutMs: number | null];

/** Largest handle number a reply-to can have. */
const MAX_HANDLE = 0xffffffff;

/**
 * CANCEL_CALL: the caller gave up on its call whose reply goes to
 * `replyTo` (its timeout passed or its signal aborted): abort that call's
 * signal. Only the context that made the call can stop it (calls are
 * keyed by sender); parent authority only; no reply.
 */
export const CANCEL_CALL_SPEC: HandleSpec<CancelCallRequest, never> = {
  handle: CANCEL_CALL,
  name: 'CANCEL_CALL',
  policy: hasParentAuthority,
  request(value) {
    const [replyTo, kind, timeoutMs] = tuple(value, 'request', 3);
    if (kind !== 'timeout' && kind !== 'abort') throw new Violation("kind: expected 'timeout' or 'abort'");
    return [
      integer(replyTo, 'replyTo', FIRST_DYNAMIC_HANDLE, MAX_HANDLE),
      kind,
      timeoutMs === null ? null : integer(timeoutMs, 'timeoutMs', 0, Number.MAX_SAFE_INTEGER),
    ];
  },
};
