import { TendrilError } from './base.js';

/** A stream carried bytes that are not valid tendril frames; it was closed. */
export class StreamError extends TendrilError {
  /** @param message what was wrong with the bytes. */
  constructor(message: string) {
    super(message, 'ERR_TENDRIL_STREAM');
  }
}

/**
 * A payload could not be decoded: it is not valid msgpack, nests deeper
 * than the decoder allows, uses an extension or error class name the codec
 * does not accept, or holds a value too costly to build (an oversized
 * bigint). Nothing of it was used.
 */
export class DecodeError extends TendrilError {
  /** @param message what was wrong with the payload, and where (byte offset). */
  constructor(message: string) {
    super(message, 'ERR_TENDRIL_DECODE');
  }
}

/**
 * A context sent a request or reply to a standard handle whose shape is
 * wrong (a missing field, a field of the wrong type, an ID it may not
 * claim). The request was answered with this error; nothing else was affected.
 */
export class ProtocolError extends TendrilError {
  /** Name of the standard handle, e.g. `'ALLOCATE_ID'`. */
  readonly handleName: string;
  /** Name of the context that sent it. */
  readonly contextName: string;

  /**
   * @param handleName the standard handle, e.g. `'CONNECT'`.
   * @param contextName the context that sent the malformed message.
   * @param what what was wrong with it.
   */
  constructor(handleName: string, contextName: string, what: string) {
    // A context a router knows nothing of is named by its ID alone ('context 7').
    const from = /^context \d+$/.test(contextName) ? contextName : `context '${contextName}'`;
    super(`malformed ${handleName} message from ${from}: ${what}`, 'ERR_TENDRIL_PROTOCOL');
    this.handleName = handleName;
    this.contextName = contextName;
  }
}
