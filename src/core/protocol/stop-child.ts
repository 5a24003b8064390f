import { hasParentAuthority } from '../policy.js';
import { contextId, integer, tuple } from './check.js';
import { STOP_CHILD } from './handles.js';
import type { HandleSpec } from './spec.js';

/** Request of STOP_CHILD: the child and the grace period in ms (null: the broker's default). */
export type StopChildRequest = [contextId: number, grace: number | null];

/** Longest grace period accepted, in ms: one day. */
const MAX_GRACE = 24 * 60 * 60 * 1000;

/**
 * STOP_CHILD: stop a child of the receiving context (ask, SIGTERM, SIGKILL)
 * and reply `null` once it is reaped. Parent authority only.
 */
export const STOP_CHILD_SPEC: HandleSpec<StopChildRequest, null> = {
  handle: STOP_CHILD,
  name: 'STOP_CHILD',
  policy: hasParentAuthority,
  request(value) {
    const [id, grace] = tuple(value, 'request', 2);
    return [contextId(id, 'contextId'), grace === null ? null : integer(grace, 'grace', 0, MAX_GRACE)];
  },
  reply: () => null,
};
