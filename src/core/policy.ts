import type { Message } from './message.js';
import type { Stream } from './stream.js';
import type { MessageSwitch } from './switch.js';

/**
 * Decides whether a message may reach a handle. `stream` is the stream it
 * arrived on, or undefined when it was sent from this context.
 */
export type Policy = (message: Message, stream: Stream | undefined) => boolean;

/**
 * Admits messages acting under the authority of this context's parent or
 * any ancestor (or this context itself). A child can therefore never make
 * its parent run code.
 */
export function hasParentAuthority(router: MessageSwitch): Policy {
  return (message: Message) => message.auth === router.id || router.parentIds.includes(message.auth);
}

/** Admits only messages that originate in this context. */
export function fromSelf(router: MessageSwitch): Policy {
  return (message: Message) => message.auth === router.id;
}

/** Admits messages that arrived on a stream from a child: requests flow up the tree only. */
export function fromChildStream(router: MessageSwitch): Policy {
  return (_message: Message, stream) => stream !== undefined && stream !== router.parentStream;
}
