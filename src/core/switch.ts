import { EventEmitter } from 'eventemitter3';
import { encode } from './codec.js';
import { DeadReplyLimits } from './dead-replies.js';
import { ContextDisconnectedError, MessageTooLargeError, type TendrilError } from './errors.js';
import { EventLoopHolds } from './event-loop-holds.js';
import { DEFAULT_MAX_MESSAGE_SIZE } from './framing.js';
import type { GrantWatch } from './grant-watch.js';
import { type HandlerOptions, HandlerTable } from './handler-table.js';
import type { HeartbeatSettings } from './heartbeat.js';
import { DEFAULT_MAX_HELD_BYTES, type Holding, Holdings } from './holdings.js';
import { type LogRecord, logger } from './log.js';
import { FLAG_DEAD, Message } from './message.js';
import { PressureHolds } from './pressure.js';
import { HANDLE_NAMES } from './protocol/handles.js';
import { PING_SPEC } from './protocol/ping.js';
import { serve } from './protocol/serve.js';
import { type RequestOptions, reply, request } from './request.js';
import { announceDeparture, announceRoute, refuseRoute, serveRouteRequests } from './route-requests.js';
import { type Departure, RouteTable } from './route-table.js';
import { serveServiceCalls } from './service-dispatch.js';
import type { ServiceDispatcher } from './services.js';
import { lineageOf } from './shares.js';
import type { DisconnectKind, Stream } from './stream.js';
import { ROUTER_SWITCH } from './symbols.js';
import { admits } from './trust.js';
import { type RouterWarning, WarningLimits } from './warnings.js';

// Importers outside the core still name these here.
/** Options of `MessageSwitch.addHandler` (see handler-table.ts). */
export type { HandlerOptions } from './handler-table.js';
/** A handler's admission check (see policy.ts). */
export type { Policy } from './policy.js';
/** Options of `MessageSwitch.request` (see request.ts). */
export type { RequestOptions } from './request.js';
/** Where a facade keeps its switch (see symbols.ts). */
export { ROUTER_SWITCH } from './symbols.js';
/** What a `warning` event carries (see warnings.ts). */
export type { RouterWarning } from './warnings.js';

const debug = logger('router');

/** Events a router emits. */
export interface RouterEvents {
  /** A descendant became reachable. */
  route: [contextId: number, name: string];
  /** A context (a descendant) became unreachable: why, and the same in one word. */
  disconnect: [contextId: number, reason: string, kind: DisconnectKind];
  /** The stream to this context's parent closed. */
  parentClosed: [reason: string];
  /** (Master) a line of output from a context. */
  log: [record: LogRecord];
  /** Something was refused or dropped: a forged ID, a policy refusal, a bad route, a failing handler. */
  warning: [warning: RouterWarning];
}

/** Identity of the context a router runs in. */
export interface RouterIdentity {
  /** This context's ID; the master is 0. */
  id: number;
  /** This context's name. */
  name: string;
  /** Ancestors, nearest first: `[parent, grandparent, ..., 0]`. Empty in the master. */
  parentIds: number[];
  /** Largest payload accepted or sent, in bytes. Default 128 MiB. */
  maxMessageSize?: number;
  /** Most bytes the contexts behind one child may make this context hold (see holdings.ts). Default 256 MiB. */
  maxHeldBytes?: number;
}

/** A router, or a facade that holds one under `ROUTER_SWITCH`. */
export type SwitchLike = MessageSwitch | { readonly [ROUTER_SWITCH]: MessageSwitch };

/** The message switch behind `router`. */
export function switchOf(router: SwitchLike): MessageSwitch {
  return router instanceof MessageSwitch ? router : router[ROUTER_SWITCH];
}

/**
 * A context's message switch. Messages addressed to this context go to the
 * handler registered on their handle; others are forwarded toward their
 * destination: down the stream a descendant was announced on, otherwise up
 * to the parent.
 *
 * Trust follows the tree: a message is accepted from a stream only if its
 * src and auth IDs are routed through that stream (descendants through the
 * stream they were announced on, everything else through the parent), so a
 * context cannot speak for an ID it does not own.
 */
