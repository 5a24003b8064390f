import { fromChildStream } from '../policy.js';
import { contextId, MAX_TEXT_LENGTH, string, tuple } from './check.js';
import { ADD_ROUTE, DEL_ROUTE } from './handles.js';
import type { HandleSpec } from './spec.js';

/** Request of ADD_ROUTE: a descendant and its name. */
export type AddRoute = [contextId: number, name: string];
/** Request of DEL_ROUTE: a descendant and why it went away. */
export type DelRoute = [contextId: number, reason: string];

/**
 * ADD_ROUTE: a descendant became reachable through the stream this came
 * in on. From a child stream only; no reply. The router checks the ID may
 * be announced there.
 */
export const ADD_ROUTE_SPEC: HandleSpec<AddRoute, never> = {
  handle: ADD_ROUTE,
  name: 'ADD_ROUTE',
  policy: fromChildStream,
  request(value) {
    const [id, name] = tuple(value, 'request', 2);
    return [contextId(id, 'contextId'), string(name, 'name')];
  },
};

/** DEL_ROUTE: a descendant is no longer reachable. From a child stream only; no reply. */
export const DEL_ROUTE_SPEC: HandleSpec<DelRoute, never> = {
  handle: DEL_ROUTE,
  name: 'DEL_ROUTE',
  policy: fromChildStream,
  request(value) {
    const [id, reason] = tuple(value, 'request', 2);
    return [contextId(id, 'contextId'), string(reason, 'reason', MAX_TEXT_LENGTH)];
  },
};
