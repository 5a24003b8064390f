/**
 * One connection per target: a cache of contexts keyed by target, with
 * reference counts, shared starts, and limits on starts in flight and on
 * contexts held. The design follows Mitogen's ContextService (a context
 * per key, refcounts, waiters sharing one connect, LRU closing of unused
 * contexts), with the limit on contexts over the whole pool rather than
 * per via.
 */
import PQueue from 'p-queue';
import type { CommonOptions } from '../../connection/bootstrap.js';
import { ownMethod } from '../../connection/connect.js';
import type { ConnectionMethod } from '../../connection/method.js';
import { ContextDisconnectedError, InvalidOptionError, TimeoutError } from '../../core/errors.js';
import { abortSignal, integer, milliseconds, optionsObject } from '../../core/options.js';
import { type MessageSwitch, ROUTER_SWITCH } from '../../core/switch.js';
import type { ViaOption } from '../../master/master-switch.js';
import { Context } from '../context.js';
import { PoolError } from './errors.js';
import { type ParsedTarget, type PoolTarget, parseTarget } from './target.js';

/**
 * Default `maxConnecting`: 10, OpenSSH's default `MaxStartups` (10:30:100),
 * past which sshd starts dropping connections that have not yet
 * authenticated: a burst of starts to one host (many accounts, or sudo
 * targets through it) never trips it. Starts are also CPU-heavy on the
 * master (each sends the core), so more at once does not finish sooner.
 */
export const DEFAULT_MAX_CONNECTING = 10;

/**
 * Default `maxContexts`: 256. A pool is a cache, and without a bound a
 * long-running program keeps one interpreter per target it ever used
 * (each tens of MB on its host and a stream in the master); 256 leaves
 * room for fleets of hundreds and closes the least recently used idle
 * context past it.
 */
export const DEFAULT_MAX_CONTEXTS = 256;

/** Options of `new ContextPool()`. */
export interface PoolOptions {
  /**
   * Connection starts in flight at once; further starts queue in order.
   * Default `DEFAULT_MAX_CONNECTING` (10).
   */
  maxConnecting?: number;
  /**
   * Contexts the pool holds at once, idle or in use, starting ones
   * included (an integer, or `Infinity`). A start past it first closes
   * the least recently used idle context; when none is idle, it waits for
   * one to be released (under its acquire's `signal` and `timeout`).
   * Default `DEFAULT_MAX_CONTEXTS` (256).
   */
  maxContexts?: number;
  /**
   * Milliseconds an idle context (no lease) stays open before the pool
   * closes it; 0 keeps it until it is needed for room or the pool closes.
   * Default 0.
   */
  idleTimeout?: number;
}

/** Options of `pool.acquire()` and `pool.use()`. */
export interface AcquireOptions {
  /**
   * Start a new context for this lease alone, shared with nobody, and
   * close it when the lease is released. Its pooled `via` is shared as usual.
   */
  unique?: boolean;
  /**
   * Stop waiting when it aborts: the acquire rejects with its reason. The
   * start it waited on goes on for other acquires of the same target; when
   * none is left, a start that has not yet begun connecting is dropped, and
   * one already connecting finishes and joins the pool idle.
   */
  signal?: AbortSignal;
  /** Reject with `TimeoutError` after this many ms (waiting for room and connecting included), as `signal` would. */
  timeout?: number;
}

/** A context held from a pool until `release()`. */
export interface PoolLease {
  /** The context. Once it dies, calls to it fail as for any dead context; acquire again for a new one. */
  readonly context: Context;
  /** The target's key: leases with equal keys share a context (unless acquired `unique`). */
  readonly key: string;
  /** How the pool names the target in errors, e.g. `'sudo:root via ssh:deploy@web1:22'`. */
  readonly label: string;
  /** Gives the context back; at no lease left it stays open, idle. Idempotent. */
  release(): void;
  /** `using lease = await pool.acquire(...)` releases it at the end of the scope. */
  [Symbol.dispose](): void;
}