export class MessageSwitch extends EventEmitter<RouterEvents> {
  /** This context's ID; the master is 0. */
  readonly id: number;
  /** This context's name. */
  readonly name: string;
  /** Ancestors, nearest first. */
  readonly parentIds: readonly number[];
  /** Largest payload accepted or sent, in bytes. */
  readonly maxMessageSize: number;
  /** Run calls isolated unless they say otherwise (the master's `isolate` option; see `CallOptions.isolate`). */
  isolateCalls = false;
  /** What each child's subtree, and the contexts beyond the parent, make this context hold, bounded by `maxHeldBytes` (see holdings.ts). */
  readonly holdings: Holdings;
  /** The stream to the parent; undefined in the master. */
  parentStream: Stream | undefined;
  private readonly handlers: HandlerTable;
  /** The streams descendants are reached through, names, and what became of departed contexts. */
  private readonly routes = new RouteTable();
  private readonly warningLimits = new WarningLimits();
  private readonly deadReplyLimits = new DeadReplyLimits(
    this,
    (message) => this.warn('flood', message),
    (contextId) => this.nameOf(contextId),
  );
  private readonly routePressure = new PressureHolds(this);
  private readonly holds = new EventLoopHolds();
  /**
   * Serves CALL_TOOLKIT requests once the services layer has installed its
   * registry here (the first `registerService` in this context).
   */
  serviceDispatcher: ServiceDispatcher | undefined;

  /** @param identity this context's ID, name, ancestors and message size limit. */
  constructor(identity: RouterIdentity) {
    super();
    this.id = identity.id;
    this.name = identity.name;
    this.parentIds = identity.parentIds;
    this.maxMessageSize = identity.maxMessageSize ?? DEFAULT_MAX_MESSAGE_SIZE;
    this.holdings = new Holdings(this, identity.maxHeldBytes ?? DEFAULT_MAX_HELD_BYTES);
    this.routes.setName(this.id, this.name);
    this.handlers = new HandlerTable(this.name);
    serveRouteRequests(this, {
      mayRoute: (target, stream) => this.mayRoute(target, stream),
      fullShare: (target, parent) => this.routes.fullShare(target, this.chainUnder(target, parent)),
      addRoute: (target, name, parent, stream) => this.addRoute(target, name, parent, stream),
      deleteRoute: (target, reason, kind) => this.deleteRoute(target, reason, kind),
      onPressure: (target, on, stream) => this.routePressure.onPressure(target, on, stream),
    });
    serveServiceCalls(this);
    serve(this, PING_SPEC, () => null);
  }

  /** ID of the parent context, or -1 in the master. */
  get parentId(): number {
    return this.parentIds[0] ?? -1;
  }

  /** Name recorded for a context ID, or `'context <id>'`. */
  nameOf(contextId: number): string {
    return this.routes.nameOf(contextId);
  }

  /** True when a reachable context known to this router (itself or a descendant) has this name. */
  hasContextNamed(name: string): boolean {
    return this.routes.hasContextNamed(name);
  }

  /**
   * Records that `contextId` is being stopped on purpose, so that once it
   * is gone, errors about it give `why` instead of the stream's end.
   */
  expectDeparture(contextId: number, why: string): void {
    this.routes.expectDeparture(contextId, why);
  }

  /**
   * Takes `contextId` as gone, as if the stream it is reached through had
   * closed: its route is deleted (and the deletion announced upward), what
   * waits on it rejects with `ContextDisconnectedError` giving `reason`
   * (in place of any `expectDeparture` reason), and `disconnect` is
   * emitted; so for every context it started, and they started. For a
   * context whose parent did not confirm its stop in time (a shutdown past
   * its bound): nothing more is sent to it, whatever that parent does.
   */
  forgetRoute(contextId: number, reason: string): void {
    // Its descendants go with it: what it started is reached only through it.
    const below = this.routes.descendants().filter((id) => this.isAncestorOf(contextId, id));
    for (const id of [contextId, ...below]) {
      this.routes.expectDeparture(id, reason);
      this.deleteRoute(id, reason, 'shutdown');
    }
  }

  /** `expectDeparture` for every context this router reaches. */
  expectAllDepartures(why: string): void {
    this.routes.expectAllDepartures(why);
  }

  /** Records a context's name for messages and errors. */
  setName(contextId: number, name: string): void {
    this.routes.setName(contextId, name);
  }

  /** The stream a descendant is reached through, if it is known. */
  routeOf(contextId: number): Stream | undefined {
    return this.routes.get(contextId);
  }

  /**
   * The context that started descendant `contextId`, as its announcement
   * said (each router on the way checked that the parent lies in the
   * subtree it came from), while it is reachable or among the last to
   * have departed; undefined otherwise.
   */
  parentOf(contextId: number): number | undefined {
    return this.routes.parentOf(contextId);
  }

