import { ALLOCATE_ID } from '../core/handles.js';
import { type ChildIds, ID_BLOCK_SIZE, type IdBlock, type IdSource } from '../core/ids.js';
import { MAX_ID } from '../core/message.js';
import type { Router } from '../core/router.js';

/** Largest block one ALLOCATE_ID request may obtain. */
const MAX_REQUEST = 10 * ID_BLOCK_SIZE;

interface Grant {
  start: number;
  end: number;
  /** Context the block was given to. */
  owner: number;
}

/**
 * The master's numbering of contexts. IDs are never reused. Every block
 * handed out is remembered with its owner, so the master can check that a
 * route announced through a stream is for an ID that stream's subtree was
 * actually given (a child cannot hijack a sibling's ID).
 */
export class IdAllocator implements IdSource {
  private next = 1;
  private readonly grants: Grant[] = [];

  /** @param router the master's router; ALLOCATE_ID is served on it. */
  constructor(router: Router) {
    router.addHandler(
      (message) => {
        const requested = message.unpack();
        const count =
          typeof requested === 'number' && requested >= 1 ? Math.min(requested, MAX_REQUEST) : ID_BLOCK_SIZE;
        router.reply(message, this.grant(count, message.src));
      },
      // Any descendant may ask; the block is recorded against the asker.
      { handle: ALLOCATE_ID, policy: (_message, stream) => stream !== undefined },
    );
  }

  /** A new ID for a child of the master, and a fresh block for it. */
  async allocateChild(): Promise<ChildIds> {
    const id = this.take(1)[0];
    return { id, block: this.grant(ID_BLOCK_SIZE, id) };
  }

  /**
   * The context an ID was ultimately handed out by the master to: the
   * direct recipient of the block it lies in, or the ID itself for a child
   * of the master. Undefined for IDs never handed out.
   */
  ownerOf(id: number): number | undefined {
    if (id <= 0 || id >= this.next) return undefined;
    let lo = 0;
    let hi = this.grants.length - 1;
    while (lo <= hi) {
      const mid = (lo + hi) >> 1;
      const grant = this.grants[mid] as Grant;
      if (id < grant.start) hi = mid - 1;
      else if (id >= grant.end) lo = mid + 1;
      else return grant.owner;
    }
    return id;
  }

  private grant(count: number, owner: number): IdBlock {
    const block = this.take(count);
    this.grants.push({ start: block[0], end: block[1], owner });
    return block;
  }

  private take(count: number): IdBlock {
    if (this.next + count > MAX_ID) throw new Error('context ID space exhausted');
    const start = this.next;
    this.next += count;
    return [start, this.next];
  }
}
