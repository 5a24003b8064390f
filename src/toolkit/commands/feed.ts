/** The readers of a command's output, each pacing the command (flow control). */
import type { Fd } from './protocol.js';

/**
 * One reader of a command's output (an iterator of `command.stdout`,
 * `stderr` or `lines()`): what the pump hands it waits here until read,
 * and the pump takes no more output while it waits, so a reader that
 * stops holds the command back instead of piling output up in memory.
 */
export class Feed<V> implements AsyncIterableIterator<V> {
  private readonly queue: V[] = [];
  private reader: { resolve: (result: IteratorResult<V>) => void; reject: (error: unknown) => void } | undefined;
  private readonly idleWaiters: (() => void)[] = [];
  private ended = false;
  private failure: unknown;

  /**
   * @param convert turns a chunk of output into the values this reader
   *   yields (none when the chunk is not for it); may keep a partial line.
   * @param flush gives what `convert` kept once the output has ended.
   * @param detach called when the reader leaves, so the pump stops feeding it.
   */
  constructor(
    private readonly convert: (fd: Fd, chunk: Buffer) => V[],
    private readonly flush: () => V[],
    private readonly detach: (feed: Feed<V>) => void,
  ) {}

  /** True while values it was given are unread. */
  get busy(): boolean {
    return this.queue.length > 0;
  }

  /** Hands the reader a chunk of output from `fd`, converted; see `busy` and `idle()` for when it is read. */
  push(fd: Fd, chunk: Buffer): void {
    for (const value of this.convert(fd, chunk)) this.offer(value);
  }

  /** No more output; with `error`, the reader's next read throws it once the rest is read. */
  end(error?: unknown): void {
    if (this.ended) return;
    for (const value of this.flush()) this.offer(value);
    this.ended = true;
    this.failure = error;
    if (this.reader && this.queue.length === 0) this.settle();
  }

  /** Resolves once every value given so far has been read (or the reader left). */
  idle(): Promise<void> {
    if (!this.busy) return Promise.resolve();
    return new Promise((resolve) => this.idleWaiters.push(resolve));
  }

  /** The next value, waiting for one; done once ended and read out, or rejects with `end()`'s error then. */
  next(): Promise<IteratorResult<V>> {
    if (this.queue.length > 0) {
      const value = this.queue.shift() as V;
      if (this.queue.length === 0) this.wake();
      return Promise.resolve({ value, done: false });
    }
    if (this.ended) {
      const failure = this.failure;
      this.failure = undefined;
      return failure === undefined ? Promise.resolve({ value: undefined, done: true }) : Promise.reject(failure);
    }
    return new Promise((resolve, reject) => {
      this.reader = { resolve, reject };
    });
  }

  /** The reader left (`break` out of `for await`): it holds nothing back any more. */
  return(): Promise<IteratorResult<V>> {
    this.detach(this);
    this.ended = true;
    this.failure = undefined;
    this.queue.length = 0;
    this.wake();
    if (this.reader) this.settle();
    return Promise.resolve({ value: undefined, done: true });
  }

  /** Itself: a feed is read once, by one loop. */
  [Symbol.asyncIterator](): AsyncIterableIterator<V> {
    return this;
  }

  private offer(value: V): void {
    if (this.reader) {
      const { resolve } = this.reader;
      this.reader = undefined;
      resolve({ value, done: false });
    } else {
      this.queue.push(value);
    }
  }

  private settle(): void {
    const reader = this.reader as NonNullable<typeof this.reader>;
    this.reader = undefined;
    const failure = this.failure;
    this.failure = undefined;
    if (failure === undefined) reader.resolve({ value: undefined, done: true });
    else reader.reject(failure);
  }

  private wake(): void {
    for (const resolve of this.idleWaiters.splice(0)) resolve();
  }
}
