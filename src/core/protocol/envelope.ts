import { encodePrepared, prepareValue } from '../codec.js';
import { type RemoteErrorInfo, remoteError, toRemoteErrorInfo } from '../errors.js';

/**
 * The one reply shape of every standard handle: `[0, value]` when the
 * request succeeded, `[1, error]` when it failed, the error as
 * `toRemoteErrorInfo` describes it. Written and read only here.
 */
export type Envelope = [status: 0, value: unknown] | [status: 1, error: RemoteErrorInfo];

/**
 * The bytes of a success reply.
 * @param path how to name the value in an `UnsupportedValueError`, e.g. `'return value'`.
 * @throws UnsupportedValueError when the value cannot be sent.
 */
export function successReply(value: unknown, path: string): Uint8Array {
  return encodePrepared([0, prepareValue(value, path)]);
}

/** The bytes of a failure reply carrying `error` (anything thrown). Never throws. */
export function failureReply(error: unknown): Uint8Array {
  return encodePrepared([1, toRemoteErrorInfo(error)]);
}

/**
 * The value of a decoded reply envelope, or the error it carries, revived
 * (see `remoteError`) as raised in context `contextName` (`contextId`).
 * @throws the remote error for a failure reply.
 * @throws Error with `what` for anything that is not an envelope (the caller wraps it).
 */
export function openEnvelope(decoded: unknown, contextName: string, contextId: number): unknown {
  if (!Array.isArray(decoded) || decoded.length !== 2 || (decoded[0] !== 0 && decoded[0] !== 1)) {
    throw new EnvelopeViolation();
  }
  if (decoded[0] === 0) return decoded[1];
  throw remoteError(decoded[1] as RemoteErrorInfo, contextName, contextId);
}

/** A reply that is not `[0, value]` or `[1, error]`. */
export class EnvelopeViolation extends Error {
  /** Its message says what a reply must be; `openReply` wraps it in a `ProtocolError` naming the handle and context. */
  constructor() {
    super('reply: expected [0, value] or [1, error]');
    this.name = 'EnvelopeViolation';
  }
}
