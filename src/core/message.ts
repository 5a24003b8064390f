import { decode, encode } from './codec.js';
import { DecodeError } from './errors.js';

/**
 * The fixed binary header that precedes every payload on a stream.
 * All fields are big-endian; see docs/protocol.md for the diagram.
 *
 * | offset | size | field    |
 * | ------ | ---- | -------- |
 * | 0      | 2    | magic    |
 * | 2      | 1    | version  |
 * | 3      | 1    | flags    |
 * | 4      | 4    | dst ID   |
 * | 8      | 4    | src ID   |
 * | 12     | 4    | auth ID  |
 * | 16     | 4    | handle   |
 * | 20     | 4    | reply-to |
 * | 24     | 4    | length   |
 */
export const HEADER_SIZE = 28;
/** First two bytes of every frame: ASCII `td`. */
export const MAGIC = 0x7464;
/** Version byte; a frame with another version is a protocol error. */
export const PROTOCOL_VERSION = 1;

/** The message reports that an earlier message could not be delivered; payload is the reason. */
export const FLAG_DEAD = 0x01;
/** The payload is raw bytes rather than a msgpack-encoded value. */
export const FLAG_RAW = 0x02;
const KNOWN_FLAGS = FLAG_DEAD | FLAG_RAW;

/** Largest value of a 32-bit header field. */
export const MAX_ID = 0xffffffff;

/** Fields of a message other than its payload. */
export interface MessageHeader {
  /** Context ID the message is addressed to. */
  dst: number;
  /** Context ID that sent it. */
  src: number;
  /** Context ID under whose authority it acts; normally equal to `src`. */
  auth: number;
  /** Handle (receiver) in the destination context. */
  handle: number;
  /** Handle in the sender where a reply is expected, or 0 for none. */
  replyTo: number;
  /** Bit set of `FLAG_*`. */
  flags: number;
}

/**
 * A routed message: header fields and a payload. Routers forward messages
 * without decoding the payload; only the receiving handle decodes it.
 */
export class Message implements MessageHeader {
  /** Context ID the message is addressed to. */
  dst: number;
  /** Context ID that sent it. */
  src: number;
  /** Context ID under whose authority it acts. */
  auth: number;
  /** Handle in the destination context. */
  handle: number;
  /** Handle in the sender awaiting a reply, or 0. */
  replyTo: number;
  /** Bit set of `FLAG_*`. */
  flags: number;
  /** The payload bytes, exactly as carried on the wire (see `data`). */
  private payload: Uint8Array;
  private decoded: { value: unknown; references: unknown[] } | undefined;

  /**
   * @param header the header fields.
   * @param data the payload bytes (msgpack, or raw when `FLAG_RAW` is set).
   */
  constructor(header: MessageHeader, data: Uint8Array) {
    this.dst = header.dst;
    this.src = header.src;
    this.auth = header.auth;
    this.handle = header.handle;
    this.replyTo = header.replyTo;
    this.flags = header.flags;
    this.payload = data;
  }

  /** The payload bytes, exactly as carried on the wire. */
  get data(): Uint8Array {
    return this.payload;
  }

  /**
   * Builds a message whose payload is `value` encoded with the codec.
   * @throws UnsupportedValueError when `value` holds a type that cannot be sent.
   */
  static encoded(header: Omit<MessageHeader, 'flags'> & { flags?: number }, value: unknown): Message {
    return new Message({ ...header, flags: header.flags ?? 0 }, encode(value));
  }

  /** Builds a message whose payload is `bytes`, flagged raw. */
  static raw(header: Omit<MessageHeader, 'flags'> & { flags?: number }, bytes: Uint8Array): Message {
    return new Message({ ...header, flags: (header.flags ?? 0) | FLAG_RAW }, bytes);
  }

  /** True when this message reports a failed delivery. */
  get isDead(): boolean {
    return (this.flags & FLAG_DEAD) !== 0;
  }

  /** True when the payload is raw bytes. */
  get isRaw(): boolean {
    return (this.flags & FLAG_RAW) !== 0;
  }

