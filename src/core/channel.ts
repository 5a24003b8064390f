import { type ReceiverReference, setChannelFactory } from './codec.js';
import { ChannelError, type TendrilError, TimeoutError, withoutStack } from './errors.js';
import { Message } from './message.js';
import { checkOperationOptions, type OperationOptions, optionsObject } from './options.js';
import { Receiver } from './receiver.js';
import { handled, rejected } from './send-window.js';
import { type LeaseHolder, Sender } from './sender.js';
import { type MessageSwitch, type SwitchLike, switchOf } from './switch.js';
import { ABANDON, CALL_SETTLED, LOCAL_RECEIVER, SEND_BYTES, SENDER_REFERENCE } from './symbols.js';
import { type HighWaterMark, highWaterMark } from './window.js';

/** The options a channel takes (`ChannelOptions`). */
const CHANNEL_OPTIONS = new Set(['highWaterMark']);

/** Options of a Channel. */
export interface ChannelOptions {
  /** The window of this end's receiver (see `ReceiverOptions.highWaterMark`). Default 1024 messages, 8 MiB. */
  highWaterMark?: Partial<HighWaterMark>;
}

interface WaitingSend {
  value: unknown;
  /** Sent with `SEND_BYTES`. */
  bytes: boolean;
  onCredited: (() => void) | undefined;
  resolve: () => void;
  reject: (error: Error) => void;
  /** The send's signal, and when its timeout ends (`Date.now()` ms), if it has them. */
  stop?: { signal?: AbortSignal | undefined; deadline?: number | undefined; settled: () => void };
}

/**
 * A two-way channel between two contexts: each end sends values of one type
 * and receives values of the other, both under flow control (each
 * direction is a Sender→Receiver pair with its own credit window).
 *
 * Make one end with `new Channel(router)` and pass it to a call: it arrives
 * there as the other end, bound to that context. Values sent before the
 * other end first sends or reads wait for it. `close()` ends the other
 * end's iteration; an end passed to a call is closed when the call
 * settles, so the loops on both sides end:
 *
 * ```ts
 * const channel = new Channel<number, string>(router);
 * const done = child.call(async (peer: Channel<string, number>) => {
 *   for await (const n of peer) await peer.send(`${n} squared is ${n * n}`);
 * }, channel.otherEnd());
 * for (const n of [1, 2, 3]) await channel.send(n);
 * channel.close();
 * for await (const line of channel) console.log(line);
 * await done;
 * ```
 *
 * A channel has one other end: an end made from passing the same one to a
 * second call is refused when it first announces itself (its reads fail
 * with `ChannelError`).
 */
export class Channel<Out = unknown, In = unknown> implements AsyncIterable<In> {
  /** The router of the context this end lives in. */
  readonly router: MessageSwitch;
  private readonly window: Readonly<HighWaterMark>;
  private receiver: Receiver<In> | undefined;
  private peer: Sender<Out> | undefined;
  /** Where the other end's hello arrives (the end made with `new Channel`). */
  private helloHandle = 0;
  /** Sends made before the other end announced itself. */
  private readonly waiting: WaitingSend[] = [];
  private closing = false;
  private failure: TendrilError | undefined;

  /**
   * Makes the first end of a channel, to pass to a call.
   * @param router the router of this context (the master's `Router`, or a context's own).
   * @throws InvalidOptionError when `options.highWaterMark` is malformed.
   */
  constructor(router: SwitchLike, options: ChannelOptions = {}) {
    this.router = switchOf(router);
    if (options !== OTHER_END) optionsObject(options, 'new Channel()', CHANNEL_OPTIONS);
    this.window = highWaterMark(options.highWaterMark, 'new Channel()');
    if (options === OTHER_END) return;
    const receiver = this.open();
    this.helloHandle = this.router.addHandler((message) => this.onHello(message), {
      onClose: (error) => this.fail(error),
    });
    receiver.onClosed((error) => {
      if (this.peer) return;
      const { contextName = this.router.name, contextId = this.router.id } = error as Partial<ChannelError>;
      // A channel whose other end never wrote back (a command that ran without being controlled) ends so.
      this.fail(
        withoutStack(
          () =>
            new ChannelError(
              contextName,
              contextId,
              `the other end closed before it announced itself (${error.message})`,
            ),
        ),
      );
    });
  }

