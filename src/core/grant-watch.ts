import { decode } from './codec.js';
import type { Message } from './message.js';
import { ALLOCATE_ID } from './protocol/handles.js';
import type { Stream } from './stream.js';

/** Most ALLOCATE_ID requests from children awaiting the master's reply that are remembered (the oldest is dropped). */
const MAX_PENDING = 1024;

/**
 * What a context learns of the blocks of IDs the master grants to the
 * contexts behind each of its children: the requests go up through it and
 * the replies come back down through it, so it sees which child's subtree
 * each block went to. With the blocks it handed out itself, that tells it
 * which IDs each child may announce (see `IdPool.mayClaim`): any other is
 * one the child cannot own (a future ID of the master's, or another
 * child's), and taking it would leave a route that breaks the start of the
 * context that does get it.
 */
export class GrantWatch {
  /** `src:replyTo` of each request on its way up, and the child it came through. */
  private readonly pending = new Map<string, number>();

  /** @param granted told of each block the master grants through a child: its range and the child. */
  constructor(private readonly granted: (start: number, end: number, childId: number) => void) {}

  /** Looks at a message this context forwards from `inStream` (undefined: its own) to `out`. */
  forwarded(message: Message, inStream: Stream | undefined, parent: Stream | undefined): void {
    if (inStream === undefined) return;
    if (inStream === parent) {
      if (message.src !== 0 || message.isDead || this.pending.size === 0) return;
      const key = `${message.dst}:${message.handle}`;
      const childId = this.pending.get(key);
      if (childId === undefined) return;
      this.pending.delete(key);
      const block = grantedBlock(message);
      if (block) this.granted(block[0], block[1], childId);
      return;
    }
    if (message.handle !== ALLOCATE_ID || message.dst !== 0 || message.replyTo === 0) return;
    if (this.pending.size >= MAX_PENDING) this.pending.delete(this.pending.keys().next().value as string);
    this.pending.set(`${message.src}:${message.replyTo}`, inStream.remoteId);
  }
}

/** The block an ALLOCATE_ID reply grants (`[0, [start, end)]`), if that is what it is. */
function grantedBlock(message: Message): [number, number] | undefined {
  try {
    const value = decode(message.data) as unknown;
    if (!Array.isArray(value) || value[0] !== 0 || !Array.isArray(value[1])) return undefined;
    const [start, end] = value[1] as unknown[];
    return Number.isSafeInteger(start) && Number.isSafeInteger(end) && (end as number) > (start as number)
      ? [start as number, end as number]
      : undefined;
  } catch {
    return undefined;
  }
}
