import { encodePrepared, prepareValue } from './codec.js';
import { MessageTooLargeError, toRemoteErrorInfo } from './errors.js';
import { compileFunction } from './function-source.js';
import { CALL_FUNCTION } from './handles.js';
import { Message } from './message.js';
import { hasParentAuthority } from './policy.js';
import type { Router } from './router.js';

/** Payload of a CALL_FUNCTION message: function source and arguments. */
export type CallPayload = [source: string, args: unknown[]];
/** Payload of a call's reply: `[0, result]` or `[1, error info]`. */
export type ReplyPayload = [0, unknown] | [1, ReturnType<typeof toRemoteErrorInfo>];

/**
 * Runs shipped functions in this context. Calls run concurrently: an async
 * function awaiting IO does not hold up the next call.
 */
export class Dispatcher {
  /**
   * @param requireFn the `require` shipped functions see.
   * @param onUnreported called with errors of calls that expect no reply (callNoReply).
   */
  constructor(
    private readonly router: Router,
    private readonly requireFn: (id: string) => unknown,
    private readonly onUnreported: (error: unknown) => void,
  ) {
    router.addHandler((message) => this.onCall(message), {
      handle: CALL_FUNCTION,
      policy: hasParentAuthority(router),
    });
  }

  private onCall(message: Message): void {
    let result: unknown;
    try {
      const payload = message.unpack(this.router);
      if (!Array.isArray(payload) || typeof payload[0] !== 'string' || !Array.isArray(payload[1])) {
        throw new TypeError('malformed CALL_FUNCTION payload');
      }
      const fn = compileFunction(payload[0], this.requireFn);
      result = fn.apply(undefined, payload[1]);
    } catch (error) {
      this.fail(message, error);
      return;
    }
    if (result !== null && typeof result === 'object' && typeof (result as PromiseLike<unknown>).then === 'function') {
      (result as PromiseLike<unknown>).then(
        (value) => this.succeed(message, value),
        (error) => this.fail(message, error),
      );
    } else {
      this.succeed(message, result);
    }
  }

  private succeed(message: Message, value: unknown): void {
    if (message.replyTo === 0) return;
    let data: Uint8Array;
    try {
      data = encodePrepared([0, prepareValue(value, 'return value')]);
      if (data.length > this.router.maxMessageSize) {
        throw new MessageTooLargeError(
          data.length,
          this.router.maxMessageSize,
          `the result (as a reply to context ${message.src})`,
        );
      }
    } catch (error) {
      this.fail(message, error);
      return;
    }
    this.send(message, data);
  }

  private fail(message: Message, error: unknown): void {
    if (message.replyTo === 0) {
      this.onUnreported(error);
      return;
    }
    this.send(message, encodePrepared([1, toRemoteErrorInfo(error)]));
  }

  private send(message: Message, data: Uint8Array): void {
    this.router.send(
      new Message(
        { dst: message.src, src: this.router.id, auth: this.router.id, handle: message.replyTo, replyTo: 0, flags: 0 },
        data,
      ),
    );
  }
}