  /** Makes the other end, from a reference that arrived in a message. */
  static fromReference<Out, In>(
    router: MessageSwitch,
    reference: ReceiverReference,
    authority: number | undefined,
  ): Channel<Out, In> {
    const end = new Channel<Out, In>(router, OTHER_END);
    end.peer = new Sender<Out>(router, reference.contextId, reference.handle, {
      authority,
      ...(reference.window && { highWaterMark: reference.window }),
    });
    end.helloHandle = reference.helloHandle as number;
    return end;
  }

  /**
   * This end, typed as the other end sees it (values this end sends are
   * the ones it receives): pass it to a call whose function takes a
   * `Channel<In, Out>`. The same object; only the type differs.
   */
  otherEnd(): Channel<In, Out> {
    return this as unknown as Channel<In, Out>;
  }

  /** True once this end has closed its sending direction (or the channel failed). */
  get closed(): boolean {
    return this.closing || this.failure !== undefined;
  }

  /**
   * Sends a value to the other end (see `Sender.send`); before the other end
   * has announced itself, once it has.
   * @throws UnsupportedValueError, MessageTooLargeError synchronously, as
   *   `Sender.send`, once the other end is known (before, the value waits
   *   unencoded and the promise rejects with them).
   * @param options `timeout` (ms) and `signal`, for the wait for the other
   *   end and then for room (see `Sender.send`): past either, this send
   *   rejects (`TimeoutError`, or the signal's reason) and this end gives
   *   up sending (later sends reject with `ChannelError`); values from the
   *   other end can still be read. Default: no limit.
   * @returns a promise that resolves when the value has left, and rejects
   *   with `ChannelError` when the other end is gone or this end closed.
   * @throws InvalidOptionError when `options` is malformed (synchronously).
   */
  send(value: Out, options?: OperationOptions): Promise<void> {
    const stop = options === undefined ? undefined : checkOperationOptions(options, 'channel.send()');
    return this.enqueue(value, false, undefined, stop);
  }

  /**
   * Sends `bytes` as they are, without copying them (see `SEND_BYTES`):
   * the other end reads a `Uint8Array`. Otherwise as `send`.
   * @param onCredited see `Sender[SEND_BYTES]`.
   */
  [SEND_BYTES](bytes: Uint8Array, onCredited?: () => void): Promise<void> {
    return this.enqueue(bytes, true, onCredited);
  }

  private enqueue(
    value: unknown,
    bytes: boolean,
    onCredited: (() => void) | undefined,
    stop?: OperationOptions,
  ): Promise<void> {
    this.open();
    if (this.failure) return rejected(this.failure);
    if (this.closing) {
      const to = this.peer?.contextId ?? this.router.id;
      return rejected(new ChannelError(this.router.nameOf(to), to, 'the channel was closed before this send'));
    }
    if (stop?.signal?.aborted) return rejected(stop.signal.reason);
    if (this.peer && this.waiting.length === 0) return sendOn(this.peer, value, bytes, onCredited, stop);
    return handled(
      new Promise<void>((resolve, reject) => {
        const send: WaitingSend = { value, bytes, onCredited, resolve, reject };
        if (stop?.timeout !== undefined || stop?.signal !== undefined) this.bound(send, stop);
        this.waiting.push(send);
      }),
    );
  }

  /**
   * Ends `send`'s wait for the other end when `stop`'s timeout passes or
   * its signal aborts: it rejects, and this end gives up sending (the
   * values after it could not arrive in order without it).
   */
  private bound(send: WaitingSend, stop: OperationOptions): void {
    const give = (error: Error) => {
      if (!this.waiting.includes(send)) return;
      this.waiting.splice(this.waiting.indexOf(send), 1);
      send.stop?.settled();
      send.reject(error);
      const to = this.peer?.contextId ?? this.router.id;
      this.fail(
        new ChannelError(
          this.router.nameOf(to),
          to,
          'a send that waited for the other end was stopped (its timeout or signal), and this end gave up sending',
        ),
      );
    };
    const onAbort = () => give(stop.signal?.reason);
    const timeout = stop.timeout;
    const timer =
      timeout === undefined
        ? undefined
        : setTimeout(
            () => give(new TimeoutError('a send waiting for the other end of a channel', this.router.name, timeout)),
            timeout,
          );
    stop.signal?.addEventListener('abort', onAbort, { once: true });
    send.stop = {
      signal: stop.signal,
      deadline: timeout === undefined ? undefined : Date.now() + timeout,
      settled: () => {
        if (timer) clearTimeout(timer);
        stop.signal?.removeEventListener('abort', onAbort);
      },
    };
  }

  /**
   * The next value from the other end.
   * @param timeout milliseconds to wait; default: no limit.
   * @throws as `Receiver.get`.
   */
  get(timeout?: number): Promise<In> {
    return this.open().get(timeout);
  }

