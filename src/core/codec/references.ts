import { addExtension } from 'msgpackr';
import { DecodeError } from '../errors.js';
import { FIRST_DYNAMIC_HANDLE } from '../protocol/handles.js';
import { SENDER_EXTENSION } from './extension-types.js';
import { MAX_HEADER_FIELD } from './limits.js';

/**
 * Senders and Channels on the wire: a reference to a receiver travels as
 * `[contextId, handle, ...]` and is decoded into a Sender or Channel bound
 * to the router decoding it, by the factory sender.ts or channel.ts
 * registered (the codec cannot import them: they import the codec).
 */

/** A decoded reference to a receiver: where it is and what it admits. */
export interface ReceiverReference {
  /** The context the receiver lives in. */
  contextId: number;
  /** Its handle there. */
  handle: number;
  /** Its window, when the reference carries one: bytes and messages a sender may have in flight. */
  window: { bytes: number; messages: number } | undefined;
  /** For a Channel's end: the handle its peer announces itself on. */
  helloHandle: number | undefined;
}

/**
 * Builds a Sender or Channel bound to the router decoding it; registered by
 * sender.ts and channel.ts. `authority` is the auth ID of the message the
 * reference arrived in (undefined when the caller of `decode` gave none).
 */
type ReferenceFactory = (router: unknown, reference: ReceiverReference, authority: number | undefined) => unknown;
let senderFactory: ReferenceFactory | undefined;
let channelFactory: ReferenceFactory | undefined;
/** Router on whose behalf the current (synchronous) decode runs, and the auth ID of the message decoded. */
let decodingFor: unknown;
let decodingAuthority: number | undefined;
/** Where the current decode lists the Senders and Channels it makes. */
let decodedReferences: unknown[] | undefined;

/** Registers how decoded sender references become Senders. */
export function setSenderFactory(factory: ReferenceFactory): void {
  senderFactory = factory;
}

/** Registers how decoded channel references become Channels. */
export function setChannelFactory(factory: ReferenceFactory): void {
  channelFactory = factory;
}

/**
 * Sets whom the decode about to run makes Senders and Channels for (see
 * `decode`); `endDecoding` clears it when the decode ends, however it ends.
 */
export function beginDecoding(router: unknown, authority: number | undefined, references: unknown[] | undefined): void {
  decodingFor = router;
  decodingAuthority = authority;
  decodedReferences = references;
}

/** Clears what `beginDecoding` set. */
export function endDecoding(): void {
  decodingFor = undefined;
  decodingAuthority = undefined;
  decodedReferences = undefined;
}

/** A reference to a receiver as it travels; `prepare` makes one for each Sender or Channel end it meets. */
export class WireSender {
  /** `[contextId, handle]`, then optionally the window and a Channel's hello handle (see `SENDER_EXTENSION`). */
  readonly reference: number[];
  /** @param reference as `reference`. */
  constructor(reference: number[]) {
    this.reference = reference;
  }
}

addExtension({
  Class: WireSender,
  type: SENDER_EXTENSION,
  write: (sender: WireSender) => sender.reference,
  read: (reference: unknown) => {
    if (
      !Array.isArray(reference) ||
      (reference.length !== 2 && reference.length !== 4 && reference.length !== 5) ||
      !reference.every(isHeaderField) ||
      (reference.length > 2 && (reference[2] === 0 || reference[3] === 0))
    ) {
      throw new DecodeError(
        'malformed Sender: expected [context ID, handle], then optionally a window (bytes, messages, both above 0) and a hello handle, all 32-bit unsigned integers',
      );
    }
    const [contextId, handle, bytes, messages, helloHandle] = reference as number[] as [
      number,
      number,
      number?,
      number?,
      number?,
    ];
    // A standard handle (CALL_FUNCTION, SHUTDOWN...) is never a receiver a
    // peer may hand out: sending on it would act on that context directly.
    if (handle < FIRST_DYNAMIC_HANDLE) {
      throw new DecodeError(
        `refused a Sender aimed at standard handle ${handle} of context ${contextId}: only receivers (handles from ${FIRST_DYNAMIC_HANDLE}) can be sent`,
      );
    }
    if (helloHandle !== undefined && helloHandle < FIRST_DYNAMIC_HANDLE) {
      throw new DecodeError(`refused a Channel whose hello handle ${helloHandle} is a standard handle`);
    }
    const factory = helloHandle === undefined ? senderFactory : channelFactory;
    if (decodingFor === undefined || !factory) {
      throw new DecodeError('a Sender or Channel can only be decoded on behalf of a router');
    }
    const made = factory(
      decodingFor,
      {
        contextId,
        handle,
        window: bytes === undefined ? undefined : { bytes, messages: messages as number },
        helloHandle,
      },
      decodingAuthority,
    );
    decodedReferences?.push(made);
    return made;
  },
});

function isHeaderField(value: unknown): boolean {
  return typeof value === 'number' && Number.isInteger(value) && value >= 0 && value <= MAX_HEADER_FIELD;
}
