import { deadReason } from './dead-replies.js';
import { ChannelError, ContextDisconnectedError, TimeoutError } from './errors.js';
import type { HandlerOptions } from './handler-table.js';
import { Message } from './message.js';
import { successReply } from './protocol/envelope.js';
import type { Departure } from './route-table.js';
import type { Stream } from './stream.js';
import { admitsDeadAbout, type PathHost } from './trust.js';

/** Options of `MessageSwitch.request`. */
export interface RequestOptions {
  /** Reject with `TimeoutError` after this many milliseconds. Default: no limit. */
  timeout?: number | undefined;
  /** Reject with the signal's reason when it aborts. */
  signal?: AbortSignal | undefined;
  /** What is being done, for error messages, e.g. `'call to deploy()'`. */
  what?: string | undefined;
  /**
   * Called when the timeout passes or the signal aborts after the request
   * was sent, with its reply-to handle: to tell the destination (a call's
   * CANCEL_CALL).
   */
  onStop?: ((replyTo: number, kind: 'timeout' | 'abort') => void) | undefined;
  /** Appended to the `TimeoutError`'s message: what the timeout did and did not stop. */
  timeoutAdvice?: string | undefined;
}

/** What a request and a reply need of the switch they are made on. */
export interface RequestHost extends PathHost {
  /** This context's ID: the src and auth of requests and replies. */
  readonly id: number;
  /** What became of `contextId` when it went away and has no route since. */
  departureOf(contextId: number): Departure | undefined;
  /** Name recorded for a context ID, for errors. */
  nameOf(contextId: number): string;
  /** Registers the handler the reply arrives on; returns its handle. */
  addHandler(fn: (message: Message, stream: Stream | undefined) => void, options?: HandlerOptions): number;
  /** Removes the reply handler of a request given up on. */
  removeHandler(handle: number): void;
  /** Sends a message originating in this context (see `MessageSwitch.send`). */
  send(message: Message): void;
  /** Keeps the event loop alive while a request is in flight (see `MessageSwitch.hold`). */
  hold(): void;
  /** Undoes one `hold`. */
  release(): void;
}

/** `MessageSwitch.request` (see there), on `host`. */
export function request(
  host: RequestHost,
  dst: number,
  handle: number,
  payload: Uint8Array,
  options: RequestOptions = {},
): Promise<Message> {
  return new Promise<Message>((resolve, reject) => {
    const { signal, timeout } = options;
    if (signal?.aborted) {
      reject(signal.reason);
      return;
    }
    const departure = host.departureOf(dst);
    if (departure) {
      reject(new ContextDisconnectedError(departure.name, dst, departure.reason, departure.kind));
      return;
    }
    let timer: ReturnType<typeof setTimeout> | undefined;
    let replyTo = 0;
    const settle = () => {
      if (timer) clearTimeout(timer);
      signal?.removeEventListener('abort', onAbort);
      host.release();
    };
    const onAbort = () => {
      host.removeHandler(replyTo);
      settle();
      options.onStop?.(replyTo, 'abort');
      reject(signal?.reason);
    };
    replyTo = host.addHandler(
      (reply) => {
        settle();
        if (reply.isDead) reject(new ChannelError(host.nameOf(dst), dst, deadReason(reply)));
        else resolve(reply);
      },
      {
        persist: false,
        contextId: dst,
        // Replies come from the destination; dead replies from it or a router on the way to it.
        policy: (reply, stream) => (reply.isDead ? admitsDeadAbout(host, reply, stream, dst) : reply.src === dst),
        onClose: (error) => {
          settle();
          reject(error);
        },
      },
    );
    host.hold();
    if (timeout !== undefined && timeout >= 0) {
      timer = setTimeout(() => {
        host.removeHandler(replyTo);
        settle();
        options.onStop?.(replyTo, 'timeout');
        reject(new TimeoutError(options.what ?? 'request', host.nameOf(dst), timeout, options.timeoutAdvice));
      }, timeout);
    }
    signal?.addEventListener('abort', onAbort, { once: true });
    try {
      host.send(new Message({ dst, src: host.id, auth: host.id, handle, replyTo, flags: 0 }, payload));
    } catch (error) {
      host.removeHandler(replyTo);
      settle();
      reject(error);
    }
  });
}

/** `MessageSwitch.reply` (see there), on `host`. */
export function reply(host: RequestHost, message: Message, value: unknown): void {
  if (message.replyTo === 0) return;
  host.send(
    new Message(
      { dst: message.src, src: host.id, auth: host.id, handle: message.replyTo, replyTo: 0, flags: 0 },
      successReply(value, 'reply'),
    ),
  );
}
