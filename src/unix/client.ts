import { connect as netConnect, type Socket } from 'node:net';
import { resolve } from 'node:path';
import { EventEmitter } from 'eventemitter3';
import { Context } from '../core/context.js';
import { ChannelError } from '../core/errors.js';
import { logger } from '../core/log.js';
import { milliseconds, optionsObject } from '../core/options.js';
import { Receiver, type ReceiverOptions } from '../core/receiver.js';
import { Router as CoreRouter, type PreparedCall, ROUTER_SWITCH, type RouterWarning } from '../core/router.js';
import { Stream } from '../core/stream.js';
import { callPreparer } from '../master/prepare-call.js';
import { ListenerError } from './errors.js';
import { HELLO_VERSION, helloMessage, isPeerName, readWelcome, type Welcome } from './hello.js';

const debug = logger('listener');

/** Options of `connect()`. */
export interface ConnectOptions {
  /** Name to have in the master's tree (made unique there). Default `'worker:<pid>'`. */
  name?: string;
  /** Milliseconds to wait for the master's welcome. Default 10000. */
  connectTimeout?: number;
}

/** Events of a `WorkerRouter`. */
export interface WorkerRouterEvents {
  /** The connection to the master closed (closed here, by the master, or the master died). */
  disconnect: [reason: string];
  /** A message was refused or dropped here. */
  warning: [warning: RouterWarning];
}

/** The message switch of a joined process: ships functions as the master does, and keeps the process alive only while a call is in flight. */
class PeerSwitch extends CoreRouter {
  private readonly preparer = callPreparer();
  private held = 0;

  override prepareCall(fn: Parameters<CoreRouter['prepareCall']>[0]): PreparedCall {
    return this.preparer(fn);
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
 * UNIX listener with `connect(path)`: a context ID of its own, and calls
 * to the contexts the master holds and to the master's services, acting
 * with the master's authority. Close it when done.
 */
export class WorkerRouter extends EventEmitter<WorkerRouterEvents> {
  /** The master, for its services: `worker.master.callService(...)`. */
  readonly master: Context;
  readonly #core: PeerSwitch;
  readonly #stream: Stream;
  #closed: string | undefined;

  /** Made by `connect()`. */
  private constructor(core: PeerSwitch, stream: Stream, welcome: Welcome) {
    super();
    this.#core = core;
    this.#stream = stream;
    this.master = new Context(core, 0, welcome.masterName, -1, welcome.masterInfo);
    core.on('warning', (warning) => this.emit('warning', warning));
    core.on('parentClosed', (reason) => {
      this.#closed ??= `the connection to master '${welcome.masterName}' closed: ${reason}`;
      core.closeHandlers(new ChannelError(welcome.masterName, 0, this.#closed));
      this.emit('disconnect', this.#closed);
    });
  }

  /** @internal Builds the router once the master has welcomed this process. */
  static create(stream: Stream, welcome: Welcome): WorkerRouter {
    const core = new PeerSwitch({
      id: welcome.id,
      name: welcome.name,
      parentIds: [0],
      maxMessageSize: welcome.maxMessageSize,
    });
    core.setName(0, welcome.masterName);
    core.setParentStream(stream);
    stream.unref();
    return new WorkerRouter(core, stream, welcome);
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
      this.#closed = 'it was closed (worker.close())';
      this.#stream.close(this.#closed);
    }
  }

  /** `await using worker = await connect(path)` closes it at the end of the scope. */
  [Symbol.asyncDispose](): Promise<void> {
    return this.close();
  }

  /** The message switch behind this facade; internal. */
  get [ROUTER_SWITCH](): CoreRouter {
    return this.#core;
  }
}

/**
 * Joins the tree of the master listening at `path` (`router.listen(path)`
 * there), from another process of the same user on this machine.
 *
 * ```ts
 * const worker = await connect('/run/user/1000/deploy/tendril.sock');
 * const web = await worker.acquire({ method: 'ssh', host: 'web1' });
 * ```
 *
 * @throws ListenerError `ERR_TENDRIL_LISTENER_UNREACHABLE` when nothing
 *   listens there (no socket, a stale one, or no permission to reach it),
 *   `ERR_TENDRIL_LISTENER_REFUSED` when the master turned this process away
 *   (saying why), `ERR_TENDRIL_LISTENER` when the handshake failed or timed out.
 * @throws InvalidOptionError for a bad option.
 */
export async function connect(path: string, options: ConnectOptions = {}): Promise<WorkerRouter> {
  const where = 'connect()';
  optionsObject(options, where);
  const timeout = milliseconds(options.connectTimeout, 'connectTimeout', where, 10_000, 1);
  if (options.name !== undefined && !isPeerName(options.name)) {
    throw new ListenerError(String(path), `${where}: name must be 1 to 64 printable characters without spaces`);
  }
  const absolute = resolve(path);
  const socket = await open(absolute);
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
  return WorkerRouter.create(stream, welcome);
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
