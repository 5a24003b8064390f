import { decode } from './codec.js';
import type { Message } from './message.js';
import { RateLimit } from './rate-limit.js';
import type { Stream } from './stream.js';

/**
 * Dead replies sent down one stream: a burst, then this many per second.
 * A child that floods a context with undeliverable requests earns no more
 * than this; the rest are dropped.
 */
const DEAD_REPLY_BURST = 1000;
const DEAD_REPLIES_PER_SECOND = 1000;

/** The reason carried by a dead reply. */
export function deadReason(message: Message): string {
  try {
    const reason = decode(message.data);
    return typeof reason === 'string' ? reason : 'message could not be delivered';
  } catch {
    return 'message could not be delivered';
  }
}

/** The dead replies each stream may still be sent. */
export class DeadReplyLimits {
  private readonly limits = new Map<Stream, RateLimit>();

  /**
   * @param flood reports dead replies dropped, at most once a second per
   *   stream: the text of a `flood` warning.
   */
  constructor(private readonly flood: (message: string) => void) {}

  /** True when one more dead reply may be sent down `stream`. */
  mayReply(stream: Stream, owner: string): boolean {
    let limit = this.limits.get(stream);
    if (!limit) {
      limit = new RateLimit(DEAD_REPLY_BURST, DEAD_REPLIES_PER_SECOND);
      this.limits.set(stream, limit);
    }
    if (limit.take()) return true;
    if (limit.shouldReport()) {
      this.flood(
        `${owner}: stream ${stream.name} sent more undeliverable messages than ${DEAD_REPLIES_PER_SECOND} a second; ${limit.dropped} dead replies to it were dropped so far`,
      );
    }
    return false;
  }

  /** Forgets a closed stream. */
  streamClosed(stream: Stream): void {
    this.limits.delete(stream);
  }
}