  /**
   * True when `ancestor` started `contextId` or one of its ancestors, as
   * far as this router knows them (its own descendants; this router
   * itself counts for its children).
   */
  isAncestorOf(ancestor: number, contextId: number): boolean {
    const chain = lineageOf(this, contextId);
    return ancestor === this.id ? chain !== undefined : chain !== undefined && chain.indexOf(ancestor, 1) !== -1;
  }

  /** What became of `contextId`, when it went away and has had no route since. */
  departureOf(contextId: number): Departure | undefined {
    return this.routes.has(contextId) ? undefined : this.routes.lastDeparture(contextId);
  }

  /** Largest account of what one child's subtree makes this context hold, in bytes. */
  get maxHeldBytes(): number {
    return this.holdings.limit;
  }

  /**
   * What one operation holds on behalf of `contextId` (bytes it sent and
   * that wait here), charged to the account of the child it is routed
   * through, or to that of the contexts beyond the parent (nothing for
   * this context and its ancestors); see holdings.ts.
   * @param what what is held, for the `HeldBytesError` past the limit.
   */
  holding(contextId: number, what: string): Holding {
    return this.holdings.holding(contextId, what);
  }

  /** True when `contextId` is a known, reachable descendant. */
  hasRoute(contextId: number): boolean {
    const stream = this.routes.get(contextId);
    return stream !== undefined && !stream.closed;
  }

  /**
   * Registers a handler and returns its handle number.
   * @throws Error when `options.handle` is already registered.
   */
  addHandler(fn: (message: Message, stream: Stream | undefined) => void, options: HandlerOptions = {}): number {
    return this.handlers.add(fn, options);
  }

  /** Removes a handler without calling its `onClose`. */
  removeHandler(handle: number): void {
    this.handlers.remove(handle);
  }

  /**
   * Sends a message originating in this context.
   * @throws MessageTooLargeError when the payload exceeds `maxMessageSize`.
   */
  send(message: Message): void {
    if (message.data.length > this.maxMessageSize) {
      throw new MessageTooLargeError(
        message.data.length,
        this.maxMessageSize,
        `a message to ${this.describeDestination(message)}`,
      );
    }
    this.route(message, undefined);
  }

  /**
   * Sends `value` to `handle` in context `dst` and resolves with the reply.
   * Rejects with `ChannelError` if the message cannot be delivered or the
   * destination disconnects, `TimeoutError` after `options.timeout` ms, the
   * signal's reason on abort, and `MessageTooLargeError` or
   * `UnsupportedValueError` (synchronously thrown into the promise) when the
   * value cannot be sent.
   */
  request(dst: number, handle: number, payload: Uint8Array, options: RequestOptions = {}): Promise<Message> {
    return request(this, dst, handle, payload, options);
  }

  /**
   * Replies to `message` with `value`, in the success envelope, on its
   * reply-to handle; does nothing if it expects no reply. For the one
   * request answered outside `serve()`: BOOT, which arrives before there
   * is a router to serve it.
   * @throws UnsupportedValueError, MessageTooLargeError as `send`.
   */
  reply(message: Message, value: unknown): void {
    reply(this, message, value);
  }

  /**
   * Routes a message: delivers it here or forwards it. `inStream` is the
   * stream it arrived on, undefined when it originates in this context.
   */
  route(message: Message, inStream: Stream | undefined): void {
    if (inStream && !admits(this, message, inStream)) return;
    if (message.dst === this.id) {
      this.deliver(message, inStream);
      return;
    }
    const out = this.routes.get(message.dst) ?? this.parentStream;
    if (!out || out.closed) {
      const departure = this.routes.lastDeparture(message.dst);
      this.deadReply(
        message,
        departure
          ? `context '${departure.name}' (id ${message.dst}) is gone: ${departure.reason}`
          : `no route to context ${message.dst} from ${this.name}`,
        inStream,
      );
      return;
    }
    if (out === inStream) {
      this.deadReply(
        message,
        `routing loop: context ${message.dst} is reached through the stream the message came from`,
        inStream,
      );
      return;
    }
    if (inStream && message.data.length > this.maxMessageSize) {
      this.deadReply(message, `message too large to forward (${message.data.length} bytes)`, inStream);
      return;
    }
    this.grants?.forwarded(message, inStream, this.parentStream);
    out.send(message);
    if (!inStream || !out.needsDrain) return;
    // A message from a child forwarded into a stream past its high-water
    // mark (its peer is slow or not reading): that child is not read from
    // until the stream drains, so one child cannot fill another's queue, or
    // this context's memory, and nothing it sent is lost. Other streams flow
    // on. The parent's stream is never paused (that would stall the whole
    // subtree): the parent is told to hold calls to that destination
    // instead, and Senders keep to their credit windows.
    if (inStream !== this.parentStream) inStream.waitFor(out);
    else this.routePressure.pressure(out, message.dst);
  }