/** Counters of a pool, from `pool.stats()`. */
export interface PoolStats {
  /** Contexts open and held by the pool, idle ones included. */
  contexts: number;
  /** Of those, contexts no lease holds. */
  idle: number;
  /** Starts under way in their connection method (at most `maxConnecting`). */
  connecting: number;
  /** Starts waiting for room (`maxContexts`) or for their turn (`maxConnecting`). */
  waiting: number;
  /** Acquires served by an open context or a start already under way (vias included). */
  hits: number;
  /** Acquires that started a context (vias and `unique` ones included). */
  misses: number;
}

type State = 'starting' | 'ready' | 'closing' | 'gone';

/** An acquire waiting for a start. */
interface Waiter {
  resolve(lease: PoolLease): void;
  reject(error: unknown): void;
}

/** One context of the pool, from its start until it is gone. */
class Entry {
  state: State = 'starting';
  context: Context | undefined;
  /** Leases held. */
  refs = 0;
  readonly waiters = new Set<Waiter>();
  /** The lease on the pooled via, held while this context lives. */
  viaLease: PoolLease | undefined;
  /** Counts against `maxContexts`. */
  placed = false;
  /** The start reached its connection method, which cannot be interrupted: it is never abandoned after that. */
  connecting = false;
  /** Stops a start that has not reached its connection method. */
  readonly cancel = new AbortController();
  idleTimer: ReturnType<typeof setTimeout> | undefined;
  /** Settles when the start has succeeded or failed. */
  started: Promise<void> = Promise.resolve();
  /** Settles once the context has been shut down by the pool. */
  closed: Promise<void> | undefined;

  constructor(
    readonly target: ParsedTarget,
    readonly unique: boolean,
  ) {}
}

/** A start waiting for room under `maxContexts`. */
interface RoomWaiter {
  grant(): void;
}

/** Key of the method `router.shutdown()` closes a pool with (see `routerShuttingDown`). */
const ROUTER_SHUTDOWN: unique symbol = Symbol('tendril.poolRouterShutdown') as never;

/**
 * What a pool needs of the router it starts contexts with: the `Router`
 * is one. (The pool takes this rather than the `Router` class, which sits
 * above the toolkit and offers the pool as `router.pool`.)
 */
export interface PoolRouter {
  /** Starts a context with `method` (as `router.connect()`). */
  connect<O extends CommonOptions>(method: ConnectionMethod<O>, options: O & ViaOption): Promise<Context>;
  /** Subscribes to the router's `disconnect` event (a context became unreachable). */
  on(event: 'disconnect', listener: (contextId: number) => void): unknown;
  /** Unsubscribes from it. */
  off(event: 'disconnect', listener: (contextId: number) => void): unknown;
  /** The message switch behind the router (internal). */
  readonly [ROUTER_SWITCH]: MessageSwitch;
}

/** The options a pool takes (`PoolOptions`). */
const POOL_OPTIONS = new Set(['maxConnecting', 'maxContexts', 'idleTimeout']);
/** The options an acquire takes (`AcquireOptions`), from the pool or through the listener. */
export const ACQUIRE_OPTIONS: ReadonlySet<string> = new Set(['unique', 'timeout', 'signal']);

/** The pools of each router, so that `router.shutdown()` closes them. */
const pools = new WeakMap<PoolRouter, Set<ContextPool>>();

/**
 * A pool of contexts with one connection per target: acquiring a target
 * that already has a context (same method, host, port, user, name and via
 * chain; see docs/pool.md) returns that context instead of opening another
 * connection. Contexts are counted by lease and stay open, idle, when the
 * last lease is released, until room is needed, `idleTimeout` passes, or
 * the pool closes. Every router has one, `router.pool`; make others for
 * other limits.
 *
 * ```ts
 * const pool = new ContextPool(router, { maxContexts: 20 });
 * const lease = await pool.acquire({ method: 'ssh', hostname: 'web1' });
 * try {
 *   console.log(await lease.context.call(() => process.pid));
 * } finally {
 *   lease.release();
 * }
 * ```
 *
 * The pool keeps nothing alive: the process may exit with contexts in it,
 * and `router.shutdown()` closes it (pending acquires reject with `PoolError`).
 */
