import { TendrilError } from '../core/errors.js';
import { type ChildIds, ID_BLOCK_SIZE, type IdSource } from '../core/ids.js';
import { MAX_ID } from '../core/message.js';
import { ALLOCATE_ID_SPEC, type IdBlock } from '../core/protocol/allocate-id.js';
import { serve } from '../core/protocol/serve.js';
import { lineageOf, MEMBER_SHARE, Shares } from '../core/shares.js';
import type { MessageSwitch } from '../core/switch.js';

/**
 * Most IDs the master hands to the subtree under one of its children, over
 * its lifetime (about a million contexts). A child that asks for more
 * cannot starve the rest of the tree of IDs; and within it, each context's
 * subtree may take `MEMBER_SHARE` of its parent's (see shares.ts), at
 * least one block, so no member can starve its parent and siblings.
 */
export const SUBTREE_ID_QUOTA = 1 << 20;

interface Grant {
  start: number;
  end: number;
  /** Context the block was given to. */
  owner: number;
  /** One bit per ID of the block, set once it has had a route (made when the first one does). */
  routed?: Uint8Array;
}

/** A context asked for more context IDs than its subtree may have; answered to the requester. */
export class IdQuotaError extends TendrilError {
  /** @param what who asked, and the quota. */
  constructor(what: string) {
    super(what, 'ERR_TENDRIL_ID_QUOTA');
  }
}

/**
 * The master's numbering of contexts. IDs are never reused. Every block
 * handed out is remembered with its owner, so the master can check that a
 * route announced through a stream is for an ID that stream's subtree was
 * actually given (a child cannot hijack a sibling's ID). Each subtree
 * under a child of the master has a quota, and each context's subtree
 * within it a share of its parent's.
 */
export class IdAllocator implements IdSource {
  private next = 1;
  private readonly grants: Grant[] = [];
  /** IDs handed to each subtree over its lifetime, by the context at its top. */
  private readonly shares = new Shares(SUBTREE_ID_QUOTA, ID_BLOCK_SIZE);
  /** The master's own children (in no block) that have had a route. */
  private readonly routedChildren = new Set<number>();

  /** @param router the master's router; ALLOCATE_ID is served on it. */
  constructor(private readonly router: MessageSwitch) {
    // Any descendant may ask; the block is recorded against the asker, and counted against it and its ancestors.
    serve(router, ALLOCATE_ID_SPEC, (count, message) => this.grantTo(message.src, count));
    // A departed context asks no more; what it took stays counted against its ancestors.
    router.on('disconnect', (contextId: number) => this.shares.forget(contextId));
  }

  /** A new ID for a child of the master, and a fresh block for it. */
  async allocateChild(): Promise<ChildIds> {
    const id = this.take(1)[0];
    this.shares.take([id], ID_BLOCK_SIZE + 1);
    return { id, block: this.grant(ID_BLOCK_SIZE, id) };
  }

  /**
   * A new ID for a peer joined over a listener: it starts no children, so
   * it gets no block (it may still ask for one, within its own quota).
   */
  allocatePeer(): number {
    return this.take(1)[0];
  }

  /**
   * The context an ID was ultimately handed out by the master to: the
   * direct recipient of the block it lies in, or the ID itself for a child
   * of the master. Undefined for IDs never handed out.
   */
  ownerOf(id: number): number | undefined {
    if (id <= 0 || id >= this.next) return undefined;
    return this.grantOf(id)?.owner ?? id;
  }

  /** The block `id` lies in, if it was handed out in one. */
  private grantOf(id: number): Grant | undefined {
    let lo = 0;
    let hi = this.grants.length - 1;
    while (lo <= hi) {
      const mid = (lo + hi) >> 1;
      const grant = this.grants[mid] as Grant;
      if (id < grant.start) hi = mid - 1;
      else if (id >= grant.end) lo = mid + 1;
      else return grant;
    }
    return undefined;
  }

  /**
   * Records that `id` has a route: IDs are never reused, so once it has
   * gone, no announcement may bring it back (a context announcing a
   * departed sibling's ID would get the calls meant for it). A bit per ID
   * of a block: 128 KiB for a million.
   */
  markRouted(id: number): void {
    const grant = this.grantOf(id);
    if (!grant) {
      this.routedChildren.add(id);
      return;
    }
    grant.routed ??= new Uint8Array(Math.ceil((grant.end - grant.start) / 8));
    const bit = id - grant.start;
    grant.routed[bit >> 3] = (grant.routed[bit >> 3] as number) | (1 << (bit & 7));
  }

  /** True once `id` has had a route (see `markRouted`). */
  wasRouted(id: number): boolean {
    const grant = this.grantOf(id);
    if (!grant) return this.routedChildren.has(id);
    const bit = id - grant.start;
    return grant.routed !== undefined && ((grant.routed[bit >> 3] as number) & (1 << (bit & 7))) !== 0;
  }

  /** The master's child at the top of the subtree `id` belongs to, or undefined for an ID never handed out. */
  rootOf(id: number): number | undefined {
    for (let current = id, hops = 0; hops < 10_000; hops++) {
      const owner = this.ownerOf(current);
      if (owner === undefined || owner === current) return owner;
      current = owner;
    }
    return undefined;
  }

  /**
   * A block of at most `count` IDs for `requester`: fewer when its share,
   * or that of an ancestor, has less left (at least one).
   * @throws IdQuotaError when the requester is not a context of this tree, or no share on its way up has an ID left.
   */
  private grantTo(requester: number, count: number): IdBlock {
    const chain = lineageOf(this.router, requester);
    if (chain === undefined || this.ownerOf(requester) === undefined) {
      throw new IdQuotaError(`context ${requester} was never given an ID by this master`);
    }
    const room = Math.min(count, this.shares.room(chain));
    if (room < 1) {
      const full = this.shares.shortfall(chain, 1);
      const top = full?.contextId ?? (chain[chain.length - 1] as number);
      const name = `'${this.router.nameOf(top)}' (id ${top})`;
      const percent = Math.round(MEMBER_SHARE * 100);
      const whose =
        full === undefined || (full.level === 0 && top === requester)
          ? `the contexts under ${name} have used their quota of ${SUBTREE_ID_QUOTA} context IDs`
          : top === requester
            ? `${name} and the contexts it started have used their share of ${full.share} context IDs (${percent}% of what their parent's may have, so that one context cannot use up its parent's)`
            : `the contexts started under ${name} have used the ${full.share} context IDs they may have together (${percent}% of its own share: the rest is kept for it)`;
      const message = `${whose}; context ${requester} may not have more`;
      this.router.warn('quota', `${this.router.name}: ${message}`);
      throw new IdQuotaError(message);
    }
    this.shares.take(chain, room);
    return this.grant(room, requester);
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
