import { encode } from './codec.js';
import { HeldBytesError } from './errors.js';
import { type Holding, ITEM_OVERHEAD } from './holdings.js';
import { FLAG_DEAD, Message } from './message.js';
import type { MessageSwitch } from './switch.js';
import { fits, type HighWaterMark } from './window.js';

/** One Sender feeding the receiver: the credit handle its messages name. */
interface Source {
  creditHandle: number;
  /** Received and not yet credited. */
  messages: number;
  bytes: number;
  /** Read by the receiver's owner, credit not yet sent. */
  owedMessages: number;
  owedBytes: number;
  /**
   * It ran past the window or its account: it was told so (a dead reply,
   * which fails it), its count left the context's, and what else it had on
   * the way is dropped without a word.
   */
  refused: boolean;
}

/** One context sending to the receiver: one window for all its Senders together. */
interface Peer {
  src: number;
  /** Received from all its Senders and not yet credited: what the window bounds. */
  messages: number;
  bytes: number;
  owedMessages: number;
  owedBytes: number;
  sources: Map<number, Source>;
}

/** Why a message was refused: the reason its dead reply carries. */
export interface WindowRefusal {
  /** What the dead reply says: the bound passed (the window, the Senders per context, or `maxHeldBytes`) and by whom. */
  reason: string;
  /** True when its Sender is refused for good (it was told, and its later messages are dropped). */
  senderRefused: boolean;
}

/**
 * Senders of one context a receiver keeps accounts for. A hostile context
 * could name a new credit handle in every message; past this many, new
 * ones are refused (and each is charged to the context's account).
 */
const MAX_SOURCES_PER_CONTEXT = 4096;

/**
 * The receiving half of the credit windows of the Senders feeding one
 * receiver. Each sending context gets one window, however many Senders
 * (credit handles) it uses: a message is admitted only if its context
 * keeps to it (`fits`, the rule its Senders apply together, see
 * send-window.ts). Credit is returned to each Sender for its own messages
 * as the receiver's owner reads them: at once when half a window is owed
 * to a context, otherwise batched once per turn of the event loop.
 *
 * What waits unread from another context, and the record of each of its
 * Senders, is charged to that context's account (`MessageSwitch.holding`), so
 * that the contexts behind one child together hold at most its
 * `maxHeldBytes` here, whatever IDs and Senders they use. The charge for a
 * value is given back when it is read, or when the receiver is closed.
 */
export class ReceiveWindow {
  private readonly peers = new Map<number, Peer>();
  /** What each other context's values and Senders are charged, while anything is. */
  private readonly held = new Map<number, Holding>();
  private flushScheduled = false;

  /**
   * @param router the receiver's router.
   * @param handle the receiver's handle (the src of credit messages is this context).
   * @param window the receiver's high-water mark.
   */
  constructor(
    private readonly router: MessageSwitch,
    private readonly handle: number,
    private readonly window: Readonly<HighWaterMark>,
  ) {}

  /**
   * Counts a message that arrived (and charges it), or refuses it: returns
   * why when its context has run past its window or its account, or it is
   * one Sender too many. Refusals past the window and the Sender limit are
   * reported as `flood` warnings here; the account reports its own, as
   * `quota`.
   */
  admit(message: Message): WindowRefusal | undefined {
    const { src } = message;
    let peer = this.peers.get(src);
    if (!peer) {
      peer = { src, messages: 0, bytes: 0, owedMessages: 0, owedBytes: 0, sources: new Map() };
      this.peers.set(src, peer);
    }
    let source = peer.sources.get(message.replyTo);
    if (!source) {
      if (peer.sources.size >= MAX_SOURCES_PER_CONTEXT) {
        return this.flood(
          peer,
          undefined,
          `context ${src} already has ${MAX_SOURCES_PER_CONTEXT} Senders feeding the receiver on handle ${this.handle} in context '${this.router.name}'`,
        );
      }
      const refused = this.charge(src, ITEM_OVERHEAD);
      if (refused) return this.forgetIfEmpty(peer, { reason: refused, senderRefused: false });
      source = { creditHandle: message.replyTo, messages: 0, bytes: 0, owedMessages: 0, owedBytes: 0, refused: false };
      peer.sources.set(message.replyTo, source);
    }
    if (source.refused) {
      return {
        reason: `a Sender in context ${src} was refused by the receiver on handle ${this.handle} in context '${this.router.name}' already`,
        senderRefused: false,
      };
    }
    const size = message.data.length;
    if (!fits(this.window, peer.messages, peer.bytes, size)) {
      return this.flood(
        peer,
        source,
        `context ${src} ran past the window of the receiver on handle ${this.handle} in context '${this.router.name}' (${this.window.messages} messages, ${this.window.bytes} bytes, for all its Senders together)`,
      );
    }
    const refused = this.charge(src, size + ITEM_OVERHEAD);
    if (refused) return { reason: refused, senderRefused: this.refuse(peer, source) };
    peer.messages++;
    peer.bytes += size;
    source.messages++;
    source.bytes += size;
    return undefined;
  }

