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
}

/**
 * Least a grant costs the share it is taken from, in IDs: a child asking
 * for one ID at a time makes the master remember at most its share / 64
 * grants, not one per ID (each costs the master about 64 bytes).
 */
const MIN_GRANT_COST = 64;

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
  /** One bit per ID handed out, set once it has had a route; grown as IDs are. */
  private routed = new Uint8Array(1024);
  /** Contexts started as leaves (an isolated call's interpreter): they, and anything below them, get no IDs. */
  private readonly leaves = new Set<number>();

  /** @param router the master's router; ALLOCATE_ID is served on it. */
  constructor(private readonly router: MessageSwitch) {
    // Any descendant may ask; the block is recorded against the asker, and counted against it and its ancestors.
    serve(router, ALLOCATE_ID_SPEC, (count, message) => this.grantTo(message.src, count));
    // A departed context asks no more; what it took stays counted against its ancestors.
    router.on('disconnect', (contextId: number) => {
      this.shares.forget(contextId);
      this.leaves.delete(contextId);
    });
  }

  /** Records that `id` was started as a leaf: it starts no contexts, so it is given no IDs. */
  markLeaf(id: number): void {
    this.leaves.add(id);
  }

  /** A new ID for a child of the master, and a fresh block for it (none for a leaf). */
  async allocateChild(leaf = false): Promise<ChildIds> {
    const id = this.take(1)[0];
    if (leaf) return { id, block: null };
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
   * handed out: 128 KiB for a million. Only IDs handed out are marked (an
   * announcement of any other is refused first).
   */
  markRouted(id: number): void {
    if (id <= 0 || id >= this.next) return;
    const byte = id >> 3;
    if (byte >= this.routed.length) {
      const grown = new Uint8Array(Math.max(byte + 1, this.routed.length * 2));
      grown.set(this.routed);
      this.routed = grown;
    }
    this.routed[byte] = (this.routed[byte] as number) | (1 << (id & 7));
  }

  /** True once `id` has had a route (see `markRouted`). */
  wasRouted(id: number): boolean {
    const byte = id >> 3;
    return byte < this.routed.length && ((this.routed[byte] as number) & (1 << (id & 7))) !== 0;
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
    const leaf = chain.find((id) => this.leaves.has(id));
    if (leaf !== undefined) {
      const message = `context ${requester} may not have context IDs: '${this.router.nameOf(leaf)}' (id ${leaf}) was started to run an isolated call, which starts no contexts`;
      this.router.warn('quota', `${this.router.name}: ${message}`);
      throw new IdQuotaError(message);
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
    // A grant costs its share at least MIN_GRANT_COST, so that grants of one ID each stay few.
    this.shares.take(chain, Math.min(Math.max(room, MIN_GRANT_COST), this.shares.room(chain)));
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