  /**
   * Undefined when a message to `dst` can be sent now; otherwise a promise
   * that resolves once the stream it leaves by has drained below its
   * high-water mark (or closed), or, when a context on the way reported
   * its stream toward `dst` backed up (ROUTE_PRESSURE), once that one has
   * drained or `dst` has gone. Callers check again after it resolves.
   */
  whenWritable(dst: number): Promise<void> | undefined {
    return this.routePressure.whenWritable(dst);
  }

  /** The stream a message claiming `id` must arrive on (and the one a message to `id` leaves by). */
  expectedStream(id: number): Stream | undefined {
    return this.routes.get(id) ?? this.parentStream;
  }

  /**
   * Reports a refused or dropped message: to `debug` and to `warning`
   * listeners. A flood of one kind is reported at a bounded rate (a burst of
   * 100, then 100 a second per code); the next report says how many were
   * left out.
   */
  warn(code: RouterWarning['code'], message: string): void {
    const text = this.warningLimits.admit(code, message);
    if (text === undefined) return;
    debug('warning: %s', text);
    this.emit('warning', { code, message: text });
  }

  private deliver(message: Message, inStream: Stream | undefined): void {
    const entry = this.handlers.get(message.handle);
    if (!entry) {
      if (message.isDead) return;
      this.deadReply(message, `no handle ${message.handle} in context '${this.name}' (id ${this.id})`, inStream);
      return;
    }
    if (entry.policy && !entry.policy(message, inStream)) {
      const name = HANDLE_NAMES[message.handle] ?? `handle ${message.handle}`;
      this.warn(
        'policy',
        `${this.name}: refused a message from context ${message.src} (auth ${message.auth}) to ${name}: not allowed by its policy`,
      );
      this.deadReply(message, `refused by policy of ${name} in context '${this.name}'`, inStream);
      return;
    }
    if (!entry.persist) this.removeHandler(message.handle);
    try {
      entry.fn(message, inStream);
    } catch (error) {
      this.warn('handler', `${this.name}: handler for ${message} threw: ${(error as Error)?.stack ?? error}`);
    }
  }

  /**
   * Tells the sender of an undeliverable message why, so its pending
   * request rejects instead of hanging. `inStream` is the stream the
   * message came in on: each stream earns a bounded rate of dead replies,
   * past which they are dropped (with a `flood` warning once a second).
   */
  deadReply(message: Message, reason: string, inStream?: Stream): void {
    debug('%s: cannot deliver %s: %s', this.name, message, reason);
    if (message.isDead || message.replyTo === 0) return;
    if (inStream && !this.deadReplyLimits.mayReply(inStream, message.src, this.name)) return;
    const dead = new Message(
      { dst: message.src, src: this.id, auth: this.id, handle: message.replyTo, replyTo: 0, flags: FLAG_DEAD },
      encode(reason),
    );
    if (message.src === this.id) this.deliver(dead, undefined);
    else this.route(dead, undefined);
  }

  /**
   * Attaches the stream to a child context `childId`, announces the route
   * upward, and routes the messages that arrive on it; with `heartbeat`,
   * watches the child (see heartbeat.ts).
   */
  addChildStream(stream: Stream, childId: number, name: string, heartbeat: HeartbeatSettings | false = false): void {
    stream.remoteId = childId;
    this.attach(stream, heartbeat);
    this.addRoute(childId, name, this.id, stream);
    stream.on('close', (reason, kind) => this.onStreamClosed(stream, reason, kind));
  }

  /** Attaches the stream to this context's parent; with `heartbeat`, watches the parent. */
  setParentStream(stream: Stream, heartbeat: HeartbeatSettings | false = false): void {
    this.parentStream = stream;
    stream.remoteId = this.parentId;
    this.attach(stream, heartbeat);
    stream.on('close', (reason, kind) => this.onStreamClosed(stream, reason, kind));
  }

  private attach(stream: Stream, heartbeat: HeartbeatSettings | false): void {
    this.holds.attach(stream, this.parentStream);
    stream.onMessage = (message, from) => this.route(message, from);
    if (heartbeat) stream.startHeartbeat(heartbeat, this.id);
  }

