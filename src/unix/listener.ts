import { promises as fs } from 'node:fs';
import { createServer, type Server, type Socket } from 'node:net';
import { hostname } from 'node:os';
import { EventEmitter } from 'eventemitter3';
import { encodeFrame } from '../core/framing.js';
import { logger } from '../core/log.js';
import { integer, milliseconds, optionsObject } from '../core/options.js';
import { Stream } from '../core/stream.js';
import type { MasterSwitch } from '../master/master-switch.js';
import type { Context } from '../toolkit/context.js';
import type { ContextPool } from '../toolkit/pool/pool.js';
import { ListenerError } from './errors.js';
import { readHello, refusalMessage, welcomeMessage } from './hello.js';
import { checkPeerCredentials, type PeerCredentials, peerCredentials, userIds } from './peer-credentials.js';
import { offerPeerService } from './peer-service.js';
import { prepareSocketPath } from './socket-path.js';

/** The options `router.listen()` takes (`ListenOptions`). */
const LISTEN_OPTIONS = new Set(['allowUids', 'maxPeers', 'helloTimeout']);

const debug = logger('listener');

/** Options of `router.listen()`. */
export interface ListenOptions {
  /**
   * User IDs whose processes may join besides this process's effective
   * user (checked against the kernel's record of the peer, SO_PEERCRED).
   * Default: none. The socket's directory and mode admit only this user
   * anyway; this is for a peer that reaches it another way (root, or a
   * socket handed over).
   */
  allowUids?: number[];
  /** Most processes joined at once; past it, new ones are refused. Default 256. */
  maxPeers?: number;
  /** Milliseconds a process that connected has to say hello. Default 10000. */
  helloTimeout?: number;
}

/** A process that joined the tree through a listener. */
export interface Peer {
  /** Its context ID. */
  id: number;
  /** Its name in the master's tree. */
  name: string;
  /** Its process ID, from the kernel. */
  pid: number;
  /** Its effective user ID, from the kernel. */
  uid: number;
}

/** Events of a `Listener`. */
export interface ListenerEvents {
  /** A process joined. */
  join: [peer: Peer];
  /** A joined process left (it closed, exited or was disconnected). */
  leave: [peer: Peer, reason: string];
  /** A process was turned away; `reason` says why (its credentials, a bad hello, too many peers). */
  refuse: [reason: string];
}

/**
 * A UNIX socket through which other local processes of this user join
 * the master's tree (`connect(path)`): each gets a context ID, acts with
 * the master's authority, and reaches every context the master holds and
 * the master's services. Made by `router.listen()`.
 */
export class Listener extends EventEmitter<ListenerEvents> {
  /** The socket's absolute path. */
  readonly path: string;
  /** The master's pool, made on first use: what joined processes acquire from. */
  private readonly pool: () => ContextPool;
  private readonly core: MasterSwitch<Context>;
  private readonly server: Server;
  private readonly allowUids: ReadonlySet<number>;
  private readonly maxPeers: number;
  private readonly helloTimeout: number;
  private readonly joined = new Map<Stream, Peer>();
  /** Connections between accept and welcome (or refusal). */
  private readonly pending = new Set<Socket>();
  private closing: Promise<void> | undefined;
  private unregister: () => void = () => {};

  private constructor(
    core: MasterSwitch<Context>,
    pool: () => ContextPool,
    path: string,
    server: Server,
    options: Required<ListenOptions>,
  ) {
    super();
    this.pool = pool;
    this.core = core;
    this.path = path;
    this.server = server;
    this.allowUids = new Set(options.allowUids);
    this.maxPeers = options.maxPeers;
    this.helloTimeout = options.helloTimeout;
    server.on('connection', (socket) => {
      this.accept(socket).catch((error: unknown) => {
        socket.destroy();
        this.core.warn(
          'handler',
          `${this.core.name}: accepting a process on ${this.path} failed: ${(error as Error)?.stack ?? error}`,
        );
      });
    });
  }

