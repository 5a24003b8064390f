import { connect as netConnect, type Socket } from 'node:net';
import { resolve } from 'node:path';
import { EventEmitter } from 'eventemitter3';
import { SHIP_AS_IS, setCallPreparation } from '../core/call-preparation.js';
import { serviceName } from '../core/child-entry.js';
import { ChannelError, TimeoutError } from '../core/errors.js';
import { logger } from '../core/log.js';
import {
  checkOperationOptions,
  MAX_TIMER,
  milliseconds,
  type OperationOptions,
  optionsObject,
  STOP_GRACE,
} from '../core/options.js';
import { Receiver, type ReceiverOptions } from '../core/receiver.js';
import type { ServiceName, ServiceOptions } from '../core/services.js';
import { Stream } from '../core/stream.js';
import { MessageSwitch, ROUTER_SWITCH, type RouterWarning } from '../core/switch.js';
import { callPreparer } from '../master/prepare-call.js';
import { Context } from '../toolkit/context.js';
import { ACQUIRE_OPTIONS } from '../toolkit/pool/pool.js';
import { MAX_VIA_DEPTH, type PoolTarget } from '../toolkit/pool/target.js';
import { serviceRegistry } from '../toolkit/services/registry.js';
import { ListenerError } from './errors.js';
import { HELLO_VERSION, helloMessage, isPeerName, readWelcome, type Welcome } from './hello.js';
import { type PeerCredentials, peerCredentials, userIds } from './peer-credentials.js';
import { type AcquiredRecord, type ContextRecord, type PeerApi, peerServiceName } from './peer-service.js';

/** The options `joinListener()` takes (`JoinListenerOptions`). */
const JOIN_OPTIONS = new Set(['name', 'connectTimeout', 'allowUids']);

const debug = logger('listener');

/** Options of `joinListener()`. */
export interface JoinListenerOptions {
  /** Name to have in the master's tree (made unique there). Default `'worker:<pid>'`. */
  name?: string;
  /** Milliseconds to wait for the master's welcome. Default 10000. */
  connectTimeout?: number;
  /**
   * User IDs whose master this process may join besides its own effective
   * user (checked by the kernel's record of the listening process,
   * SO_PEERCRED). Default: none.
   */
  allowUids?: number[];
}

/** A target as a joined process names it: a `via` is a target or a `Context` of the master's tree. */
export type ListenerClientTarget = DistributiveOmit<PoolTarget, 'via'> & { via?: ListenerClientTarget | Context };

type DistributiveOmit<T, K extends PropertyKey> = T extends unknown ? Omit<T, K> : never;

/** Options of `client.acquire()`. */
export interface ListenerClientAcquireOptions {
  /** A context for this lease alone, closed when it is released. */
  unique?: boolean;
  /** Milliseconds to wait (for room in the pool and for connecting) before rejecting with `TimeoutError`. */
  timeout?: number;
  /** Stops waiting when it aborts; a context the master acquires meanwhile is given back. */
  signal?: AbortSignal;
}

/** A context held from the master's pool by a joined process, until `release()`. */
export interface ListenerClientLease {
  /** The context, for calls from this process. */
  readonly context: Context;
  /** The target's key in the master's pool. */
  readonly key: string;
  /** How the pool names the target, e.g. `'ssh:deploy@web1:22'`. */
  readonly label: string;
  /** Gives the context back to the master's pool (it stays open there). Idempotent. */
  release(): void;
  /** `using lease = await client.acquire(...)` releases it at the end of the scope. */
  [Symbol.dispose](): void;
}

/** Events of a `ListenerClient`. */
export interface ListenerClientEvents {
  /** The connection to the master closed (closed here, by the master, or the master died). */
  disconnect: [reason: string];
  /** A message was refused or dropped here. */
  warning: [warning: RouterWarning];
}

/** The message switch of a joined process: ships functions as the master does, and keeps the process alive only while a call is in flight. */
class PeerSwitch extends MessageSwitch {
  private held = 0;

  constructor(...identity: ConstructorParameters<typeof MessageSwitch>) {
    super(...identity);
    setCallPreparation(this, { ...SHIP_AS_IS, prepare: callPreparer() });
  }

  override hold(): void {
    super.hold();
    if (this.held++ === 0) this.parentStream?.ref();
  }

  override release(): void {
    super.release();
    if (--this.held === 0) this.parentStream?.unref();
  }
}

