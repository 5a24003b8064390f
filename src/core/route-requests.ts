import { describeError } from './errors.js';
import { Message } from './message.js';
import { ROUTE_PRESSURE_SPEC } from './protocol/route-pressure.js';
import { ADD_ROUTE_SPEC, DEL_ROUTE_SPEC, RouteRefusedError } from './protocol/routes.js';
import { type ServeOptions, serve } from './protocol/serve.js';
import { MAX_ROUTES_PER_STREAM } from './route-table.js';
import { lineageOf, MAX_TREE_DEPTH } from './shares.js';
import type { DisconnectKind, Stream } from './stream.js';
import type { MessageSwitch } from './switch.js';

/**
 * The route requests between a context and its parent: a child announces
 * the descendants it reaches (ADD_ROUTE), withdraws them (DEL_ROUTE) and
 * reports streams backed up toward them (ROUTE_PRESSURE). Each is served
 * only when the child may say it, and only from the child itself: they
 * travel one hop at a time, so a request whose src is a context behind
 * the child (a grandchild writing straight to this context) speaks for
 * that child's subtree without being the child, and is refused. This
 * context sends the first two up when its own routes change.
 */

/** What a served route request changes, on the switch that serves it. */
export interface RouteChanges {
  /** Whether a descendant may announce `target` through `stream` (see `MessageSwitch.mayRoute`). */
  mayRoute(target: number, stream: Stream): boolean;
  /**
   * The share of routes that `target`, started by `parent`, would pass
   * (that of the child, or of an ancestor of `target` below it), or
   * undefined when it fits.
   */
  fullShare(target: number, parent: number): { contextId: number; share: number } | undefined;
  /** Records the route a child announced (`target`, started by `parent`), and tells this context's parent. */
  addRoute(target: number, name: string, parent: number, stream: Stream): void;
  /** Forgets the route a child withdrew, and tells this context's parent. */
  deleteRoute(target: number, reason: string, kind: DisconnectKind): void;
  /** Serves ROUTE_PRESSURE (see pressure.ts). */
  onPressure(target: number, on: 0 | 1, stream: Stream | undefined): null;
}

/** Serves ADD_ROUTE, DEL_ROUTE and ROUTE_PRESSURE on `host`. */
export function serveRouteRequests(host: MessageSwitch, changes: RouteChanges): void {
  // A refusal was reported as it was made (`refuseRoute`); any other failure is a handler's.
  const routeRequests: ServeOptions = {
    onUnanswered: (error, message) => {
      if (error instanceof RouteRefusedError) return;
      host.warn('handler', `${host.name}: a route request from context ${message.src} failed: ${describeError(error)}`);
    },
  };
  serve(
    host,
    ADD_ROUTE_SPEC,
    ([target, name, parent], message, stream) => {
      fromPeer(host, 'ADD_ROUTE', target, message, stream);
      if (!stream || !changes.mayRoute(target, stream)) {
        refuseRoute(host, 'ADD_ROUTE', target, stream, 'that ID does not belong to its subtree');
      }
      // The parent is the child itself or a context it reaches: a child cannot place its descendants under another.
      if (parent === target || (parent !== stream.remoteId && host.routeOf(parent) !== stream)) {
        refuseRoute(host, 'ADD_ROUTE', target, stream, `its parent ${parent} is not in that subtree`);
      }
      const known = host.parentOf(target);
      if (host.routeOf(target) === stream && known !== undefined && known !== parent) {
        refuseRoute(host, 'ADD_ROUTE', target, stream, `it was announced before with parent ${known}`);
      }
      // The parent's chain must reach this context's child, without the target on it (a cycle of withdrawn and
      // re-announced routes would make every share below unknowable) and within the depth bound.
      const chain = lineageOf(host, parent);
      if (chain === undefined || chain.length >= MAX_TREE_DEPTH || chain.includes(target)) {
        refuseRoute(
          host,
          'ADD_ROUTE',
          target,
          stream,
          `its parent ${parent} is not in that subtree within ${MAX_TREE_DEPTH} levels, or was started by it`,
        );
      }
      const full = changes.fullShare(target, parent);
      if (full !== undefined) {
        refuseRoute(
          host,
          'ADD_ROUTE',
          target,
          stream,
          full.contextId === stream.remoteId
            ? `it already announced ${MAX_ROUTES_PER_STREAM} contexts`
            : `context ${full.contextId} and the contexts it started already have their share of ${full.share} routes`,
        );
      }
      changes.addRoute(target, name, parent, stream);
      return null;
    },
    routeRequests,
  );
  serve(
    host,
    DEL_ROUTE_SPEC,
    ([target, reason, kind], message, stream) => {
      fromPeer(host, 'DEL_ROUTE', target, message, stream);
      if (host.routeOf(target) !== stream) {
        refuseRoute(host, 'DEL_ROUTE', target, stream, 'that context is not reached through it');
      }
      changes.deleteRoute(target, reason, kind);
      return null;
    },
    routeRequests,
  );
  serve(
    host,
    ROUTE_PRESSURE_SPEC,
    ([target, on], message, stream) => {
      fromPeer(host, 'ROUTE_PRESSURE', target, message, stream);
      return changes.onPressure(target, on, stream);
    },
    routeRequests,
  );
}

/**
 * Refuses a route request not sent by the context at the other end of
 * `stream`: only that child speaks for the routes through it.
 * @throws RouteRefusedError when `message.src` is not that child.
 */
function fromPeer(
  host: MessageSwitch,
  handleName: string,
  target: number,
  message: Message,
  stream: Stream | undefined,
): void {
  if (stream === undefined || message.src !== stream.remoteId) {
    refuseRoute(
      host,
      handleName,
      target,
      stream,
      `it was sent by context ${message.src}, not by the child at the end of that stream`,
    );
  }
}

/**
 * Refuses a child's request about the route to `target`: reported once,
 * as a `bad-route` warning, and thrown, so that a request that asked for
 * a reply is answered with the error, never with success.
 * @throws RouteRefusedError always.
 */
export function refuseRoute(
  host: MessageSwitch,
  handleName: string,
  target: number,
  stream: Stream | undefined,
  reason: string,
): never {
  const error = new RouteRefusedError(handleName, target, stream?.name ?? host.name, reason);
  host.warn('bad-route', `${host.name}: ${error.message}`);
  throw error;
}

/** Tells the parent, if its stream is open, that `target` became reachable (ADD_ROUTE, with its name and parent). */
export function announceRoute(host: MessageSwitch, target: number, name: string, parent: number): void {
  tellParent(host, ADD_ROUTE_SPEC.handle, [target, name, parent]);
}

/** Tells the parent, if its stream is open, that `target` went away (DEL_ROUTE, with why, in words and in one). */
export function announceDeparture(host: MessageSwitch, target: number, reason: string, kind: DisconnectKind): void {
  tellParent(host, DEL_ROUTE_SPEC.handle, [target, reason, kind]);
}

function tellParent(host: MessageSwitch, handle: number, request: unknown[]): void {
  if (host.parentStream && !host.parentStream.closed) {
    host.parentStream.send(
      Message.encoded({ dst: host.parentId, src: host.id, auth: host.id, handle, replyTo: 0 }, request),
    );
  }
}