  /**
   * Whether a descendant may announce `target` through `stream`. The master
   * narrows this to IDs it allocated to that stream's subtree.
   */
  protected mayRoute(target: number, stream: Stream): boolean {
    if (target === this.id || this.parentIds.includes(target)) return false;
    const existing = this.routes.get(target);
    // IDs are never reused: one that went away does not come back (the master remembers them all).
    if (existing === undefined && this.routes.lastDeparture(target) !== undefined) return false;
    if (this.idClaims && !this.idClaims(target, stream.remoteId)) return false;
    return existing === undefined || existing === stream || existing.closed;
  }

  /**
   * Whether the child `childId` may announce `target`, as this context's
   * ID source knows: only an ID of a block that went to that child (see
   * `IdPool.mayClaim`). Undefined in the master, which checks its own
   * blocks.
   */
  idClaims: ((target: number, childId: number) => boolean) | undefined;

  /** Sees the blocks of IDs the master grants through this context (see grant-watch.ts); none in the master. */
  grants: GrantWatch | undefined;

  /** `target` and its ancestors up to the child of this context it is reached through, given its `parent`. */
  private chainUnder(target: number, parent: number): number[] {
    if (parent === this.id) return [target];
    return [target, ...(lineageOf(this, parent) ?? [parent])];
  }

  private addRoute(target: number, announced: string, parent: number, stream: Stream): void {
    const name = this.routeName(target, announced);
    this.routes.add(target, name, parent, stream, this.chainUnder(target, parent));
    announceRoute(this, target, name, parent);
    this.emit('route', target, name);
  }

  /**
   * The name a route is recorded under: as announced. The master makes it
   * unique (its log lines are prefixed with names).
   */
  protected routeName(_target: number, announced: string): string {
    return announced;
  }

  /**
   * Refuses a child's request about the route to `target`: reported once,
   * as a `bad-route` warning, and thrown, so that a request that asked for
   * a reply is answered with the error, never with success.
   * @throws RouteRefusedError always.
   */
  refuseRoute(handleName: string, target: number, stream: Stream | undefined, reason: string): never {
    return refuseRoute(this, handleName, target, stream, reason);
  }

  private deleteRoute(target: number, streamReason: string, streamKind: DisconnectKind): void {
    const departure = this.routes.delete(target, streamReason, streamKind);
    if (departure === undefined) return;
    const { reason, kind } = departure;
    this.routePressure.relieve(target);
    announceDeparture(this, target, reason, kind);
    this.disconnected(target, reason, kind);
  }

  /** Rejects everything waiting on `contextId` and emits `disconnect`. */
  private disconnected(contextId: number, reason: string, kind: DisconnectKind): void {
    this.handlers.closeAwaiting(
      contextId,
      () => new ContextDisconnectedError(this.nameOf(contextId), contextId, reason, kind),
    );
    this.emit('disconnect', contextId, reason, kind);
  }

  private onStreamClosed(stream: Stream, reason: string, kind: DisconnectKind): void {
    this.holds.detach(stream);
    this.deadReplyLimits.streamClosed(stream);
    if (stream.remoteId >= 0) debug('%s: stream %s closed: %s', this.name, stream.name, reason);
    for (const target of this.routes.reachedThrough(stream)) {
      this.deleteRoute(target, `${reason} (stream to ${stream.name})`, kind);
    }
    if (stream === this.parentStream) this.emit('parentClosed', reason);
  }

  /**
   * Closes every handler that is still waiting, rejecting it with `error`.
   * Used at shutdown so nothing is left pending.
   */
  closeHandlers(error: TendrilError): void {
    this.handlers.closeAll(error);
  }

  /** Keeps child streams referenced (the event loop alive) while requests are in flight. */
  hold(): void {
    this.holds.hold();
  }

  /**
   * Puts `stream` back in line with the requests in flight: referenced
   * while there are any, else not. For a transport that changed it
   * behind the router's back (an SSH connection's socket is both the
   * child's "process" and the stream's socket).
   */
  followHolds(stream: Stream): void {
    this.holds.follow(stream, this.parentStream);
  }

  /** Undoes one `hold()`; when none remain, child streams stop keeping the process alive. */
  release(): void {
    this.holds.release(this.parentStream);
  }

  private describeDestination(message: Message): string {
    const name = HANDLE_NAMES[message.handle] ?? `handle ${message.handle}`;
    return `${name} in context '${this.nameOf(message.dst)}' (id ${message.dst})`;
  }
}
