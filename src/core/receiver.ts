import { ChannelError, type TendrilError, TimeoutError } from './errors.js';
import type { Message } from './message.js';
import { deadReason, type Policy, type Router, type RouterLike, switchOf } from './router.js';
import { SENDER_CLOSED, Sender } from './sender.js';

/** Options of a receiver. */
export interface ReceiverOptions {
  /** Listen on this handle instead of allocating one. */
  handle?: number;
  /**
   * Admission check for incoming messages, on top of `contextId`'s.
   * Default: admit all (or, with `contextId`, all from that context).
   */
  policy?: Policy;
  /**
   * The context values are expected from: only messages from it are
   * admitted (and a dead message only from the way to it), and the receiver
   * closes when it disconnects.
   */
  contextId?: number;
}

interface Waiter {
  resolve: (message: Message) => void;
  reject: (error: Error) => void;
  timer: ReturnType<typeof setTimeout> | undefined;
}

/**
 * The receiving end of a one-way channel: a handle in this context whose
 * messages queue up until read with `get()` or `for await`. Closed when
 * its sender closes it, when `close()` is called, or when the context given
 * as `contextId` disconnects.
 */
export class Receiver<T = unknown> implements AsyncIterable<T> {
  /** The handle this receiver listens on. */
  readonly handle: number;
  /** The router it is registered with. */
  readonly router: Router;
  private readonly queue: Message[] = [];
  private readonly waiters: Waiter[] = [];
  private readonly watchers = new Set<() => void>();
  private closedWith: TendrilError | undefined;
  private closedByUser = false;

  /**
   * Registers a handle on `router` (allocated unless `options.handle` names one).
   * @param router the router of this context, or the master's `Router`.
   * @throws Error when `options.handle` is already registered.
   */
  constructor(router: RouterLike, options: ReceiverOptions = {}) {
    const core = switchOf(router);
    this.router = core;
    const { contextId, policy } = options;
    const fromPeer: Policy | undefined =
      contextId === undefined
        ? undefined
        : (message, stream) =>
            message.isDead
              ? stream === undefined || stream === core.expectedStream(contextId)
              : message.src === contextId;
    const admit: Policy | undefined =
      fromPeer && policy
        ? (message, stream) => fromPeer(message, stream) && policy(message, stream)
        : (fromPeer ?? policy);
    this.handle = core.addHandler((message) => this.onMessage(message), {
      ...(options.handle !== undefined && { handle: options.handle }),
      ...(admit && { policy: admit }),
      ...(contextId !== undefined && { contextId }),
      onClose: (error) => this.finish(error),
    });
  }

  /** True once closed; queued values can still be read. */
  get closed(): boolean {
    return this.closedWith !== undefined;
  }

  /** Number of messages received and not yet read. */
  get queued(): number {
    return this.queue.length;
  }

  /** True when `get()` would resolve or reject without waiting. */
  get ready(): boolean {
    return this.queue.length > 0 || this.closedWith !== undefined;
  }

  /** A sender in this context that delivers to this receiver. */
  toSender(): Sender<T> {
    return new Sender<T>(this.router, this.router.id, this.handle);
  }

  /**
   * The next message, raw.
   * @param timeout milliseconds to wait; default: no limit.
   * @throws ChannelError once the receiver is closed and drained.
   * @throws TimeoutError when `timeout` passes.
   */
  getMessage(timeout?: number): Promise<Message> {
    const queued = this.queue.shift();
    if (queued) return Promise.resolve(queued);
    if (this.closedWith) return Promise.reject(this.closedWith);
    this.router.hold();
    return new Promise<Message>((resolve, reject) => {
      const waiter: Waiter = { resolve, reject, timer: undefined };
      if (timeout !== undefined) {
        waiter.timer = setTimeout(() => {
          this.waiters.splice(this.waiters.indexOf(waiter), 1);
          this.router.release();
          reject(new TimeoutError(`receive on handle ${this.handle}`, this.router.name, timeout));
        }, timeout);
      }
      this.waiters.push(waiter);
    });
  }

  /**
   * The next value, decoded.
   * @throws as `getMessage`.
   */
  async get(timeout?: number): Promise<T> {
    return (await this.getMessage(timeout)).unpack(this.router) as T;
  }

  /**
   * Calls `callback` once, when `ready` becomes true (at once, in a
   * microtask, if it already is). Returns a function that cancels it.
   * Used by `Select`.
   */
  onReady(callback: () => void): () => void {
    const watcher = () => {
      this.watchers.delete(watcher);
      callback();
    };
    if (this.ready) queueMicrotask(() => this.watchers.has(watcher) && watcher());
    this.watchers.add(watcher);
    return () => this.watchers.delete(watcher);
  }

  /** Stops receiving; pending and later `get()` calls reject with `ChannelError`. */
  close(): void {
    this.closedByUser = true;
    this.router.removeHandler(this.handle);
    this.finish(new ChannelError(this.router.name, this.router.id, `receiver on handle ${this.handle} was closed`));
  }

  /** Yields values until the receiver is closed by its sender or by `close()`. */
  async *[Symbol.asyncIterator](): AsyncIterator<T> {
    for (;;) {
      let message: Message;
      try {
        message = await this.getMessage();
      } catch (error) {
        if (error instanceof ChannelError && (error.reason === SENDER_CLOSED || this.closedByUser)) return;
        throw error;
      }
      yield message.unpack(this.router) as T;
    }
  }

  private onMessage(message: Message): void {
    if (message.isDead) {
      this.router.removeHandler(this.handle);
      this.finish(new ChannelError(this.router.nameOf(message.src), message.src, deadReason(message)));
      return;
    }
    const waiter = this.waiters.shift();
    if (waiter) {
      if (waiter.timer) clearTimeout(waiter.timer);
      this.router.release();
      waiter.resolve(message);
    } else {
      this.queue.push(message);
      this.notify();
    }
  }

  private finish(error: TendrilError): void {
    if (this.closedWith) return;
    this.closedWith = error;
    for (const waiter of this.waiters.splice(0)) {
      if (waiter.timer) clearTimeout(waiter.timer);
      this.router.release();
      waiter.reject(error);
    }
    this.notify();
  }

  private notify(): void {
    for (const watcher of [...this.watchers]) watcher();
  }
}
