import { registerRemoteErrors, TendrilError } from '../errors.js';
import { fromChildStream } from '../policy.js';
import type { DisconnectKind } from '../stream.js';
import { contextId, MAX_TEXT_LENGTH, shownString, tuple } from './check.js';
import { ADD_ROUTE, DEL_ROUTE } from './handles.js';
import type { HandleSpec } from './spec.js';

/**
 * Request of ADD_ROUTE: a descendant, its name, and the context that
 * started it (its parent: the sender itself for its own child).
 */
export type AddRoute = [contextId: number, name: string, parent: number];
/** Request of DEL_ROUTE: a descendant, why it went away, and the same in one word. */
export type DelRoute = [contextId: number, reason: string, kind: DisconnectKind];

const KINDS: readonly DisconnectKind[] = ['heartbeat', 'process exited', 'stream ended', 'shutdown'];

/**
 * ADD_ROUTE: a descendant became reachable through the stream this came
 * in on. From a child stream only, sent by the child at its other end
 * (route requests travel one hop at a time, each router announcing to its
 * parent what it learnt). Routers send it without asking for a reply; one
 * that asks gets `null`, or, when the ID may not be announced there, a
 * `RouteRefusedError`.
 */
export const ADD_ROUTE_SPEC: HandleSpec<AddRoute, null> = {
  handle: ADD_ROUTE,
  name: 'ADD_ROUTE',
  policy: fromChildStream,
  request(value) {
    const [id, name, parent] = tuple(value, 'request', 3);
    // The name is the child's to choose and is printed (errors, log lines, events): escaped.
    return [contextId(id, 'contextId'), shownString(name, 'name'), contextId(parent, 'parent')];
  },
};

/**
 * DEL_ROUTE: a descendant is no longer reachable. From a child stream
 * only, sent by the child at its other end, about a context routed
 * through it (anything else is refused with a `RouteRefusedError`);
 * replies as ADD_ROUTE.
 */
export const DEL_ROUTE_SPEC: HandleSpec<DelRoute, null> = {
  handle: DEL_ROUTE,
  name: 'DEL_ROUTE',
  policy: fromChildStream,
  request(value) {
    const [id, reason, kind] = tuple(value, 'request', 2, 3);
    return [
      contextId(id, 'contextId'),
      shownString(reason, 'reason', MAX_TEXT_LENGTH),
      // Anything else (an older child's two items included) is an ending stream, as it was before there were kinds.
      KINDS.includes(kind as DisconnectKind) ? (kind as DisconnectKind) : 'stream ended',
    ];
  },
};

/**
 * A child's ADD_ROUTE, DEL_ROUTE, ROUTE_PRESSURE or FORWARD_LOG about a
 * context ID was refused: the ID is not its to announce, withdraw, hold or
 * speak for (it belongs to another subtree, to this context or an
 * ancestor), or the child announced too many. The router reports it once, as a `bad-route` warning, and
 * answers a request that asked for a reply with this error; nothing
 * changes. Code `ERR_TENDRIL_ROUTE_REFUSED`.
 */
export class RouteRefusedError extends TendrilError {
  /** The request refused: `'ADD_ROUTE'`, `'DEL_ROUTE'`, `'ROUTE_PRESSURE'` or `'FORWARD_LOG'`. */
  readonly handleName: string;
  /** The context ID the request was about. */
  readonly target: number;
  /** Name of the child stream it came from. */
  readonly contextName: string;
  /** Why it was refused. */
  readonly reason: string;

  /**
   * @param handleName the request refused.
   * @param target the context ID it was about.
   * @param contextName the child stream it came from.
   * @param reason why, e.g. `'that ID does not belong to its subtree'`.
   */
  constructor(handleName: string, target: number, contextName: string, reason: string) {
    super(
      `refused ${handleName} for context ${target} from stream ${contextName}: ${reason}`,
      'ERR_TENDRIL_ROUTE_REFUSED',
    );
    this.handleName = handleName;
    this.target = target;
    this.contextName = contextName;
    this.reason = reason;
  }
}

registerRemoteErrors({ RouteRefusedError });