  /**
   * @internal Listens on `path` for `core`'s tree (see `Router.listen`); `pool` gives the master's pool.
   * @throws ListenerError as `prepareSocketPath`, or when listening fails.
   * @throws InvalidOptionError for a bad option.
   */
  static async open(
    core: MasterSwitch<Context>,
    pool: () => ContextPool,
    path: string,
    options: ListenOptions = {},
  ): Promise<Listener> {
    const where = 'router.listen()';
    optionsObject(options, where, LISTEN_OPTIONS);
    if (typeof path !== 'string' || path === '') {
      throw new ListenerError(String(path), `${where} needs the socket's path, a non-empty string`);
    }
    const allowUids = userIds(options.allowUids, where);
    const checked: Required<ListenOptions> = {
      allowUids,
      maxPeers: integer(options.maxPeers, 'maxPeers', where, 256, 1, 65_536),
      helloTimeout: milliseconds(options.helloTimeout, 'helloTimeout', where, 10_000, 1),
    };
    if (core.isShutDown) throw new ListenerError(path, `router '${core.name}' has been shut down; create a new Router`);
    const absolute = await prepareSocketPath(path);
    await checkPeerCredentials().catch((error: Error) => {
      throw new ListenerError(absolute, `cannot listen on ${absolute}: ${error.message}`);
    });
    const server = createServer();
    await new Promise<void>((resolve, reject) => {
      server.once('error', (error: NodeJS.ErrnoException) =>
        reject(
          new ListenerError(
            absolute,
            `cannot listen on ${absolute}: ${error.message}`,
            error.code === 'EADDRINUSE' ? 'ERR_TENDRIL_LISTENER_IN_USE' : undefined,
            { cause: error },
          ),
        ),
      );
      server.listen(absolute, () => resolve());
    });
    // The directory already admits only this user; the mode says so again.
    await fs.chmod(absolute, 0o600);
    const listener = new Listener(core, pool, absolute, server, checked);
    listener.unregister = core.broker.addCleanup(() => listener.close());
    debug('%s: listening on %s', core.name, absolute);
    return listener;
  }

  /** Processes joined now. */
  get peers(): Peer[] {
    return [...this.joined.values()];
  }

  /** Tells the process why it is turned away, then hangs up. */
  private refuse(socket: Socket, reason: string): void {
    debug('%s: refused a process on %s: %s', this.core.name, this.path, reason);
    this.pending.delete(socket);
    this.tell('refuse', reason);
    // Written directly: closing a Stream would destroy the socket before the refusal is flushed.
    socket.end(Buffer.concat(encodeFrame(refusalMessage(reason))));
    setTimeout(() => socket.destroy(), 1000).unref();
  }

  private async accept(socket: Socket): Promise<void> {
    if (this.closing) {
      socket.destroy();
      return;
    }
    this.pending.add(socket);
    socket.on('error', () => {});
    if (this.joined.size + this.pending.size > this.maxPeers) {
      this.refuse(socket, `this master admits at most ${this.maxPeers} processes through ${this.path}`);
      return;
    }
    let credentials: PeerCredentials;
    try {
      credentials = await peerCredentials(socket);
    } catch (error) {
      this.refuse(socket, (error as Error).message);
      return;
    }
    const euid = process.geteuid?.();
    if (credentials.uid !== euid && !this.allowUids.has(credentials.uid)) {
      this.refuse(
        socket,
        `process ${credentials.pid} runs as uid ${credentials.uid}; the listener of '${this.core.name}' at ${this.path} admits only uid ${euid}${this.allowUids.size > 0 ? ` and ${[...this.allowUids].join(', ')}` : ''}`,
      );
      return;
    }
    if (this.closing || socket.destroyed) {
      this.pending.delete(socket);
      socket.destroy();
      return;
    }
    this.handshake(socket, credentials);
  }

