import type { Message } from './message.js';
import type { Stream } from './stream.js';
import type { RouterWarning } from './warnings.js';

/** What the trust check needs of the switch it runs in. */
export interface TrustHost {
  /** This context's name, for warnings. */
  readonly name: string;
  /** The stream a message claiming `id` must arrive on. */
  expectedStream(id: number): Stream | undefined;
  /** Reports a refusal (see `MessageSwitch.warn`). */
  warn(code: RouterWarning['code'], message: string): void;
}

/**
 * Whether a message that arrived on `inStream` may be routed: its src and
 * auth IDs must be routed through that stream (descendants through the
 * stream they were announced on, everything else through the parent), so a
 * context cannot speak for an ID it does not own. A refusal is reported as
 * a `forged-id` warning.
 */
export function admits(host: TrustHost, message: Message, inStream: Stream): boolean {
  if (inStream.authority !== undefined) return admitsPeer(host, message, inStream, inStream.authority);
  if (host.expectedStream(message.auth) !== inStream) {
    forged(host, message, inStream, 'auth', message.auth);
    return false;
  }
  if (message.src !== message.auth && host.expectedStream(message.src) !== inStream) {
    forged(host, message, inStream, 'src', message.src);
    return false;
  }
  return true;
}

/**
 * A message from a listener peer: it may claim only its own ID, and it
 * then acts with `authority` (the parent/ancestor checks of every context
 * on its way see the master).
 */
function admitsPeer(host: TrustHost, message: Message, inStream: Stream, authority: number): boolean {
  if (message.src !== inStream.remoteId) {
    forged(host, message, inStream, 'src', message.src);
    return false;
  }
  if (message.auth !== message.src && message.auth !== authority) {
    forged(host, message, inStream, 'auth', message.auth);
    return false;
  }
  message.auth = authority;
  return true;
}

function forged(host: TrustHost, message: Message, inStream: Stream, field: 'auth' | 'src', id: number): void {
  host.warn(
    'forged-id',
    `${host.name}: dropped a message claiming ${field} ID ${id} from stream ${inStream.name} (dst ${message.dst}, handle ${message.handle}): that ID is not routed through this stream`,
  );
}

/** What `admitsDeadAbout` needs of the switch it runs in. */
export interface PathHost {
  /** The stream a message to `id` leaves by (and one claiming `id` must arrive on). */
  expectedStream(id: number): Stream | undefined;
  /** The stream a descendant is reached through; undefined for any other context. */
  routeOf(contextId: number): Stream | undefined;
  /** True when `ancestor` started `contextId` or one of its ancestors below this context. */
  isAncestorOf(ancestor: number, contextId: number): boolean;
}

/**
 * Whether a dead message that arrived on `stream` may speak for `dst`: end
 * a request to it, a Sender's credit from it, a Receiver bound to it. Only
 * `dst` itself or a router on the way to it says that a message to `dst`
 * could not be delivered: so only through the stream `dst` is reached by,
 * and, when `dst` is a descendant, only from `dst` or one of its ancestors,
 * never from a sibling or cousin behind the same child (which would have
 * had to guess a random handle, and may try at the rate it can write).
 * Undefined `stream`: made in this context.
 */
export function admitsDeadAbout(host: PathHost, message: Message, stream: Stream | undefined, dst: number): boolean {
  if (stream === undefined) return true;
  if (stream !== host.expectedStream(dst)) return false;
  if (host.routeOf(dst) === undefined) return true;
  return message.src === dst || host.isAncestorOf(message.src, dst);
}
