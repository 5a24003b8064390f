import * as fs from 'node:fs';
import type { Readable, Writable } from 'node:stream';
import { EventEmitter } from 'eventemitter3';
import type { DisconnectKind } from './errors/delivery.js';
import { StreamError } from './errors.js';
import { encodeFrame, FrameDecoder } from './framing.js';
import { Heartbeat, type HeartbeatSettings, pong } from './heartbeat.js';
import type { Message } from './message.js';
import { HEARTBEAT } from './protocol/handles.js';

/**
 * Bytes queued for the peer past which a stream wants to drain: messages
 * a router forwards into it stop being read from their source, and calls
 * made here wait (see `Router.whenWritable`).
 */
export const STREAM_HIGH_WATER = 1024 * 1024;

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

/** Why a stream went away, in one word (see errors/delivery.ts). */
export type { DisconnectKind } from './errors/delivery.js';

/** Events a stream emits. */
export interface StreamEvents {
  /** The stream closed; `reason` says why, `kind` in one word. Emitted once. */
  close: [reason: string, kind: DisconnectKind];
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
  /**
   * Bytes that may wait to be written to the peer before the stream is
   * closed as not reading. Default: 256 MiB or twice `maxMessageSize`,
   * whichever is larger.
   */
  maxQueuedBytes?: number;
  /**
   * What keeps the event loop alive for this stream when `input` and
   * `output` cannot (an SSH channel: its connection's socket); follows
   * `ref()` and `unref()` with them.
   */
  socket?: Refable;
}

/**
 * Direct, non-event-loop access to a stream's descriptors, for a child that
 * must wait for a reply synchronously (a `require()` of a module it lacks).
 */
export interface BlockingIo {
  /** Reads into `buffer`: bytes read, 0 at end of stream, -1 when nothing is available yet. */
  read(buffer: Buffer): number;
  /** Writes from `data`: bytes written, or -1 when the descriptor cannot take any now. */
  write(data: Uint8Array): number;
}

/** Anything with Node's handle ref counting (sockets, pipes). */
export interface Refable {
  /** Keeps the event loop alive. */
  ref?: () => unknown;
  /** Stops keeping the event loop alive. */
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
  /**
   * For a peer that joined over a UNIX listener: the context whose
   * authority its messages carry (the master's). Such a peer speaks only
   * for itself (`remoteId`), and every message it sends acts as this
   * context, as a program of the same user could anyway. Undefined for a
   * child or parent stream.
   */
  authority: number | undefined;
  /** Called for each message received; set by the router. */
  onMessage: (message: Message, stream: Stream) => void = () => {};
  /** Traffic counters. */
  readonly stats: StreamStats = { bytesIn: 0, bytesOut: 0, messagesIn: 0, messagesOut: 0 };
  private readonly input: Readable;
  private readonly output: Writable;
  private readonly socket: Refable | undefined;
  private readonly decoder: FrameDecoder;
  private readonly maxQueuedBytes: number;
  private closeReason: string | undefined;
  private closeKind: DisconnectKind = 'stream ended';
  private heartbeat: Heartbeat | undefined;
  /** Messages that arrived during a blocking request, delivered once it is over. */
  private deferred: Message[] = [];
  private blocking = false;
  /** Frames sent this tick, written together once it ends (see `flush`). */
  private pending: Uint8Array[] = [];
  private readonly flush = (): void => this.writePending();
  /** Called once the queue for the peer has emptied (see `whenDrained`). */
  private readonly drainWaiters: (() => void)[] = [];
  /** Streams this one does not read until they drain (see `waitFor`). */
  private readonly waitingFor = new Set<Stream>();

