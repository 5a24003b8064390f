import { decode } from './codec.js';
import type { Message } from './message.js';
import { RateLimit } from './rate-limit.js';
import { type Lineage, lineageOf, shareAt } from './shares.js';
import type { Stream } from './stream.js';
import { MAX_REMOTE_WORD, shownRemoteText } from './terminal-text.js';

/**
 * Dead replies sent down one stream: a burst, then this many per second.
 * A child that floods a context with undeliverable requests earns no more
 * than this; the rest are dropped. Within a child's subtree each context
 * earns a share of its parent's (shares.ts, at least `MIN_DEAD_REPLIES`), so
 * a flooding grandchild leaves its parent and siblings dead replies of
 * their own (a request whose dead reply is dropped waits for its timeout).
 */
const DEAD_REPLY_BURST = 1000;
const DEAD_REPLIES_PER_SECOND = 1000;
const MIN_DEAD_REPLIES = 10;
/** Most contexts below a child whose rates are remembered (the least recently limited are forgotten). */
const MAX_MEMBER_LIMITS = 4096;

/** The reason carried by a dead reply. */
export function deadReason(message: Message): string {
  try {
    const reason = decode(message.data);
    // Another context's words: kept short, and made inert for a terminal.
    return typeof reason === 'string' ? shownRemoteText(reason, MAX_REMOTE_WORD) : 'message could not be delivered';
  } catch {
    return 'message could not be delivered';
  }
}

/** The dead replies each stream, and each context behind a child stream, may still be sent. */
export class DeadReplyLimits {
  private readonly limits = new Map<Stream, RateLimit>();
  /** The rates of contexts below a child, by ID, least recently used first. */
  private readonly members = new Map<number, RateLimit>();

  /**
   * @param tree who started each descendant.
   * @param flood reports dead replies dropped, at most once a second per
   *   stream or context: the text of a `flood` warning.
   * @param nameOf a context's name, for that warning.
   */
  constructor(
    private readonly tree: Lineage,
    private readonly flood: (message: string) => void,
    private readonly nameOf: (contextId: number) => string,
  ) {}

  /**
   * True when one more dead reply may be sent down `stream`, to `dst`:
   * within the stream's rate and, for a context below a child, within its
   * own share and that of each ancestor up to the child.
   */
  mayReply(stream: Stream, dst: number, owner: string): boolean {
    let limit = this.limits.get(stream);
    if (!limit) {
      limit = new RateLimit(DEAD_REPLY_BURST, DEAD_REPLIES_PER_SECOND);
      this.limits.set(stream, limit);
    }
    const chain = stream.remoteId === dst ? undefined : lineageOf(this.tree, dst);
    const levels: [RateLimit, string][] = [];
    if (chain && chain[chain.length - 1] === stream.remoteId) {
      for (let i = 0; i < chain.length - 1; i++) {
        const contextId = chain[i] as number;
        levels.push([
          this.member(contextId, chain.length - 1 - i),
          `context ${this.nameOf(contextId)} (id ${contextId})`,
        ]);
      }
    } else if (chain === undefined && stream.remoteId !== dst && this.tree.parentOf(dst) !== undefined) {
      // A descendant whose chain is lost (its ancestors went first): the least share.
      levels.push([this.member(dst, Number.POSITIVE_INFINITY), `context ${this.nameOf(dst)} (id ${dst})`]);
    }
    levels.push([limit, `stream ${stream.name}`]);
    const empty = levels.find(([rate]) => !rate.available());
    if (empty === undefined) {
      for (const [rate] of levels) rate.take();
      return true;
    }
    const [rate, who] = empty;
    rate.take();
    if (rate.shouldReport()) {
      this.flood(
        `${owner}: ${who} sent more undeliverable messages than ${rate.perSecond} a second; ${rate.dropped} dead replies to it were dropped so far`,
      );
    }
    return false;
  }

  /** The rate of a context `level` below a child, made (or moved to the most recent) now. */
  private member(contextId: number, level: number): RateLimit {
    let rate = this.members.get(contextId);
    if (rate) this.members.delete(contextId);
    else {
      rate = new RateLimit(
        shareAt(DEAD_REPLY_BURST, level, MIN_DEAD_REPLIES),
        shareAt(DEAD_REPLIES_PER_SECOND, level, MIN_DEAD_REPLIES),
      );
      if (this.members.size >= MAX_MEMBER_LIMITS) this.members.delete(this.members.keys().next().value as number);
    }
    this.members.set(contextId, rate);
    return rate;
  }

  /** Forgets a closed stream. */
  streamClosed(stream: Stream): void {
    this.limits.delete(stream);
  }
}