  /**
   * The payload as a value: decoded msgpack, or the bytes themselves for a raw
   * message. Decoded once and cached.
   * @param router the router Senders in the payload are bound to (required
   *   for payloads that may carry them: call arguments, results, receiver
   *   values). They act under this message's auth ID when it is less trusted
   *   than the router's own context (see `Sender`).
   * @throws DecodeError when the payload is not a valid value (its message
   *   names the context that sent it and the handle).
   */
  unpack(router?: unknown): unknown {
    if (this.isRaw) return this.data;
    if (!this.decoded) {
      try {
        const references: unknown[] = [];
        this.decoded = { value: decode(this.data, router, this.auth, references), references };
      } catch (error) {
        const name = (router as { nameOf?: (id: number) => string } | undefined)?.nameOf?.(this.src);
        const from =
          name && name !== `context ${this.src}` ? `context '${name}' (id ${this.src})` : `context ${this.src}`;
        throw new DecodeError(
          `cannot decode a message from ${from} to handle ${this.handle}: ${(error as Error).message}`,
        );
      }
    }
    return this.decoded.value;
  }

  /**
   * Makes the message own its payload, for a message kept a while (queued
   * in a receiver, waiting for its turn): a payload is a view into the
   * read it arrived in, which a child can fill with whatever else it
   * likes, so a one-byte value could keep 64 KiB alive while it is charged
   * for its one byte. A payload that is less than half of the buffer it
   * views is copied into a buffer of its own (not Node's shared pool,
   * which it would pin in turn); a larger one is kept as it is, so a kept
   * message holds at most twice its bytes. Values already decoded keep
   * viewing the old bytes (see `forget`).
   */
  ownPayload(): void {
    const bytes = this.payload;
    if (bytes.byteLength * 2 >= bytes.buffer.byteLength) return;
    const own = Buffer.allocUnsafeSlow(bytes.byteLength);
    own.set(bytes);
    this.payload = own;
  }

  /**
   * Lets go of the decoded payload, and of the Senders and Channels made
   * with it: a message kept a while before its use (a service call waiting
   * for its turn) then holds only its bytes, which is what was counted; a
   * decoded payload can take tens of times more (many small objects). The
   * next `unpack()` decodes it again and makes new references, which
   * `references` then lists, so cleanup reaches the ones really used. Only
   * for a message whose references nobody has used yet. The message owns
   * its payload from then on (see `ownPayload`).
   */
  forget(): void {
    this.decoded = undefined;
    this.ownPayload();
  }

  /** The Senders and Channels `unpack()` made from the payload (none before it ran). */
  get references(): readonly unknown[] {
    return this.decoded?.references ?? [];
  }

  /** Header and payload length for logs; never the payload itself. */
  toString(): string {
    return `Message(dst=${this.dst} src=${this.src} auth=${this.auth} handle=${this.handle} replyTo=${this.replyTo} flags=${this.flags} len=${this.data.length})`;
  }
}

/** Writes the header of `msg` into `target` at `offset`. */
export function writeHeader(msg: MessageHeader, length: number, target: Uint8Array, offset: number): void {
  const view = new DataView(target.buffer, target.byteOffset + offset, HEADER_SIZE);
  view.setUint16(0, MAGIC);
  view.setUint8(2, PROTOCOL_VERSION);
  view.setUint8(3, msg.flags);
  view.setUint32(4, msg.dst);
  view.setUint32(8, msg.src);
  view.setUint32(12, msg.auth);
  view.setUint32(16, msg.handle);
  view.setUint32(20, msg.replyTo);
  view.setUint32(24, length);
}

/** A parsed header and the payload length it announces. */
export interface FrameHeader extends MessageHeader {
  /** Payload length, in bytes. */
  length: number;
}

/**
 * Parses a header. Returns a string describing the problem instead of a
 * header when the bytes are not a valid tendril header.
 */
export function readHeader(source: Uint8Array, offset: number): FrameHeader | string {
  const view = new DataView(source.buffer, source.byteOffset + offset, HEADER_SIZE);
  const magic = view.getUint16(0);
  if (magic !== MAGIC) return `bad magic 0x${magic.toString(16).padStart(4, '0')} (expected 0x${MAGIC.toString(16)})`;
  const version = view.getUint8(2);
  if (version !== PROTOCOL_VERSION) return `unsupported protocol version ${version} (expected ${PROTOCOL_VERSION})`;
  const flags = view.getUint8(3);
  if ((flags & ~KNOWN_FLAGS) !== 0) return `unknown flags 0x${flags.toString(16)}`;
  return {
    flags,
    dst: view.getUint32(4),
    src: view.getUint32(8),
    auth: view.getUint32(12),
    handle: view.getUint32(16),
    replyTo: view.getUint32(20),
    length: view.getUint32(24),
  };
}
