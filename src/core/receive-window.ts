import { encode } from './codec.js';
import { FLAG_DEAD, Message } from './message.js';
import type { Router } from './router.js';
import { fits, type HighWaterMark } from './window.js';

/** One sender feeding a receiver: a context and the credit handle its messages name. */
interface Source {
  src: number;
  creditHandle: number;
  /** Received and not yet credited. */
  messages: number;
  bytes: number;
  /** Read by the receiver's owner, credit not yet sent. */
  owedMessages: number;
  owedBytes: number;
}

/**
 * Senders one receiver keeps accounts for. A hostile context could name a
 * new credit handle in every message; past this many sources, new ones are
 * refused.
 */
const MAX_SOURCES = 4096;

/**
 * The receiving half of the credit windows of the Senders feeding one
 * receiver: admits a message only if its sender keeps to the window
 * (`fits`, the rule the sender applies), and returns credit as the
 * receiver's owner reads messages: at once when half a window is owed to a
 * sender, otherwise batched once per turn of the event loop.
 */
export class ReceiveWindow {
  private readonly sources = new Map<string, Source>();
  private flushScheduled = false;

  /**
   * @param router the receiver's router.
   * @param handle the receiver's handle (the src of credit messages is this context).
   * @param window the receiver's high-water mark.
   */
  constructor(
    private readonly router: Router,
    private readonly handle: number,
    private readonly window: Readonly<HighWaterMark>,
  ) {}

  /**
   * Counts a message that arrived, or refuses it: returns a reason when its
   * sender has run past its window (or is one source too many).
   */
  admit(message: Message): string | undefined {
    const key = `${message.src}/${message.replyTo}`;
    let source = this.sources.get(key);
    if (!source) {
      if (this.sources.size >= MAX_SOURCES) {
        return `receiver on handle ${this.handle} in context '${this.router.name}' already has ${MAX_SOURCES} senders`;
      }
      source = {
        src: message.src,
        creditHandle: message.replyTo,
        messages: 0,
        bytes: 0,
        owedMessages: 0,
        owedBytes: 0,
      };
      this.sources.set(key, source);
    }
    const size = message.data.length;
    if (!fits(this.window, source.messages, source.bytes, size)) {
      return `a sender in context ${message.src} ran past the window of the receiver on handle ${this.handle} in context '${this.router.name}' (${this.window.messages} messages, ${this.window.bytes} bytes)`;
    }
    source.messages++;
    source.bytes += size;
    return undefined;
  }

  /** Records that the owner read `message`, and returns credit for it in time. */
  consumed(message: Message): void {
    const source = this.sources.get(`${message.src}/${message.replyTo}`);
    if (!source) return;
    source.owedMessages++;
    source.owedBytes += message.data.length;
    if (source.owedMessages * 2 >= this.window.messages || source.owedBytes * 2 >= this.window.bytes) {
      this.credit(source);
    } else if (!this.flushScheduled) {
      this.flushScheduled = true;
      setImmediate(() => this.flush());
    }
  }

  /** Forgets a sender that closed. */
  closed(message: Message): void {
    this.sources.delete(`${message.src}/${message.replyTo}`);
  }

  /**
   * Tells every sender still feeding the receiver that it has closed (a
   * dead message on its credit handle), and forgets them: a sender waiting
   * for credit, with nothing in flight that would earn a dead reply, would
   * otherwise wait forever.
   */
  closeAll(reason: string): void {
    for (const source of this.sources.values()) this.tell(source, FLAG_DEAD, reason);
    this.sources.clear();
  }

  /** Forgets every sender in `contextId`; true when there was one. */
  forgetContext(contextId: number): boolean {
    let found = false;
    for (const [key, source] of this.sources) {
      if (source.src !== contextId) continue;
      this.sources.delete(key);
      found = true;
    }
    return found;
  }

  /** True when a sender in another context than this one has sent here and not closed. */
  hasRemoteSources(): boolean {
    for (const source of this.sources.values()) if (source.src !== this.router.id) return true;
    return false;
  }

  /** Sends the credit owed to every sender. */
  flush(): void {
    this.flushScheduled = false;
    for (const source of this.sources.values()) if (source.owedMessages > 0) this.credit(source);
  }

  private credit(source: Source): void {
    source.messages -= source.owedMessages;
    source.bytes -= source.owedBytes;
    const credit = [source.owedMessages, source.owedBytes];
    source.owedMessages = 0;
    source.owedBytes = 0;
    this.tell(source, 0, credit);
  }

  /** Sends `value` to a sender's credit handle: credit, or (flagged dead) why it may send no more. */
  private tell(source: Source, flags: number, value: unknown): void {
    // A sender that names no credit handle (a raw message) is only counted.
    if (source.creditHandle === 0) return;
    this.router.send(
      new Message(
        { dst: source.src, src: this.router.id, auth: this.router.id, handle: source.creditHandle, replyTo: 0, flags },
        encode(value),
      ),
    );
  }
}
