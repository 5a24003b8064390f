import { ALLOCATE_ID_SPEC, type IdBlock } from './protocol/allocate-id.js';
import { ask } from './protocol/serve.js';
import type { MessageSwitch } from './switch.js';

/** A half-open range of context IDs (defined with ALLOCATE_ID). */
export type { IdBlock } from './protocol/allocate-id.js';

/** IDs for a new child: its own ID and a block it numbers its own children from. */
export interface ChildIds {
  /** The child's own ID. */
  id: number;
  /** Block handed to the child, or null if none could be spared (it will ask the master). */
  block: IdBlock | null;
}

/** Anything that can number new children of this context. */
export interface IdSource {
  /**
   * IDs for the next child; may ask the master for more.
   * @param leaf the child starts no contexts of its own: it is given no block.
   */
  allocateChild(leaf?: boolean): Promise<ChildIds>;
}

/** Size of the block a context asks the master for when its own runs low. */
export const ID_BLOCK_SIZE = 1000;

/**
 * Context IDs a non-master context may hand out. It starts with the block
 * its parent gave it at boot, so it can number children (and give them
 * blocks in turn) without a round trip; only when the pool runs dry does it
 * ask the master for another block.
 */
export class IdPool implements IdSource {
  private readonly blocks: IdBlock[] = [];
  private refilling: Promise<void> | undefined;
  /** What this pool numbered each child with (its ID, and the block it was handed), as ranges owned by the child. */
  private readonly given = new OwnedRanges();

  /**
   * @param router this context's router, used to ask the master for more IDs.
   * @param initial the block given at BOOT, or null.
   */
  constructor(
    private readonly router: MessageSwitch,
    initial: IdBlock | null,
  ) {
    if (initial && initial[1] > initial[0]) this.blocks.push([initial[0], initial[1]]);
  }

  /** IDs left in the pool. */
  get size(): number {
    let n = 0;
    for (const [start, end] of this.blocks) n += end - start;
    return n;
  }

  /** An ID for a new child and a share of the pool for it; refills from the master when low. */
  async allocateChild(leaf = false): Promise<ChildIds> {
    // A loop: every start waiting on one refill wakes at once, and the first ones may use it up again.
    while (this.size < 2) await this.refill();
    const id = this.take();
    // Give a quarter of what is left, so a chain of contexts can nest several levels deep without asking.
    const share = Math.floor(this.size / 4);
    const block = share >= 2 && !leaf ? this.takeBlock(share) : null;
    this.given.add(id, id + 1, id);
    if (block) this.given.add(block[0], block[1], id);
    return { id, block };
  }

  /**
   * Whether the child `childId` may announce `target` as a context of its
   * subtree: only an ID of a block handed to that child (by this pool, or
   * by the master through this context, see `granted`). Not one this pool
   * still holds (it numbers its own next children with them: a child
   * announcing them would take those starts' IDs), nor another child's,
   * nor one the master has not handed out yet.
   */
  mayClaim(target: number, childId: number): boolean {
    return this.given.ownerOf(target) === childId;
  }

  /**
   * Forgets what `childId` was handed, once it has gone: an isolated call's
   * interpreter each time, so a context making many keeps no record of
   * each. Its IDs are not numbered again (the master refuses an ID that had
   * a route); a sibling claiming one it never used gains nothing.
   */
  forget(childId: number): void {
    this.given.removeOwner(childId);
  }

  /** Records a block the master granted to a context behind child `childId` (see grant-watch.ts). */
  granted(start: number, end: number, childId: number): void {
    // Granted by the master, so in no range this pool knows; anything else is no grant of its (and is ignored).
    if (this.given.overlaps(start, end)) return;
    this.given.add(start, end, childId);
  }

  private take(): number {
    const block = this.blocks[0];
    if (!block) throw new Error('context ID pool is empty');
    const id = block[0]++;
    if (block[0] >= block[1]) this.blocks.shift();
    return id;
  }

  private takeBlock(count: number): IdBlock {
    // Carve from the end of the last block so the front stays for this context's own children.
    const block = this.blocks[this.blocks.length - 1] as IdBlock;
    const n = Math.min(count, block[1] - block[0]);
    const out: IdBlock = [block[1] - n, block[1]];
    block[1] -= n;
    if (block[0] >= block[1]) this.blocks.pop();
    return out;
  }

  private refill(): Promise<void> {
    if (!this.refilling) {
      this.refilling = ask(this.router, 0, ALLOCATE_ID_SPEC, ID_BLOCK_SIZE, { what: 'context ID allocation' })
        .then((block) => {
          this.blocks.push(block);
        })
        .finally(() => {
          this.refilling = undefined;
        });
    }
    return this.refilling;
  }
}

/**
 * Disjoint ranges of IDs, each owned by a child: found by binary search,
 * so checking an announcement costs a few steps however many children a
 * context has started.
 */
class OwnedRanges {
  private readonly starts: number[] = [];
  private readonly ends: number[] = [];
  private readonly owners: number[] = [];
  /** The starts of each owner's ranges. */
  private readonly byOwner = new Map<number, number[]>();

  /** Records that `[start, end)` was handed to `owner`. */
  add(start: number, end: number, owner: number): void {
    const at = this.search(start);
    this.starts.splice(at, 0, start);
    this.ends.splice(at, 0, end);
    this.owners.splice(at, 0, owner);
    const own = this.byOwner.get(owner);
    if (own) own.push(start);
    else this.byOwner.set(owner, [start]);
  }

  /** Forgets every range of `owner`. */
  removeOwner(owner: number): void {
    const own = this.byOwner.get(owner);
    if (!own) return;
    this.byOwner.delete(owner);
    for (const start of own) {
      const at = this.search(start);
      if (this.starts[at] !== start) continue;
      this.starts.splice(at, 1);
      this.ends.splice(at, 1);
      this.owners.splice(at, 1);
    }
  }

  /** True when `[start, end)` meets a range recorded already. */
  overlaps(start: number, end: number): boolean {
    const at = this.search(end) - 1;
    return at >= 0 && (this.ends[at] as number) > start;
  }

  /** The owner of the range `id` lies in, if any. */
  ownerOf(id: number): number | undefined {
    const at = this.search(id + 1) - 1;
    return at >= 0 && id < (this.ends[at] as number) ? this.owners[at] : undefined;
  }

  /** Where a range starting at `start` goes: the first range starting at or after it. */
  private search(start: number): number {
    let lo = 0;
    let hi = this.starts.length;
    while (lo < hi) {
      const mid = (lo + hi) >> 1;
      if ((this.starts[mid] as number) < start) lo = mid + 1;
      else hi = mid;
    }
    return lo;
  }
}
