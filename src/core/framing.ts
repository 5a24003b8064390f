import { StreamError } from './errors.js';
import { type FrameHeader, HEADER_SIZE, Message, readHeader, writeHeader } from './message.js';

/** Default limit on a message's payload: 128 MiB. */
export const DEFAULT_MAX_MESSAGE_SIZE = 128 * 1024 * 1024;

/**
 * Turns a byte stream into messages. Bytes may arrive in chunks of any size,
 * one byte at a time included. A header is validated (magic, version,
 * flags, announced length) before any payload buffer is allocated, so a
 * hostile or corrupt peer cannot make this side allocate more than
 * `maxMessageSize` bytes.
 */
export class FrameDecoder {
  private readonly chunks: Uint8Array[] = [];
  /** Read offset into `chunks[0]`. */
  private offset = 0;
  private buffered = 0;
  private header: FrameHeader | undefined;

  /** Largest payload accepted, in bytes. */
  maxMessageSize: number;

  /** @param maxMessageSize largest payload accepted, in bytes. */
  constructor(maxMessageSize: number) {
    this.maxMessageSize = maxMessageSize;
  }

  /** Bytes received but not yet part of a complete message. */
  get pendingBytes(): number {
    return this.buffered;
  }

  /**
   * Feeds received bytes and calls `onMessage` for every complete message.
   * @throws StreamError on a malformed header or an oversized length; the
   *   stream must then be closed, as its framing can no longer be trusted.
   */
  push(chunk: Uint8Array, onMessage: (message: Message) => void): void {
    if (chunk.length === 0) return;
    this.chunks.push(chunk);
    this.buffered += chunk.length;
    for (;;) {
      if (!this.header) {
        if (this.buffered < HEADER_SIZE) return;
        const bytes = this.take(HEADER_SIZE);
        const header = readHeader(bytes, 0);
        if (typeof header === 'string') throw new StreamError(`malformed frame: ${header}`);
        if (header.length > this.maxMessageSize) {
          throw new StreamError(
            `frame announces a ${header.length}-byte payload, over maxMessageSize (${this.maxMessageSize} bytes)`,
          );
        }
        this.header = header;
      }
      if (this.buffered < this.header.length) return;
      const header = this.header;
      this.header = undefined;
      onMessage(new Message(header, this.take(header.length)));
    }
  }

  /** Removes and returns the next `n` buffered bytes, copying only when they span chunks. */
  private take(n: number): Uint8Array {
    this.buffered -= n;
    if (n === 0) return new Uint8Array(0);
    const first = this.chunks[0] as Uint8Array;
    const available = first.length - this.offset;
    if (available >= n) {
      const out = first.subarray(this.offset, this.offset + n);
      this.offset += n;
      if (this.offset === first.length) {
        this.chunks.shift();
        this.offset = 0;
      }
      return out;
    }
    const out = Buffer.allocUnsafe(n);
    let filled = 0;
    while (filled < n) {
      const chunk = this.chunks[0] as Uint8Array;
      const count = Math.min(chunk.length - this.offset, n - filled);
      out.set(chunk.subarray(this.offset, this.offset + count), filled);
      filled += count;
      this.offset += count;
      if (this.offset === chunk.length) {
        this.chunks.shift();
        this.offset = 0;
      }
    }
    return out;
  }
}

/**
 * Serialises a message into the bytes written to a stream: header then
 * payload. Small payloads are copied next to the header so one write
 * carries the frame; large ones are returned as two buffers to avoid a copy.
 */
export function encodeFrame(message: Message): Uint8Array[] {
  const length = message.data.length;
  if (length <= 16 * 1024) {
    const frame = Buffer.allocUnsafe(HEADER_SIZE + length);
    writeHeader(message, length, frame, 0);
    frame.set(message.data, HEADER_SIZE);
    return [frame];
  }
  const header = Buffer.allocUnsafe(HEADER_SIZE);
  writeHeader(message, length, header, 0);
  return [header, message.data];
}