  /** Records that the owner read (or was handed) `message`: gives back its charge, and returns credit for it in time. */
  consumed(message: Message): void {
    const size = message.data.length;
    this.release(message.src, size + ITEM_OVERHEAD);
    const peer = this.peers.get(message.src);
    const source = peer?.sources.get(message.replyTo);
    // A Sender that closed or was refused is owed nothing; nor is one whose
    // credit handle now names a newer Sender, past what that one sent.
    if (!peer || !source || source.refused || source.owedMessages >= source.messages) return;
    source.owedMessages++;
    source.owedBytes += size;
    peer.owedMessages++;
    peer.owedBytes += size;
    if (peer.owedMessages * 2 >= this.window.messages || peer.owedBytes * 2 >= this.window.bytes) {
      this.creditPeer(peer);
    } else if (!this.flushScheduled) {
      this.flushScheduled = true;
      setImmediate(() => this.flush());
    }
  }

  /**
   * Forgets a Sender that closed (`message` is its close). What it had in
   * flight leaves its context's window: the Sender's side did the same as
   * it closed, and its later messages, and those its context's other
   * Senders send after the close, arrive after this. Its values still
   * queued stay charged until read.
   * @returns false when that Sender had been refused: it was counted as
   *   gone then.
   */
  closed(message: Message): boolean {
    const peer = this.peers.get(message.src);
    const source = peer?.sources.get(message.replyTo);
    if (!peer || !source) return true;
    peer.sources.delete(message.replyTo);
    this.leave(peer, source);
    this.release(message.src, ITEM_OVERHEAD);
    this.forgetIfEmpty(peer, undefined);
    return !source.refused;
  }

  /**
   * Tells every Sender still feeding the receiver that it has closed (a
   * dead message on its credit handle) and forgets them: a Sender waiting
   * for credit, with nothing in flight that would earn a dead reply, would
   * otherwise wait forever. With `dropQueued` (the receiver drops its
   * queue) it gives back everything charged; without, the values still
   * queued stay charged until read.
   */
  closeAll(reason: string, dropQueued: boolean): void {
    for (const peer of this.peers.values()) {
      for (const source of peer.sources.values()) if (!source.refused) this.tell(peer.src, source, FLAG_DEAD, reason);
    }
    if (!dropQueued) {
      this.forgetAll();
      return;
    }
    this.peers.clear();
    this.releaseAll();
  }

  /**
   * Forgets every Sender: the receiver ended, nothing more can arrive. Its
   * values still queued stay charged until read.
   */
  forgetAll(): void {
    for (const src of [...this.peers.keys()]) this.forgetContext(src);
  }

  /** Gives back everything charged (the values are gone: the receiver was closed, or collected unread). */
  releaseAll(): void {
    for (const holding of this.held.values()) holding.close();
    this.held.clear();
  }

