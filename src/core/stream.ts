import type { Readable, Writable } from 'node:stream';
import { EventEmitter } from 'eventemitter3';
import { StreamError } from './errors.js';
import { encodeFrame, FrameDecoder } from './framing.js';
import type { Message } from './message.js';

/** Counters of one stream, for `stats()` APIs and tests. */
export interface StreamStats {
  /** Bytes read from the peer, frames and anything else. */
  bytesIn: number;
  /** Bytes written to the peer. */
  bytesOut: number;
  /** Complete messages received. */
  messagesIn: number;
  /** Messages written. */
  messagesOut: number;
}

/** Events a stream emits. */
export interface StreamEvents {
  /** The stream closed; `reason` says why. Emitted once. */
  close: [reason: string];
}

/** Options of a stream. */
export interface StreamOptions {
  /** Name used in logs, usually the peer context's name. */
  name: string;
  /** Bytes from the peer. */
  input: Readable;
  /** Bytes to the peer. */
  output: Writable;
  /** Largest payload accepted or sent, in bytes. */
  maxMessageSize: number;
}

/** Anything with Node's handle ref counting (sockets, pipes). */
interface Refable {
  ref?: () => unknown;
  unref?: () => unknown;
}

/**
 * The framed message channel between two adjacent contexts. It owns no
 * process; it reads frames from `input`, hands each message to
 * `onMessage`, and writes frames to `output`. A framing error, end of
 * input, or a write error closes it with a logged reason.
 */
export class Stream extends EventEmitter<StreamEvents> {
  /** Name used in logs, usually the peer context's name. */
  readonly name: string;
  /** Context ID of the peer at the other end, once known. */
  remoteId = -1;
  /** Called for each message received; set by the router. */
  onMessage: (message: Message, stream: Stream) => void = () => {};
  /** Traffic counters. */
  readonly stats: StreamStats = { bytesIn: 0, bytesOut: 0, messagesIn: 0, messagesOut: 0 };
  private readonly input: Readable;
  private readonly output: Writable;
  private readonly decoder: FrameDecoder;
  private closeReason: string | undefined;

  /** Starts reading `options.input` at once. */
  constructor(options: StreamOptions) {
    super();
    this.name = options.name;
    this.input = options.input;
    this.output = options.output;
    this.decoder = new FrameDecoder(options.maxMessageSize);
    this.input.on('data', this.onData);
    this.input.on('end', () => this.close('end of stream'));
    this.input.on('close', () => this.close('stream closed'));
    this.input.on('error', (error: Error) => this.close(`read error: ${error.message}`));
    this.output.on('error', (error: Error) => this.close(`write error: ${error.message}`));
    this.output.on('close', () => this.close('output closed'));
  }

  /** True once the stream has closed; sends are then dropped. */
  get closed(): boolean {
    return this.closeReason !== undefined;
  }

  /** Why the stream closed, or undefined while it is open. */
  get reason(): string | undefined {
    return this.closeReason;
  }

  /** Largest payload accepted, in bytes. */
  get maxMessageSize(): number {
    return this.decoder.maxMessageSize;
  }

  /** Changes the largest payload accepted, in bytes (a child learns it from BOOT). */
  setMaxMessageSize(bytes: number): void {
    this.decoder.maxMessageSize = bytes;
  }

  /**
   * Writes a message. Returns false, writing nothing, when the stream has
   * closed. Size limits are enforced by the router before this is called.
   */
  send(message: Message): boolean {
    if (this.closeReason !== undefined) return false;
    const parts = encodeFrame(message);
    for (const part of parts) {
      this.output.write(part);
      this.stats.bytesOut += part.length;
    }
    this.stats.messagesOut++;
    return true;
  }

  /** Keeps the event loop alive while the stream is open (the default for readable pipes). */
  ref(): void {
    (this.input as Refable).ref?.();
    (this.output as Refable).ref?.();
  }

  /** Lets the process exit even though the stream is open. */
  unref(): void {
    (this.input as Refable).unref?.();
    (this.output as Refable).unref?.();
  }

  /** Closes both directions and emits `close` once with `reason`. */
  close(reason: string): void {
    if (this.closeReason !== undefined) return;
    this.closeReason = reason;
    this.input.off('data', this.onData);
    // Errors after close are expected (EPIPE and the like) and carry no news.
    this.input.on('error', () => {});
    this.output.on('error', () => {});
    this.output.end();
    this.input.destroy();
    this.emit('close', reason);
  }

  private readonly onData = (chunk: Buffer): void => {
    this.stats.bytesIn += chunk.length;
    try {
      this.decoder.push(chunk, (message) => {
        this.stats.messagesIn++;
        this.onMessage(message, this);
      });
    } catch (error) {
      if (error instanceof StreamError) this.close(error.message);
      else throw error;
    }
  };
}
