import { fromChildStream } from '../policy.js';
import { contextId, integer, tuple } from './check.js';
import { ROUTE_PRESSURE } from './handles.js';
import type { HandleSpec } from './spec.js';

/** Request of ROUTE_PRESSURE: a descendant, and whether messages to it should wait (1) or may flow again (0). */
export type RoutePressure = [contextId: number, congested: 0 | 1];

/**
 * ROUTE_PRESSURE: the stream toward a descendant is backed up in the
 * context this came from (which forwards what its parent sends there), or
 * has drained. The parent holds calls to that descendant until it has,
 * and tells its own parent in turn, so calls wait where they are made
 * instead of in the middle. From a child stream only, about a context
 * routed through it (anything else is refused with a `RouteRefusedError`);
 * routers send it without asking for a reply, as ADD_ROUTE.
 */
export const ROUTE_PRESSURE_SPEC: HandleSpec<RoutePressure, never> = {
  handle: ROUTE_PRESSURE,
  name: 'ROUTE_PRESSURE',
  policy: fromChildStream,
  request(value) {
    const [id, congested] = tuple(value, 'request', 2);
    return [contextId(id, 'contextId'), integer(congested, 'congested', 0, 1) as 0 | 1];
  },
};
