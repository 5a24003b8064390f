import { ChannelError } from './errors.js';
import type { Receiver } from './receiver.js';

/** A value read through a `Select`, with the receiver it came from. */
export interface Selected<T> {
  /** The receiver the value arrived on. */
  receiver: Receiver<T>;
  /** The value, decoded. */
  value: T;
}

/**
 * Waits on several receivers at once and yields values in arrival order,
 * each tagged with its receiver (Mitogen's Select). A receiver that closes
 * leaves the set once drained; iteration ends when none is left.
 */
export class Select<T = unknown> implements AsyncIterable<Selected<T>> {
  private readonly receivers: Receiver<T>[];
  private next = 0;

  /**
   * @param receivers the receivers to wait on; more can be added with `add`.
   * @throws TypeError when the same receiver is listed twice.
   */
  constructor(receivers: Iterable<Receiver<T>>) {
    this.receivers = [];
    for (const receiver of receivers) this.add(receiver);
  }

  /**
   * Adds a receiver to the set.
   * @throws TypeError when it is in the set already: each value is read
   *   once, so a second entry could only skew the round-robin (Mitogen's
   *   Select refuses it too).
   */
  add(receiver: Receiver<T>): void {
    if (this.receivers.indexOf(receiver) !== -1) {
      throw new TypeError(
        `the receiver on handle ${receiver.handle} of context '${receiver.router.name}' is already in this Select; add each receiver once`,
      );
    }
    this.receivers.push(receiver);
  }

  /** Receivers still in the set. */
  get size(): number {
    return this.receivers.length;
  }

  /**
   * The next value from any receiver. Receivers are scanned round-robin so
   * a busy one cannot starve the others.
   * @throws ChannelError when every receiver has closed.
   */
  async get(): Promise<Selected<T>> {
    for (;;) {
      const picked = this.pick();
      if (picked) return { receiver: picked, value: await picked.get() };
      if (this.receivers.length === 0) throw new ChannelError('select', -1, 'every receiver in the select has closed');
      await this.anyReady();
    }
  }

  /** The next receiver with a queued value, dropping drained closed ones. */
  private pick(): Receiver<T> | undefined {
    for (let i = this.receivers.length - 1; i >= 0; i--) {
      const receiver = this.receivers[i] as Receiver<T>;
      if (receiver.closed && receiver.queued === 0) this.receivers.splice(i, 1);
    }
    const n = this.receivers.length;
    for (let i = 0; i < n; i++) {
      const index = (this.next + i) % n;
      const receiver = this.receivers[index] as Receiver<T>;
      if (receiver.queued > 0) {
        this.next = index + 1;
        return receiver;
      }
    }
    return undefined;
  }

  /** Waits until any receiver is ready, keeping the event loop alive meanwhile. */
  private anyReady(): Promise<void> {
    const routers = new Set(this.receivers.map((receiver) => receiver.router));
    for (const router of routers) router.hold();
    return new Promise<void>((resolve) => {
      const cancels = this.receivers.map((receiver) =>
        receiver.onReady(() => {
          for (const cancel of cancels) cancel();
          resolve();
        }),
      );
    }).finally(() => {
      for (const router of routers) router.release();
    });
  }

  /** Yields values from every receiver until all have closed. */
  async *[Symbol.asyncIterator](): AsyncIterator<Selected<T>> {
    for (;;) {
      const picked = this.pick();
      if (picked) {
        yield { receiver: picked, value: await picked.get() };
        continue;
      }
      if (this.receivers.length === 0) return;
      await this.anyReady();
    }
  }
}