  /** Starts reading `options.input` at once. */
  constructor(options: StreamOptions) {
    super();
    this.name = options.name;
    this.input = options.input;
    this.output = options.output;
    this.socket = options.socket;
    this.decoder = new FrameDecoder(options.maxMessageSize);
    this.maxQueuedBytes = options.maxQueuedBytes ?? Math.max(256 * 1024 * 1024, 2 * options.maxMessageSize);
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

  /** Why the stream closed, in one word; `'stream ended'` while it is open. */
  get kind(): DisconnectKind {
    return this.closeKind;
  }

  /**
   * Starts watching the peer (see heartbeat.ts): a ping after
   * `settings.interval` ms of silence, the stream closed with kind
   * `'heartbeat'` after `settings.timeout` ms of it. Pings from the peer
   * are answered whether or not this end watches.
   * @param ownId this context's ID.
   */
  startHeartbeat(settings: HeartbeatSettings, ownId: number): void {
    if (this.closeReason !== undefined || this.heartbeat) return;
    const { stats } = this;
    const host = {
      name: this.name,
      get bytesIn() {
        return stats.bytesIn;
      },
      send: (message: Message) => this.send(message),
      dead: (reason: string) => this.close(reason, 'heartbeat'),
    };
    this.heartbeat = new Heartbeat(host, settings, ownId, this.remoteId);
  }

  /** Bytes written but not yet taken by the peer (queued in this process). */
  get queuedBytes(): number {
    return this.output.writableLength + this.pendingBytes;
  }

  /** True when more than `STREAM_HIGH_WATER` bytes wait for the peer: writers should wait for `whenDrained`. */
  get needsDrain(): boolean {
    return this.queuedBytes > STREAM_HIGH_WATER;
  }

  /** Bytes of the frames sent this tick, not yet written. */
  private pendingBytes = 0;

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
   * When more than `maxQueuedBytes` wait for the peer, it is not reading:
   * the stream is closed with that reason (only this stream is affected).
   */
  send(message: Message): boolean {
    if (this.closeReason !== undefined) return false;
    const parts = encodeFrame(message);
    // Messages sent in one tick leave in one write: a burst of small
    // messages costs one system call, not one each.
    if (this.pending.length === 0) process.nextTick(this.flush);
    for (const part of parts) {
      this.pending.push(part);
      this.pendingBytes += part.length;
      this.stats.bytesOut += part.length;
    }
    this.stats.messagesOut++;
    const queued = this.queuedBytes;
    if (queued > this.maxQueuedBytes) {
      this.close(
        `${this.name} is not reading its input: ${queued} bytes were queued for it, over the limit of ${this.maxQueuedBytes}`,
      );
    }
    return true;
  }

  /**
   * Writes the frames sent this tick. While `output` holds nothing, they go
   * straight to its descriptor, in one system call: Node's stream machinery
   * costs more than the write itself for a small frame. What the
   * descriptor does not take (a full pipe: EAGAIN), and everything while
   * `output` holds bytes, goes through `output`, which keeps the order and
   * waits for the pipe.
   */
  private writePending(): void {
    const parts = this.pending;
    if (parts.length === 0) return;
    this.pending = [];
    this.pendingBytes = 0;
    if (this.closeReason !== undefined) return;
    let written = 0;
    // Read at each write, not kept: once Node has let go of the handle, the number may be another file's.
    const fd = this.output.writableLength === 0 ? descriptorOf(this.output) : undefined;
    if (fd !== undefined) {
      written = writeDirect(fd, parts);
    }
    let skip = written;
    for (const part of parts) {
      if (skip >= part.length) {
        skip -= part.length;
        continue;
      }
      this.output.write(skip > 0 ? part.subarray(skip) : part, this.written);
      skip = 0;
    }
  }

  /**
   * Sends `message` and waits for the reply synchronously, without the
   * event loop: the one way a synchronous `require()` can fetch a module.
   * Other messages that arrive meanwhile are kept and delivered, in order,
   * from the event loop afterwards; the stream does not read on its own
   * until they have been.
   * @param isReply picks the reply out of the incoming messages.
   * @param timeoutMs how long to wait, in ms.
   * @throws StreamError when the stream is closed, ends, or cannot take the
   *   request without reordering bytes already queued for writing.
   * @throws TimeoutError-like Error when no reply comes within `timeoutMs`.
   */
  blockingRequest(message: Message, io: BlockingIo, isReply: (m: Message) => boolean, timeoutMs: number): Message {
    if (this.closeReason !== undefined) throw new StreamError(`stream to ${this.name} is closed: ${this.closeReason}`);
    this.writePending();
    const output = this.output as Writable & { _handle?: { writeQueueSize?: number } };
    // Bytes queued in the socket would be overtaken by a direct write, tearing a frame.
    if (output.writableLength > 0 || (output._handle?.writeQueueSize ?? 0) > 0) {
      throw new StreamError(`stream to ${this.name} has unsent data queued, so a blocking request cannot be sent now`);
    }
    if (!this.blocking) {
      this.blocking = true;
      this.input.off('data', this.onData);
      this.input.pause();
      setImmediate(() => this.endBlocking());
    }
    let reply: Message | undefined;
    const collect = (incoming: Message) => {
      this.stats.messagesIn++;
      // The peer's pings wait: the request just sent, and its reply, are life for both ends.
      if (incoming.handle === HEARTBEAT) return;
      if (reply === undefined && isReply(incoming)) reply = incoming;
      else this.deferred.push(incoming);
    };
    const deadline = Date.now() + timeoutMs;
    for (const part of encodeFrame(message)) {
      let offset = 0;
      while (offset < part.length) {
        const n = io.write(part.subarray(offset));
        if (n < 0) {
          if (Date.now() > deadline)
            throw new StreamError(`stream to ${this.name} did not accept a request for ${timeoutMs} ms`);
          sleep(1);
        } else offset += n;
      }
      this.stats.bytesOut += part.length;
    }
    this.stats.messagesOut++;
    // What the socket had already read but not handed over comes first.
    for (let chunk = this.input.read() as Buffer | null; chunk !== null; chunk = this.input.read() as Buffer | null) {
      this.stats.bytesIn += chunk.length;
      this.decoder.push(chunk, collect);
    }
    while (reply === undefined) {
      const buffer = Buffer.allocUnsafe(64 * 1024);
      const n = io.read(buffer);
      if (n === 0) {
        this.close('end of stream');
        throw new StreamError(`stream to ${this.name} ended while waiting for a reply`);
      }
      if (n < 0) {
        if (Date.now() > deadline) throw new Error(`no reply from ${this.name} within ${timeoutMs} ms`);
        sleep(1);
        continue;
      }
      this.stats.bytesIn += n;
      this.decoder.push(buffer.subarray(0, n), collect);
    }
    return reply;
  }

  private endBlocking(): void {
    // Handlers may start further blocking requests; those add to the queue being drained.
    while (this.deferred.length > 0) this.onMessage(this.deferred.shift() as Message, this);
    this.blocking = false;
    if (this.closeReason !== undefined) return;
    this.input.on('data', this.onData);
    this.input.resume();
  }

  /**
   * Stops reading until `other` has drained its queue (or closed): the
   * messages read here were being forwarded into it faster than its peer
   * takes them. Reading resumes once every stream waited for has drained.
   */
  waitFor(other: Stream): void {
    if (this.closeReason !== undefined || this.waitingFor.has(other)) return;
    this.waitingFor.add(other);
    if (this.waitingFor.size === 1) this.input.pause();
    other.whenDrained(() => {
      this.waitingFor.delete(other);
      if (this.waitingFor.size === 0 && this.closeReason === undefined && !this.blocking) this.input.resume();
    });
  }

  /** Calls `callback` once, when the queue for the peer has emptied or the stream has closed. */
  whenDrained(callback: () => void): void {
    // Written now, so that what is left, if anything, is in `output`, which says when it drains.
    this.writePending();
    if (this.closeReason !== undefined || this.output.writableLength === 0) {
      callback();
      return;
    }
    // One listener however many wait: calls queue here by the hundred.
    if (this.drainWaiters.length === 0) {
      this.output.once('drain', this.drained);
      this.once('close', this.drained);
    }
    this.drainWaiters.push(callback);
  }

  /**
   * After each write through `output`: wakes `whenDrained` waiters once it
   * holds nothing. Its 'drain' event is not enough: a stream emits it only
   * after a write that found it over its high-water mark, and what a direct
   * write left over may be less than that.
   */
  private readonly written = (): void => {
    if (this.drainWaiters.length > 0 && this.output.writableLength === 0) this.drained();
  };

  private readonly drained = (): void => {
    this.output.off('drain', this.drained);
    this.off('close', this.drained);
    for (const callback of this.drainWaiters.splice(0)) callback();
  };

  /** Handles bytes that were read from `input` before the stream took it over. */
  receive(chunk: Buffer): void {
    this.onData(chunk);
  }

  /** Keeps the event loop alive while the stream is open (the default for readable pipes). */
  ref(): void {
    (this.input as Refable).ref?.();
    (this.output as Refable).ref?.();
    this.socket?.ref?.();
  }

  /** Lets the process exit even though the stream is open. */
  unref(): void {
    (this.input as Refable).unref?.();
    (this.output as Refable).unref?.();
    this.socket?.unref?.();
  }

  /** Closes both directions and emits `close` once with `reason` and `kind` (default `'stream ended'`). */
  close(reason: string, kind: DisconnectKind = 'stream ended'): void {
    if (this.closeReason !== undefined) return;
    // Frames sent this tick still leave, as they did before the close: what the descriptor does not take, end() flushes.
    this.writePending();
    this.closeReason = reason;
    this.closeKind = kind;
    this.heartbeat?.stop();
    this.input.off('data', this.onData);
    // Errors after close are expected (EPIPE and the like) and carry no news.
    this.input.on('error', () => {});
    this.output.on('error', () => {});
    this.output.end();
    this.input.destroy();
    this.emit('close', reason, kind);
  }

  /** A ping is answered; a pong was life already (its bytes were counted). Never routed. */
  private heartbeatFrame(message: Message): void {
    if (message.replyTo !== HEARTBEAT) return;
    this.send(pong(message));
  }

  private readonly onData = (chunk: Buffer): void => {
    this.stats.bytesIn += chunk.length;
    try {
      this.decoder.push(chunk, (message) => {
        this.stats.messagesIn++;
        if (message.handle === HEARTBEAT) this.heartbeatFrame(message);
        else this.onMessage(message, this);
      });
    } catch (error) {
      if (error instanceof StreamError) this.close(error.message);
      else throw error;
    }
  };
}

/** The descriptor of a pipe or socket stream, when Node exposes it; undefined for anything else (an SSH channel). */
function descriptorOf(output: Writable): number | undefined {
  const fd = (output as Writable & { _handle?: { fd?: unknown } })._handle?.fd;
  return typeof fd === 'number' && fd >= 0 ? fd : undefined;
}

/**
 * Writes `parts` to `fd`, which is non-blocking (libuv made it so): the
 * bytes it took, 0 when it takes none now or fails (the stream's own write
 * then meets the error and closes the stream).
 */
function writeDirect(fd: number, parts: Uint8Array[]): number {
  try {
    if (parts.length === 1) return fs.writeSync(fd, parts[0] as Uint8Array);
    // Node before 12.9 has no writevSync.
    return typeof fs.writevSync === 'function' ? fs.writevSync(fd, parts) : fs.writeSync(fd, Buffer.concat(parts));
  } catch {
    return 0;
  }
}

const sleeper = new Int32Array(new SharedArrayBuffer(4));
/** Blocks the thread for `ms` milliseconds. */
function sleep(ms: number): void {
  Atomics.wait(sleeper, 0, 0, ms);
}
