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
  /** IDs for the next child; may ask the master for more. */
  allocateChild(): Promise<ChildIds>;
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
  async allocateChild(): Promise<ChildIds> {
    // A loop: every start waiting on one refill wakes at once, and the first ones may use it up again.
    while (this.size < 2) await this.refill();
    const id = this.take();
    // Give a quarter of what is left, so a chain of contexts can nest several levels deep without asking.
    const share = Math.floor(this.size / 4);
    return { id, block: share >= 2 ? this.takeBlock(share) : null };
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
