import { ChannelError, TimeoutError } from './errors.js';
import type { Receiver } from './receiver.js';
import { switchOf } from './switch.js';

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
 * leaves the set once drained; iteration ends when none is left. Receivers
 * may be added and removed while a `get()` waits.
 */
export class Select<T = unknown> implements AsyncIterable<Selected<T>> {
  private readonly receivers: Receiver<T>[] = [];
  private next = 0;
  /** Wakes a waiting `get()` when the set changes. */
  private readonly wakers = new Set<() => void>();

  /**
   * @param receivers the receivers to wait on; more can be added with `add`.
   * @throws TypeError when the same receiver is listed twice.
   */
  constructor(receivers: Iterable<Receiver<T>> = []) {
    for (const receiver of receivers) this.add(receiver);
  }

  /**
   * Adds a receiver to the set; a `get()` waiting already sees it.
   * @throws TypeError when it is in the set already: each value is read
   *   once, so a second entry could only skew the round-robin (Mitogen's
   *   Select refuses it too).
   */
  add(receiver: Receiver<T>): void {
    if (this.receivers.indexOf(receiver) !== -1) {
      throw new TypeError(
        `the receiver on handle ${receiver.handle} of context '${switchOf(receiver).name}' is already in this Select; add each receiver once`,
      );
    }
    this.receivers.push(receiver);
    this.wake();
  }

  /**
   * Removes a receiver from the set (it stays open; read it directly).
   * @returns false when it was not in the set.
   */
  remove(receiver: Receiver<T>): boolean {
    const index = this.receivers.indexOf(receiver);
    if (index === -1) return false;
    this.receivers.splice(index, 1);
    if (this.next > index) this.next--;
    this.wake();
    return true;
  }

  /** Receivers still in the set. */
  get size(): number {
    return this.receivers.length;
  }

  /**
   * The next value from any receiver. Receivers are scanned round-robin so
   * a busy one cannot starve the others.
   * @param timeout milliseconds to wait; default: no limit.
   * @throws ChannelError when the set is empty (every receiver has closed
   *   and been drained, or none was added).
   * @throws TimeoutError when `timeout` passes first.
   */
  async get(timeout?: number): Promise<Selected<T>> {
    const deadline = timeout === undefined ? undefined : Date.now() + timeout;
    for (;;) {
      const picked = this.pick();
      if (picked) return { receiver: picked, value: await picked.get() };
      if (this.receivers.length === 0) throw new ChannelError('select', -1, 'every receiver in the select has closed');
      const left = deadline === undefined ? undefined : deadline - Date.now();
      if ((left !== undefined && left <= 0) || !(await this.anyReady(left))) {
        const first = this.receivers[0];
        const where = first ? switchOf(first).name : 'select';
        throw new TimeoutError(`waiting on a select of ${this.receivers.length} receivers`, where, timeout as number);
      }
    }
  }

  /** The next receiver with a queued value, dropping drained closed ones. */
  private pick(): Receiver<T> | undefined {
    for (let i = this.receivers.length - 1; i >= 0; i--) {
      const receiver = this.receivers[i] as Receiver<T>;
      if (receiver.closed && receiver.queued === 0) {
        this.receivers.splice(i, 1);
        if (this.next > i) this.next--;
      }
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

  private wake(): void {
    for (const waker of [...this.wakers]) waker();
  }

  /**
   * Waits until any receiver is ready or the set changes, keeping the event
   * loop alive meanwhile. Resolves false when `timeout` ms pass first.
   */
  private anyReady(timeout: number | undefined): Promise<boolean> {
    const routers = new Set(this.receivers.map((receiver) => switchOf(receiver)));
    for (const router of routers) router.hold();
    let cancels: (() => void)[] = [];
    let timer: ReturnType<typeof setTimeout> | undefined;
    let waker: (() => void) | undefined;
    return new Promise<boolean>((resolve) => {
      waker = () => resolve(true);
      this.wakers.add(waker);
      cancels = this.receivers.map((receiver) => receiver.onReady(() => resolve(true)));
      if (timeout !== undefined) timer = setTimeout(() => resolve(false), timeout);
    }).finally(() => {
      if (timer) clearTimeout(timer);
      if (waker) this.wakers.delete(waker);
      for (const cancel of cancels) cancel();
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
      await this.anyReady(undefined);
    }
  }
}