  /**
   * Forgets every Sender of `contextId`, which went away; true when it had
   * one. Its values still queued stay charged until read: a child can
   * announce and withdraw IDs at will, and must not pile up values by doing so.
   */
  forgetContext(contextId: number): boolean {
    const peer = this.peers.get(contextId);
    if (!peer) return false;
    this.peers.delete(contextId);
    this.release(contextId, peer.sources.size * ITEM_OVERHEAD);
    return true;
  }

  /** True when a Sender in another context than this one has sent here and not closed. */
  hasRemoteSources(): boolean {
    for (const src of this.peers.keys()) if (src !== this.router.id) return true;
    return false;
  }

  /** Sends the credit owed to every Sender. */
  flush(): void {
    this.flushScheduled = false;
    for (const peer of this.peers.values()) if (peer.owedMessages > 0) this.creditPeer(peer);
  }

  private creditPeer(peer: Peer): void {
    for (const source of peer.sources.values()) {
      if (source.owedMessages === 0) continue;
      const credit = [source.owedMessages, source.owedBytes];
      source.messages -= source.owedMessages;
      source.bytes -= source.owedBytes;
      source.owedMessages = 0;
      source.owedBytes = 0;
      this.tell(peer.src, source, 0, credit);
    }
    peer.messages -= peer.owedMessages;
    peer.bytes -= peer.owedBytes;
    peer.owedMessages = 0;
    peer.owedBytes = 0;
  }

  /**
   * A Sender ran past the window or its account: it is failed by the dead
   * reply, whose sending side then drops its count from its context's, so
   * this side does the same now (before any later message of that context
   * arrives). A Sender that names no credit handle cannot be told, and is
   * only refused message by message.
   * @returns true when the Sender is refused for good.
   */
  private refuse(peer: Peer, source: Source): boolean {
    if (source.creditHandle === 0) return false;
    this.leave(peer, source);
    source.refused = true;
    return true;
  }

  /** Takes a Sender's count out of its context's. */
  private leave(peer: Peer, source: Source): void {
    peer.messages -= source.messages;
    peer.bytes -= source.bytes;
    peer.owedMessages -= source.owedMessages;
    peer.owedBytes -= source.owedBytes;
    source.messages = source.bytes = source.owedMessages = source.owedBytes = 0;
  }

  /** Refuses a message past a bound of this receiver's (and its Sender, if given), with a `flood` warning. */
  private flood(peer: Peer, source: Source | undefined, reason: string): WindowRefusal {
    const senderRefused = source !== undefined && this.refuse(peer, source);
    this.router.warn('flood', `${this.router.name}: ${reason}; dropped its message`);
    return this.forgetIfEmpty(peer, { reason, senderRefused });
  }

  private forgetIfEmpty<T>(peer: Peer, result: T): T {
    if (peer.sources.size === 0) this.peers.delete(peer.src);
    return result;
  }

  /** Charges `bytes` to `src`'s account; the refusal's message past its limit. This context's own values are not charged. */
  private charge(src: number, bytes: number): string | undefined {
    if (src === this.router.id) return undefined;
    let holding = this.held.get(src);
    if (!holding) {
      holding = this.router.holding(src, `values queued for receiver on handle ${this.handle}`);
      this.held.set(src, holding);
    }
    try {
      holding.add(bytes);
      return undefined;
    } catch (error) {
      if (!(error instanceof HeldBytesError)) throw error;
      if (holding.bytes === 0) this.held.delete(src);
      return error.message;
    }
  }

  private release(src: number, bytes: number): void {
    const holding = this.held.get(src);
    if (!holding) return;
    holding.remove(bytes);
    if (holding.bytes === 0) this.held.delete(src);
  }

  /** Sends `value` to a Sender's credit handle: credit, or (flagged dead) why it may send no more. */
  private tell(src: number, source: Source, flags: number, value: unknown): void {
    // A sender that names no credit handle (a raw message) is only counted.
    if (source.creditHandle === 0) return;
    this.router.send(
      new Message(
        { dst: src, src: this.router.id, auth: this.router.id, handle: source.creditHandle, replyTo: 0, flags },
        encode(value),
      ),
    );
  }
}
