import { encode } from '../codec.js';
import { describeError, MessageTooLargeError, ProtocolError } from '../errors.js';
import { Message } from '../message.js';
import type { Stream } from '../stream.js';
import type { MessageSwitch, RequestOptions } from '../switch.js';
import { Violation } from './check.js';
import { EnvelopeViolation, failureReply, openEnvelope, successReply } from './envelope.js';
import type { HandleSpec } from './spec.js';

/** Options of `serve`. */
export interface ServeOptions {
  /** Admission check replacing the spec's policy (a Receiver-like narrower one). */
  policy?: import('../switch.js').Policy;
  /**
   * Called with the error of a request that expected no reply (reply-to 0):
   * there is nobody to tell. Default: a router warning.
   */
  onUnanswered?: (error: unknown, message: Message) => void;
  /**
   * Called after a success reply has been sent (not when it could not be):
   * for bookkeeping that must follow the send, such as marking files as sent.
   */
  onSent?: (value: unknown, message: Message) => void;
  /** Ignore requests that expect no reply (reply-to 0): the work would be wasted. Default false. */
  replyRequired?: boolean;
  /**
   * Called once per request after it was answered (or found to need no
   * answer), whatever the outcome: for cleanup tied to the request, such as
   * closing the Senders its arguments carried.
   */
  onSettled?: (message: Message) => void;
}

/**
 * Serves a standard handle on `router`: each admitted request is decoded
 * and checked against the spec, passed to `handler`, and answered with the
 * handler's result (awaited) in the reply envelope. A malformed request is
 * answered with a `ProtocolError`, a throw or rejection with that error,
 * a result that cannot be sent (too large, an unsupported type) with the
 * error saying so, and if even that cannot be sent, with a dead reply: a
 * requester always gets an answer, and nothing escapes unhandled.
 * @param handler receives the checked request, the message it came in and
 *   the stream it arrived on (undefined when sent from this context).
 */
export function serve<Request, Reply>(
  router: MessageSwitch,
  spec: HandleSpec<Request, Reply>,
  handler: (request: Request, message: Message, stream: Stream | undefined) => Reply | Promise<Reply>,
  options: ServeOptions = {},
): void {
  router.addHandler(
    (message, stream) => {
      if (options.replyRequired && message.replyTo === 0) return;
      let result: Reply | Promise<Reply>;
      try {
        const request = checkRequest(router, spec, message);
        result = handler(request, message, stream);
      } catch (error) {
        answer(router, spec, message, error, true, options);
        return;
      }
      if (isThenable(result)) {
        // Kept until answered (a module request waits behind others): it holds its own bytes, not the read it came in.
        message.ownPayload();
        result.then(
          (value) => answer(router, spec, message, value, false, options),
          (error: unknown) => answer(router, spec, message, error, true, options),
        );
      } else answer(router, spec, message, result, false, options);
    },
    { handle: spec.handle, policy: options.policy ?? spec.policy(router) },
  );
}

function checkRequest<Request>(router: MessageSwitch, spec: HandleSpec<Request, unknown>, message: Message): Request {
  const value = message.unpack(spec.senders ? router : undefined);
  try {
    return spec.request(value);
  } catch (error) {
    if (error instanceof Violation) throw new ProtocolError(spec.name, router.nameOf(message.src), error.message);
    throw error;
  }
}

function isThenable(value: unknown): value is PromiseLike<unknown> {
  return value !== null && typeof value === 'object' && typeof (value as PromiseLike<unknown>).then === 'function';
}

type Answer = (
  router: MessageSwitch,
  spec: HandleSpec<unknown, unknown>,
  message: Message,
  value: unknown,
  failed: boolean,
  options: ServeOptions,
) => void;

const answer: Answer = (router, spec, message, value, failed, options) => {
  try {
    reply(router, spec, message, value, failed, options);
  } finally {
    if (options.onSettled) {
      try {
        options.onSettled(message);
      } catch (error) {
        router.warn(
          'handler',
          `${router.name}: after ${spec.name} from context ${message.src}: ${describeError(error)}`,
        );
      }
    }
  }
};

const reply: Answer = (router, spec, message, value, failed, options) => {
  if (message.replyTo === 0) {
    if (!failed) return;
    if (options.onUnanswered) options.onUnanswered(value, message);
    else
      router.warn(
        'handler',
        `${router.name}: ${spec.name} from context ${message.src} failed: ${describeError(value)}`,
      );
    return;
  }
  let data: Uint8Array;
  let sent = !failed;
  try {
    data = failed ? failure(value) : successReply(value, spec.replyName ?? 'reply');
    if (data.length > router.maxMessageSize) {
      throw new MessageTooLargeError(
        data.length,
        router.maxMessageSize,
        `the ${spec.replyName ?? 'reply'} of ${spec.name} in context '${router.name}' (to context ${message.src})`,
      );
    }
  } catch (error) {
    data = failure(error);
    sent = false;
  }
  try {
    router.send(
      new Message(
        { dst: message.src, src: router.id, auth: router.id, handle: message.replyTo, replyTo: 0, flags: 0 },
        data,
      ),
    );
  } catch (error) {
    router.deadReply(message, `${spec.name} in context '${router.name}' could not reply: ${describeError(error)}`);
    return;
  }
  if (!sent || !options.onSent) return;
  try {
    options.onSent(value, message);
  } catch (error) {
    router.warn('handler', `${router.name}: after replying to ${spec.name}: ${describeError(error)}`);
  }
};

/** A failure reply for `error`; one that cannot even be described (a throwing getter) becomes a plain one. */
function failure(error: unknown): Uint8Array {
  try {
    return failureReply(error);
  } catch {
    return failureReply(new Error('the request failed with an error that could not be described'));
  }
}

/** Options of `ask`. */
export type AskOptions = RequestOptions;

/**
 * Sends a request to a standard handle of context `dst` and resolves with
 * its checked reply.
 * @param options timeout (default: the spec's), signal, and what is being done for error messages.
 * @throws the error the handler raised there, revived (see `remoteError`).
 * @throws ProtocolError when the reply is malformed.
 * @throws ChannelError, TimeoutError and the errors of `MessageSwitch.request`.
 */
export async function ask<Request, Reply>(
  router: MessageSwitch,
  dst: number,
  spec: HandleSpec<Request, Reply>,
  request: Request,
  options: AskOptions = {},
): Promise<Reply> {
  const reply = await router.request(dst, spec.handle, encode(request, spec.name.toLowerCase()), {
    timeout: options.timeout ?? spec.timeout,
    signal: options.signal,
    what: options.what ?? spec.name,
  });
  return openReply(router, dst, spec, reply);
}

/**
 * The checked value of a reply to `spec` from context `dst`.
 * @throws as `ask`.
 */
export function openReply<Reply>(
  router: MessageSwitch,
  dst: number,
  spec: HandleSpec<unknown, Reply>,
  reply: Message,
): Reply {
  try {
    const value = openEnvelope(reply.unpack(spec.senders ? router : undefined), router.nameOf(dst), dst);
    return spec.reply ? spec.reply(value) : (value as Reply);
  } catch (error) {
    if (error instanceof Violation || error instanceof EnvelopeViolation) {
      throw new ProtocolError(spec.name, router.nameOf(dst), error.message);
    }
    throw error;
  }
}