  /** Values from the other end until it closes its direction. */
  [Symbol.asyncIterator](): AsyncIterator<In> {
    return this.open()[Symbol.asyncIterator]();
  }

  /**
   * Tells the other end no more values will come from this one (its
   * iteration ends), after values still waiting. Values from the other end
   * can still be read. Does nothing when already closed.
   */
  close(): void {
    if (this.closing) return;
    this.closing = true;
    if (this.peer && this.waiting.length === 0) this.peer.close();
  }

  /**
   * The call this end arrived in has settled: nobody here will send or
   * read any more, so close both directions (sends from the other end then
   * reject with `ChannelError`).
   */
  [CALL_SETTLED](): void {
    this.close();
    // What the other end sent before its call settled is still read.
    this.receiver?.closeInput();
  }

  /**
   * Gives up on the other end (see `ABANDON`): sends waiting for it (for
   * its hello, or for credit) and later ones reject with `error`, it is
   * told this end closed, and nothing more is read from it.
   */
  [ABANDON](error: TendrilError): void {
    this.closing = true;
    this.fail(error);
    this.peer?.[ABANDON](error);
    this.receiver?.close();
  }

  /** How the codec carries the first end: its receiver and hello handle. */
  get [SENDER_REFERENCE](): number[] {
    if (this.helloHandle === 0 || !this.receiver || this.peer) {
      throw new TypeError('only the end made with new Channel(), before its other end announced itself, can be sent');
    }
    return [this.router.id, this.receiver.handle, this.window.bytes, this.window.messages, this.helloHandle];
  }

  /** The receiver a call carrying this end should wait on (see `Receiver.lease`). */
  get [LOCAL_RECEIVER](): LeaseHolder | undefined {
    return this.peer ? undefined : this.receiver;
  }

  /** This end's receiver; the other end announces it (with its hello) on first use. */
  private open(): Receiver<In> {
    if (this.receiver) return this.receiver;
    const receiver = new Receiver<In>(this.router, { highWaterMark: this.window });
    this.receiver = receiver;
    if (this.peer) {
      const peer = this.peer;
      this.router.send(
        Message.encoded(
          // A hello to an end that has its other end already gets a dead
          // reply, which closes this end's receiver with the reason.
          {
            dst: peer.contextId,
            src: this.router.id,
            auth: peer.authority,
            handle: this.helloHandle,
            replyTo: receiver.handle,
          },
          receiver.toSender(),
        ),
      );
    }
    return receiver;
  }

  private onHello(message: Message): void {
    if (message.isDead) return;
    this.router.removeHandler(this.helloHandle);
    let peer: unknown;
    try {
      peer = message.unpack(this.router);
    } catch (error) {
      this.fail(
        new ChannelError(
          this.router.nameOf(message.src),
          message.src,
          `its hello was malformed: ${(error as Error).message}`,
        ),
      );
      return;
    }
    if (!(peer instanceof Sender)) {
      this.fail(new ChannelError(this.router.nameOf(message.src), message.src, 'its hello was not a Sender'));
      return;
    }
    this.peer = peer as Sender<Out>;
    for (const send of this.waiting.splice(0)) {
      send.stop?.settled();
      // What is left of its timeout covers the wait for room.
      const deadline = send.stop?.deadline;
      const stop = send.stop && {
        signal: send.stop.signal,
        timeout: deadline === undefined ? undefined : Math.max(0, deadline - Date.now()),
      };
      try {
        sendOn(peer, send.value, send.bytes, send.onCredited, stop).then(send.resolve, send.reject);
      } catch (error) {
        send.reject(error as Error);
      }
    }
    if (this.closing) peer.close();
  }

  private fail(error: TendrilError): void {
    if (this.failure) return;
    this.failure = error;
    if (this.helloHandle !== 0 && !this.peer) this.router.removeHandler(this.helloHandle);
    for (const send of this.waiting.splice(0)) {
      send.stop?.settled();
      send.reject(error);
    }
  }
}

function sendOn(
  peer: Sender<unknown>,
  value: unknown,
  bytes: boolean,
  onCredited: (() => void) | undefined,
  stop?: OperationOptions,
): Promise<void> {
  return bytes ? peer[SEND_BYTES](value as Uint8Array, onCredited) : peer.send(value, stop);
}

/** Marks the constructor call made by `fromReference`. */
const OTHER_END: ChannelOptions = {};

setChannelFactory((router, reference, authority) =>
  Channel.fromReference(router as MessageSwitch, reference, authority),
);