/**
 * This process's place in a master's tree, joined through the master's
 * UNIX listener with `joinListener(path)`: a context ID of its own, and calls
 * to the contexts the master holds and to the master's services, acting
 * with the master's authority. Close it when done.
 */
export class ListenerClient extends EventEmitter<ListenerClientEvents> {
  /** The master, for its services: `client.master.callService(...)`. */
  readonly master: Context;
  readonly #core: PeerSwitch;
  readonly #stream: Stream;
  /** The master, untyped, for the listener's own service. */
  readonly #peer: Context;
  readonly #service: ServiceName<PeerApi>;
  #tokens = 1;
  #closed: string | undefined;

  /** Made by `joinListener()`. */
  private constructor(core: PeerSwitch, stream: Stream, welcome: Welcome) {
    super();
    this.#core = core;
    this.#stream = stream;
    this.master = new Context(core, 0, welcome.masterName, -1, welcome.masterInfo);
    this.#peer = this.master;
    this.#service = serviceName<PeerApi>(peerServiceName(welcome.id));
    core.on('warning', (warning) => this.emit('warning', warning));
    core.on('parentClosed', (reason) => {
      this.#closed ??= `the connection to master '${welcome.masterName}' closed: ${reason}`;
      core.closeHandlers(new ChannelError(welcome.masterName, 0, this.#closed));
      this.emit('disconnect', this.#closed);
    });
  }

  /** @internal Builds the router once the master has welcomed this process. */
  static create(stream: Stream, welcome: Welcome): ListenerClient {
    const core = new PeerSwitch({
      id: welcome.id,
      name: welcome.name,
      parentIds: [0],
      maxMessageSize: welcome.maxMessageSize,
    });
    core.setName(0, welcome.masterName);
    core.setParentStream(stream);
    stream.unref();
    return new ListenerClient(core, stream, welcome);
  }

  /** This process's context ID in the master's tree. */
  get id(): number {
    return this.#core.id;
  }

  /** This process's name in the master's tree. */
  get name(): string {
    return this.#core.name;
  }

  /** True once the connection to the master has closed. */
  get closed(): boolean {
    return this.#closed !== undefined;
  }

  /**
   * A handle on context `id` of the master's tree (one the master holds),
   * for calls from this process. `name` is how errors name it.
   */
  context(id: number, name = `context ${id}`): Context {
    if (!Number.isInteger(id) || id < 0) throw new TypeError(`a context ID is a non-negative integer, not ${id}`);
    this.#core.setName(id, name);
    return new Context(this.#core, id, name, 0, { pid: 0, nodeVersion: '', hostname: '', platform: '', arch: '' });
  }

  /**
   * A context from the master's pool (docs/pool.md): the one the master
   * already holds for this target, else one it starts there. Every process
   * joined to the master shares it, over the master's one connection.
   *
   * ```ts
   * const lease = await client.acquire({ method: 'ssh', hostname: 'web1' });
   * await lease.context.call(() => process.pid);
   * lease.release();
   * ```
   *
   * @param target as for `router.pool.acquire()`; a `via` is a target, or a
   *   `Context` of the master's tree (from `acquire()` or `contexts()`).
   * @param options `unique` (a context of its own), `timeout` (ms, waiting
   *   and connecting included), `signal` (stops waiting; a context acquired
   *   meanwhile is given back).
   * @returns a `ListenerClientLease`; leases still held when this process leaves are released by the master.
   * @throws the pool's errors (`PoolError` naming the target, the connection method's errors), as their own classes.
   * @throws ChannelError when the connection to the master closes.
   */
  async acquire(
    target: ListenerClientTarget,
    options: ListenerClientAcquireOptions = {},
  ): Promise<ListenerClientLease> {
    optionsObject(options, 'client.acquire()', ACQUIRE_OPTIONS);
    const token = this.#tokens++;
    const wire: { unique?: boolean; timeout?: number } = {};
    if (options.unique !== undefined) wire.unique = options.unique;
    if (options.timeout !== undefined) wire.timeout = options.timeout;
    let record: AcquiredRecord;
    try {
      // The master applies the timeout; the same bound here (and a little more) keeps a master that never answers from holding this acquire.
      const local =
        options.timeout === undefined
          ? { signal: options.signal }
          : { signal: options.signal, timeout: Math.min(options.timeout + STOP_GRACE, MAX_TIMER) };
      record = await this.#peer.callServiceWith(local, this.#service, 'acquire', token, onWire(target, 0), wire);
    } catch (error) {
      // An abandoned acquire may still succeed in the master: tell it to give the context back.
      if (options.signal?.aborted || error instanceof TimeoutError) this.#release(token);
      throw error;
    }
    this.#core.setName(record.id, record.name);
    const context = new Context(this.#core, record.id, record.name, record.parentId, record.info);
    let released = false;
    const release = () => {
      if (released) return;
      released = true;
      this.#release(token);
    };
    return { context, key: record.key, label: record.label, release, [Symbol.dispose]: release };
  }

  /**
   * The contexts the master has started (directly or via others) and still holds, as handles for calls from here.
   * @param options `timeout` (ms) and `signal` for the request to the master. Default: no timeout.
   * @throws TimeoutError past the timeout; the signal's reason when it aborts; ContextDisconnectedError when the master has gone.
   */
  async contexts(options: OperationOptions = {}): Promise<Context[]> {
    const given = checkOperationOptions(options, 'client.contexts()');
    const records: ContextRecord[] = await this.#peer.callServiceWith(
      { timeout: given.timeout, signal: given.signal },
      this.#service,
      'contexts',
    );
    return records.map((record) => {
      this.#core.setName(record.id, record.name);
      return new Context(this.#core, record.id, record.name, record.parentId, record.info);
    });
  }

  /**
   * Offers a service from this process to the master and the other joined
   * processes (docs/services.md); they act with the master's authority, so
   * the default policy, `'parents'`, admits them.
   * @throws as `router.registerService()`.
   */
  registerService<S extends object>(name: string, implementation: S, options?: ServiceOptions<S>): ServiceName<S> {
    return serviceRegistry(this.#core).register(name, implementation, options);
  }

  /** Withdraws a service this process registered; false when there was none by that name. */
  unregisterService(name: string): boolean {
    return serviceRegistry(this.#core).unregister(name);
  }

  #release(token: number): void {
    if (this.closed) return;
    this.#peer.callService(this.#service, 'release', token).catch(() => {
      // The master is gone, or the lease was: either way nothing is held any more.
    });
  }

  /** A receiver in this process, as `router.receiver()` in the master (docs/streams.md). */
  receiver<T = unknown>(options: ReceiverOptions = {}): Receiver<T> {
    return new Receiver<T>(this.#core, options);
  }

  /**
   * Leaves the master's tree: calls in flight here reject, and the master
   * releases what this process held. Idempotent.
   */
  async close(): Promise<void> {
    if (this.#closed === undefined) {
      this.#closed = 'it was closed (client.close())';
      this.#stream.close(this.#closed);
    }
  }

  /** `await using client = await joinListener(path)` closes it at the end of the scope. */
  [Symbol.asyncDispose](): Promise<void> {
    return this.close();
  }

  /** The message switch behind this facade; internal. */
  get [ROUTER_SWITCH](): MessageSwitch {
    return this.#core;
  }
}

/**
 * Joins the tree of the master listening at `path` (`router.listen(path)`
 * there), from another process of the same user on this machine.
 *
 * ```ts
 * const client = await joinListener('/run/user/1000/deploy/tendril.sock');
 * const web = await client.acquire({ method: 'ssh', hostname: 'web1' });
 * ```
 *
 * @throws ListenerError `ERR_TENDRIL_LISTENER_UNREACHABLE` when nothing
 *   listens there (no socket, a stale one, or no permission to reach it),
 *   `ERR_TENDRIL_LISTENER_REFUSED` when the master turned this process away
 *   (saying why), `ERR_TENDRIL_LISTENER_UNTRUSTED` when the process listening
 *   there runs as another user (see `allowUids`): this process does not join
 *   it, `ERR_TENDRIL_LISTENER` when the handshake failed or timed out.
 * @throws InvalidOptionError for a bad option.
 */
export async function joinListener(path: string, options: JoinListenerOptions = {}): Promise<ListenerClient> {
  const where = 'joinListener()';
  optionsObject(options, where, JOIN_OPTIONS);
  const timeout = milliseconds(options.connectTimeout, 'connectTimeout', where, 10_000, 1);
  const allowUids = userIds(options.allowUids, where);
  if (options.name !== undefined && !isPeerName(options.name)) {
    throw new ListenerError(String(path), `${where}: name must be 1 to 64 printable characters without spaces`);
  }
  const absolute = resolve(path);
  const socket = await open(absolute);
  await checkMaster(socket, absolute, allowUids);
  const stream = new Stream({ name: 'master', input: socket, output: socket, maxMessageSize: 1024 * 1024 });
  const welcome = await new Promise<Welcome>((resolveWelcome, reject) => {
    let failed = false;
    const fail = (message: string, code?: string) => {
      if (failed) return;
      failed = true;
      clearTimeout(timer);
      stream.close(message);
      reject(new ListenerError(absolute, message, code));
    };
    const timer = setTimeout(
      () =>
        fail(`the master at ${absolute} did not answer within ${timeout} ms; is it busy, or not a tendril listener?`),
      timeout,
    );
    stream.on('close', (reason) =>
      fail(`the master at ${absolute} closed the connection before welcoming this process: ${reason}`),
    );
    stream.onMessage = (message) => {
      stream.onMessage = () => {};
      try {
        const answer = readWelcome(message);
        if ('refused' in answer) {
          fail(`the master at ${absolute} refused this process: ${answer.refused}`, 'ERR_TENDRIL_LISTENER_REFUSED');
          return;
        }
        clearTimeout(timer);
        stream.removeAllListeners('close');
        resolveWelcome(answer);
      } catch (error) {
        fail(`the master at ${absolute}: ${(error as Error).message}`);
      }
    };
    stream.send(helloMessage({ version: HELLO_VERSION, name: options.name ?? null }));
  });
  stream.setMaxMessageSize(welcome.maxMessageSize);
  debug('joined %s at %s as %s (id %d)', welcome.masterName, absolute, welcome.name, welcome.id);
  return ListenerClient.create(stream, welcome);
}

/**
 * Joins only a master of this user (or of `allowUids`), by the kernel's
 * record of who listens: a process of another user that took the path
 * (a shared or misconfigured directory) would otherwise receive this
 * process's calls and their arguments, and answer them as it liked.
 * @throws ListenerError `ERR_TENDRIL_LISTENER_UNTRUSTED` naming the listening process and its user.
 */
async function checkMaster(socket: Socket, path: string, allowUids: readonly number[]): Promise<void> {
  let credentials: PeerCredentials;
  try {
    credentials = await peerCredentials(socket);
  } catch (error) {
    socket.destroy();
    throw new ListenerError(path, `cannot join the master at ${path}: ${(error as Error).message}`, undefined, {
      cause: error,
    });
  }
  // Handing the socket to the credentials helper paused it.
  socket.resume();
  const euid = process.geteuid?.();
  if (credentials.uid === euid || allowUids.includes(credentials.uid)) return;
  socket.destroy();
  throw new ListenerError(
    path,
    `refusing to join the process listening at ${path} (pid ${credentials.pid}): it runs as uid ${credentials.uid}, not as this process's user (uid ${euid}); a master of this user listens in a directory only it can write to`,
    'ERR_TENDRIL_LISTENER_UNTRUSTED',
  );
}

function open(path: string): Promise<Socket> {
  return new Promise((resolveSocket, reject) => {
    const socket = netConnect(path);
    socket.once('connect', () => {
      socket.removeAllListeners('error');
      resolveSocket(socket);
    });
    socket.once('error', (error: NodeJS.ErrnoException) => {
      const why =
        error.code === 'ENOENT'
          ? 'there is no socket there; start the master with router.listen() first'
          : error.code === 'ECONNREFUSED'
            ? 'nothing listens there (a master that died left the socket)'
            : error.code === 'EACCES'
              ? 'permission denied: the socket or its directory belongs to another user'
              : error.message;
      reject(
        new ListenerError(path, `cannot join the master at ${path}: ${why}`, 'ERR_TENDRIL_LISTENER_UNREACHABLE', {
          cause: error,
        }),
      );
    });
  });
}

/**
 * The target as it travels: each `via` that is a Context becomes its ID.
 * @throws TypeError for a chain deeper than the pool allows.
 */
function onWire(target: ListenerClientTarget, depth: number): unknown {
  if (target === null || typeof target !== 'object') return target;
  if (depth > MAX_VIA_DEPTH) throw new TypeError(`a via chain may have at most ${MAX_VIA_DEPTH} hops`);
  const { via } = target;
  if (via === undefined) return target;
  return { ...target, via: via instanceof Context ? via.id : onWire(via, depth + 1) };
}