  /** Waits for the peer's hello, then gives it its place in the tree. */
  private handshake(socket: Socket, credentials: PeerCredentials): void {
    const stream = new Stream({
      name: `peer ${credentials.pid}`,
      input: socket,
      output: socket,
      maxMessageSize: this.core.maxMessageSize,
    });
    const timer = setTimeout(() => {
      // A hello read after this must not let the process in.
      stream.onMessage = () => {};
      this.refuse(socket, `process ${credentials.pid} said no hello within ${this.helloTimeout} ms`);
    }, this.helloTimeout);
    stream.on('close', () => {
      clearTimeout(timer);
      this.pending.delete(socket);
    });
    // Handing the socket to the credentials helper paused it, so that the helper would not compete for its bytes.
    socket.resume();
    stream.onMessage = (message) => {
      clearTimeout(timer);
      stream.onMessage = () => {};
      let name: string;
      try {
        const hello = readHello(message);
        name = this.uniqueName(hello.name ?? `worker:${credentials.pid}`);
      } catch (error) {
        this.refuse(socket, `process ${credentials.pid}: ${(error as Error).message}`);
        return;
      }
      if (this.closing || stream.closed) {
        stream.close('the listener was closed');
        return;
      }
      const id = this.core.allocatePeerId();
      const peer: Peer = { id, name, pid: credentials.pid, uid: credentials.uid };
      stream.send(
        welcomeMessage({
          id,
          name,
          maxMessageSize: this.core.maxMessageSize,
          masterName: this.core.name,
          masterInfo: {
            pid: process.pid,
            nodeVersion: process.version,
            hostname: hostname(),
            platform: process.platform,
            arch: process.arch,
          },
        }),
      );
      this.pending.delete(socket);
      // Before the router reads its messages: every one acts with the master's authority.
      stream.authority = this.core.id;
      this.core.addChildStream(stream, id, name);
      this.joined.set(stream, peer);
      const withdraw = offerPeerService(this.pool, this.core, id);
      stream.on('close', (reason) => {
        withdraw();
        this.joined.delete(stream);
        debug('%s: %s (id %d) left: %s', this.core.name, name, id, reason);
        this.tell('leave', peer, reason);
      });
      debug('%s: %s (pid %d) joined as context %d', this.core.name, name, credentials.pid, id);
      this.tell('join', peer);
    };
  }

  /** Emits an event; a listener that throws is reported, never let loose in the stream's reading. */
  private tell<E extends keyof ListenerEvents>(event: E, ...args: ListenerEvents[E]): void {
    try {
      (this.emit as (e: string, ...a: unknown[]) => boolean)(event, ...args);
    } catch (error) {
      this.core.warn(
        'handler',
        `${this.core.name}: a '${event}' listener of the listener at ${this.path} threw: ${(error as Error)?.stack ?? error}`,
      );
    }
  }

  private uniqueName(wanted: string): string {
    if (!this.core.hasContextNamed(wanted)) return wanted;
    for (let n = 2; ; n++) {
      const candidate = `${wanted}.${n}`;
      if (!this.core.hasContextNamed(candidate)) return candidate;
    }
  }

  /**
   * Stops accepting, removes the socket and disconnects every process that
   * joined through it (their calls in flight reject there; their contexts
   * leave the tree). The master's own contexts are left alone. Idempotent.
   */
  close(): Promise<void> {
    if (!this.closing) {
      this.unregister();
      this.closing = (async () => {
        const stopped = new Promise<void>((resolve) => this.server.close(() => resolve()));
        for (const socket of this.pending) socket.destroy();
        this.pending.clear();
        for (const stream of [...this.joined.keys()]) {
          this.core.expectDeparture(stream.remoteId, `the listener at ${this.path} was closed`);
          stream.close(`the listener at ${this.path} was closed`);
        }
        await stopped;
        // server.close() removes the socket file; a path someone else took over since is not ours to remove.
        debug('%s: stopped listening on %s', this.core.name, this.path);
      })();
    }
    return this.closing;
  }

  /** `await using listener = await router.listen(path)` closes it at the end of the scope. */
  [Symbol.asyncDispose](): Promise<void> {
    return this.close();
  }
}