export class ContextPool {
  readonly #router: PoolRouter;
  readonly #maxContexts: number;
  readonly #idleTimeout: number;
  readonly #queue: PQueue;
  /** Shared contexts (and their starts) by key; `unique` ones are only in `#all`. */
  readonly #entries = new Map<string, Entry>();
  readonly #all = new Set<Entry>();
  readonly #byId = new Map<number, Entry>();
  /** Idle contexts, least recently used first. */
  readonly #idle = new Set<Entry>();
  readonly #roomWaiters: RoomWaiter[] = [];
  /** Places counted against `maxContexts`. */
  #placed = 0;
  /** Contexts the pool is shutting down: each will free a place. */
  #closing = 0;
  #hits = 0;
  #misses = 0;
  #closed = false;
  #closeAll: Promise<void> | undefined;
  readonly #onDisconnect = (contextId: number) => {
    const entry = this.#byId.get(contextId);
    if (entry) this.#gone(entry);
  };

  /**
   * @param router the router whose connection methods start the contexts.
   * @param options `maxConnecting`, `maxContexts`, `idleTimeout` (see `PoolOptions`).
   * @throws InvalidOptionError for a bad option or a `router` that is not a Router.
   */
  constructor(router: PoolRouter, options: PoolOptions = {}) {
    const where = 'new ContextPool()';
    if (!isRouter(router)) throw new InvalidOptionError('router', where, 'a Router', router);
    options = optionsObject(options, where, POOL_OPTIONS);
    const maxConnecting = integer(options.maxConnecting, 'maxConnecting', where, DEFAULT_MAX_CONNECTING, 1, 10_000);
    this.#maxContexts =
      options.maxContexts === Number.POSITIVE_INFINITY
        ? options.maxContexts
        : integer(options.maxContexts, 'maxContexts', where, DEFAULT_MAX_CONTEXTS, 1, 1_000_000);
    this.#idleTimeout = milliseconds(options.idleTimeout, 'idleTimeout', where, 0);
    this.#queue = new PQueue({ concurrency: maxConnecting });
    this.#router = router;
    router.on('disconnect', this.#onDisconnect);
    const set = pools.get(router) ?? new Set();
    pools.set(router, set);
    set.add(this);
  }

  /**
   * The context for `target`: the pool's open one for its key (a hit), the
   * one being started for it (shared: concurrent acquires make one
   * connection), or a new one. A pooled `via` is acquired first and held
   * while the new context lives.
   *
   * @throws InvalidOptionError when the target or an option is malformed, naming the field.
   * @throws the connection's own error when the start fails (`PasswordError`,
   *   `AuthenticationError`, `BootstrapError`...): every acquire waiting on
   *   that start receives it, and the next acquire tries again.
   * @throws PoolError when the pool is closed, or is closed while waiting,
   *   or the via chain needs more contexts than `maxContexts`.
   * @throws TimeoutError after `timeout` ms; the signal's reason when it aborts.
   */
  async acquire(target: PoolTarget, options: AcquireOptions = {}): Promise<PoolLease> {
    const where = 'pool.acquire()';
    options = optionsObject(options, where, ACQUIRE_OPTIONS);
    if (options.unique !== undefined && typeof options.unique !== 'boolean') {
      throw new InvalidOptionError('unique', where, 'a boolean', options.unique);
    }
    const signal = abortSignal(options.signal, 'signal', where);
    const timeout = milliseconds(options.timeout, 'timeout', where, undefined);
    return this.#acquire(parseTarget(target, where), options.unique === true, signal, timeout);
  }

  /**
   * Acquires `target`, runs `fn` with its context, and releases it however
   * `fn` ends.
   * @returns what `fn` returns (awaited).
   * @throws as `acquire`, and what `fn` throws.
   */
  async use<T>(
    target: PoolTarget,
    fn: (context: Context) => T | PromiseLike<T>,
    options: AcquireOptions = {},
  ): Promise<Awaited<T>> {
    if (typeof fn !== 'function') throw new InvalidOptionError('fn', 'pool.use()', 'a function', fn);
    const lease = await this.acquire(target, options);
    try {
      return await fn(lease.context);
    } finally {
      lease.release();
    }
  }

  /** The pool's counters now (see `PoolStats`). */
  stats(): PoolStats {
    let contexts = 0;
    for (const entry of this.#all) if (entry.state === 'ready') contexts++;
    return {
      contexts,
      idle: this.#idle.size,
      connecting: this.#queue.pending,
      waiting: this.#roomWaiters.length + this.#queue.size,
      hits: this.#hits,
      misses: this.#misses,
    };
  }

  /**
   * Closes the pool: pending acquires reject with `PoolError`, starts that
   * have not reached their connection method stop, those connecting finish
   * and are shut down, and every context the pool started is shut down,
   * those started through another before it. Contexts given as a `via`
   * `Context` are left alone. Leases still held see their context go away.
   * Idempotent.
   */
  close(): Promise<void> {
    this.#closeAll ??= this.#shutDown(true);
    return this.#closeAll;
  }

  /** `await using pool = new ContextPool(router)` closes it at the end of the scope. */
  [Symbol.asyncDispose](): Promise<void> {
    return this.close();
  }

  /**
   * Internal: the router is shutting down and stops every context itself:
   * reject what waits and stop starts, without asking contexts to exit twice.
   */
  [ROUTER_SHUTDOWN](): void {
    this.#closeAll ??= this.#shutDown(false);
  }

  async #acquire(
    target: ParsedTarget,
    unique: boolean,
    signal: AbortSignal | undefined,
    timeout: number | undefined,
  ): Promise<PoolLease> {
    if (this.#closed) {
      throw new PoolError(target.label, 'the pool is closed; router.shutdown() closes router.pool, make a new one');
    }
    if (target.depth > this.#maxContexts) {
      throw new PoolError(
        target.label,
        `the target and its via chain need ${target.depth} contexts and the pool's maxContexts is ${this.#maxContexts}; raise maxContexts`,
      );
    }
    signal?.throwIfAborted();
    const entry = unique ? undefined : this.#entries.get(target.key);
    if (entry?.state === 'ready') {
      this.#hits++;
      return this.#lease(entry);
    }
    if (entry) {
      this.#hits++;
      return this.#wait(entry, signal, timeout);
    }
    this.#misses++;
    const fresh = new Entry(target, unique);
    this.#all.add(fresh);
    if (!unique) this.#entries.set(target.key, fresh);
    // The first waiter is in place before the start can fail.
    const lease = this.#wait(fresh, signal, timeout);
    fresh.started = this.#start(fresh);
    return lease;
  }

  /** Runs a start: its via, room under `maxContexts`, a turn under `maxConnecting`, the connection. Never rejects. */
  async #start(entry: Entry): Promise<void> {
    const { target } = entry;
    const signal = entry.cancel.signal;
    try {
      let via: Context | undefined;
      if (target.via instanceof Context) via = target.via;
      else if (target.via) {
        entry.viaLease = await this.#acquire(target.via, false, signal, undefined);
        via = entry.viaLease.context;
      }
      await this.#room(entry, signal);
      const method = await ownMethod(target.method);
      if (!method) throw new Error(`internal: no connection method '${target.method}'`);
      const options = via ? { ...target.options, via } : target.options;
      const context = await this.#queue.add(
        () => {
          entry.connecting = true;
          return this.#router.connect(method, options);
        },
        { signal },
      );
      this.#ready(entry, context);
    } catch (error) {
      for (const waiter of entry.waiters) waiter.reject(error);
      entry.waiters.clear();
      this.#gone(entry);
    }
  }

  /** Waits for a place under `maxContexts`, first come first served, closing idle contexts for it. */
  #room(entry: Entry, signal: AbortSignal): Promise<void> {
    signal.throwIfAborted();
    if (this.#placed < this.#maxContexts && this.#roomWaiters.length === 0) {
      this.#placed++;
      entry.placed = true;
      return Promise.resolve();
    }
    return new Promise((resolve, reject) => {
      const waiter: RoomWaiter = {
        grant: () => {
          signal.removeEventListener('abort', onAbort);
          entry.placed = true;
          resolve();
        },
      };
      const onAbort = () => {
        const at = this.#roomWaiters.indexOf(waiter);
        if (at !== -1) this.#roomWaiters.splice(at, 1);
        reject(signal.reason);
      };
      signal.addEventListener('abort', onAbort, { once: true });
      this.#roomWaiters.push(waiter);
      this.#pump();
    });
  }

  /** Gives free places to waiting starts, and closes idle contexts for those still waiting. */
  #pump(): void {
    while (this.#roomWaiters.length > 0 && this.#placed < this.#maxContexts) {
      this.#placed++;
      (this.#roomWaiters.shift() as RoomWaiter).grant();
    }
    let short = this.#roomWaiters.length - this.#closing;
    for (const entry of this.#idle) {
      if (short <= 0) break;
      void this.#close(entry);
      short--;
    }
  }

  /** Waits, as one acquire, for `entry`'s start. */
  #wait(entry: Entry, signal: AbortSignal | undefined, timeout: number | undefined): Promise<PoolLease> {
    return new Promise((resolve, reject) => {
      let timer: ReturnType<typeof setTimeout> | undefined;
      const cleanup = () => {
        if (timer !== undefined) clearTimeout(timer);
        signal?.removeEventListener('abort', onAbort);
      };
      const waiter: Waiter = {
        resolve: (lease) => {
          cleanup();
          resolve(lease);
        },
        reject: (error) => {
          cleanup();
          reject(error);
        },
      };
      const leave = (error: unknown) => {
        if (!entry.waiters.delete(waiter)) return;
        waiter.reject(error);
        if (entry.waiters.size === 0) this.#abandon(entry);
      };
      const onAbort = () => leave(signal?.reason);
      entry.waiters.add(waiter);
      signal?.addEventListener('abort', onAbort, { once: true });
      if (timeout !== undefined) {
        timer = setTimeout(
          () => leave(new TimeoutError('acquiring a context from the pool', entry.target.label, timeout)),
          timeout,
        );
      }
    });
  }

  /** Every acquire left `entry`'s start: stop it, unless it is connecting (it then joins the pool idle). */
  #abandon(entry: Entry): void {
    if (entry.connecting || entry.state !== 'starting') return;
    if (this.#entries.get(entry.target.key) === entry) this.#entries.delete(entry.target.key);
    entry.cancel.abort(new PoolError(entry.target.label, 'every acquire waiting for it gave up'));
  }

  /** A start succeeded: hand the context to the acquires waiting for it. */
  #ready(entry: Entry, context: Context): void {
    entry.context = context;
    entry.state = 'ready';
    this.#byId.set(context.id, entry);
    if (this.#closed) {
      void this.#close(entry);
      return;
    }
    if (this.#router[ROUTER_SWITCH].routeOf(context.id) === undefined) {
      // It went away before the pool could see its disconnect event.
      const error = new ContextDisconnectedError(context.name, context.id, 'it went away as soon as it started');
      for (const waiter of entry.waiters) waiter.reject(error);
      entry.waiters.clear();
      this.#gone(entry);
      return;
    }
    const waiters = [...entry.waiters];
    entry.waiters.clear();
    for (const waiter of waiters) waiter.resolve(this.#lease(entry));
    if (entry.refs === 0) this.#becomeIdle(entry);
  }

  #lease(entry: Entry): PoolLease {
    entry.refs++;
    if (this.#idle.delete(entry) && entry.idleTimer !== undefined) {
      clearTimeout(entry.idleTimer);
      entry.idleTimer = undefined;
    }
    let released = false;
    const release = () => {
      if (released) return;
      released = true;
      entry.refs--;
      if (entry.refs === 0 && entry.state === 'ready') this.#becomeIdle(entry);
    };
    return {
      context: entry.context as Context,
      key: entry.target.key,
      label: entry.target.label,
      release,
      [Symbol.dispose]: release,
    };
  }

  #becomeIdle(entry: Entry): void {
    if (entry.unique || this.#closed) {
      void this.#close(entry);
      return;
    }
    this.#idle.add(entry);
    if (this.#idleTimeout > 0) {
      entry.idleTimer = setTimeout(() => void this.#close(entry), this.#idleTimeout);
      // An idle context never keeps the process alive.
      entry.idleTimer.unref();
    }
    this.#pump();
  }

  /** Shuts a context down; its place is free once it is gone. */
  #close(entry: Entry): Promise<void> {
    if (entry.state !== 'ready') return entry.closed ?? Promise.resolve();
    entry.state = 'closing';
    this.#closing++;
    if (this.#entries.get(entry.target.key) === entry) this.#entries.delete(entry.target.key);
    this.#idle.delete(entry);
    if (entry.idleTimer !== undefined) clearTimeout(entry.idleTimer);
    entry.closed = (entry.context as Context)
      .shutdown()
      .catch(() => {
        // Already gone, or the router is shutting down and stops it itself.
      })
      .finally(() => this.#gone(entry));
    return entry.closed;
  }

  /** The context is gone (or its start failed): forget it, free its place, release its via. Idempotent. */
  #gone(entry: Entry): void {
    if (entry.state === 'gone') return;
    if (entry.state === 'closing') this.#closing--;
    entry.state = 'gone';
    if (this.#entries.get(entry.target.key) === entry) this.#entries.delete(entry.target.key);
    this.#all.delete(entry);
    this.#idle.delete(entry);
    if (entry.idleTimer !== undefined) clearTimeout(entry.idleTimer);
    if (entry.context && this.#byId.get(entry.context.id) === entry) this.#byId.delete(entry.context.id);
    if (entry.placed) {
      entry.placed = false;
      this.#placed--;
    }
    const via = entry.viaLease;
    entry.viaLease = undefined;
    via?.release();
    this.#pump();
  }

  async #shutDown(stopContexts: boolean): Promise<void> {
    this.#closed = true;
    const starting = [...this.#all].filter((entry) => entry.state === 'starting');
    for (const entry of starting) {
      const error = new PoolError(entry.target.label, 'the pool was closed while the acquire waited');
      for (const waiter of entry.waiters) waiter.reject(error);
      entry.waiters.clear();
      if (!entry.connecting) entry.cancel.abort(error);
    }
    if (!stopContexts) return;
    // Those connecting finish, and are shut down as they become ready.
    await Promise.all(starting.map((entry) => entry.started));
    const open = [...this.#all].filter((entry) => entry.state === 'ready' || entry.state === 'closing');
    // Deepest first: a context started through another goes before it.
    const depths = [...new Set(open.map((entry) => entry.target.depth))].sort((a, b) => b - a);
    for (const depth of depths) {
      await Promise.all(open.filter((entry) => entry.target.depth === depth).map((entry) => this.#close(entry)));
    }
    this.#router.off('disconnect', this.#onDisconnect);
    pools.get(this.#router)?.delete(this);
  }
}

/** Tells every pool of `router` that it is shutting down: they reject what waits and start nothing more. */
export function routerShuttingDown(router: PoolRouter): void {
  for (const pool of pools.get(router) ?? []) pool[ROUTER_SHUTDOWN]();
}

/** True for a `Router` (a facade over a switch that starts contexts), as the pool's constructor requires. */
function isRouter(value: unknown): value is PoolRouter {
  return (
    typeof value === 'object' &&
    value !== null &&
    typeof (value as PoolRouter).connect === 'function' &&
    (value as PoolRouter)[ROUTER_SWITCH] !== undefined
  );
}
