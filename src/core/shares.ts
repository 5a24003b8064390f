/**
 * Fair shares of what a subtree may take: context IDs from the master, bytes
 * held for it, routes announced through it, dead replies sent to it.
 *
 * A bound kept per child of a context would be shared by everything behind
 * that child: one member of the subtree (a grandchild, an isolated call's
 * interpreter) could use it all up, and its parent and siblings would be
 * refused in turn. So the bound applies at every level: the subtree of a
 * child gets `limit`, and each context below gets `MEMBER_SHARE` of what its
 * parent's subtree gets (never less than a floor). A charge on behalf of a
 * context counts against it and every ancestor up to the child, and must fit
 * its own share and, for each ancestor, the share of a child of that
 * ancestor: whatever its descendants do, together or one after another,
 * each context keeps at least a quarter of its own share for itself.
 */

/**
 * Deepest a context may be below the one that records it: a chain of
 * contexts each started via the previous one goes at most this far. Walks
 * up the parents stop here, whatever a hostile subtree announced.
 */
export const MAX_TREE_DEPTH = 256;

/** Of what a context's subtree may take, the most one of its children's subtrees may take. */
export const MEMBER_SHARE = 0.75;

/** Who started each descendant, as the switch knows it (see `MessageSwitch.parentOf`). */
export interface Lineage {
  /** This context's ID: the top of every chain. */
  readonly id: number;
  /** The context that started `contextId`, if it is a known descendant (or departed lately). */
  parentOf(contextId: number): number | undefined;
}

/**
 * `contextId` and its ancestors below this context, nearest first: the
 * chain ends with the child of this context it is reached through.
 * Undefined when it is not a known descendant.
 */
export function lineageOf(tree: Lineage, contextId: number): number[] | undefined {
  const chain = [contextId];
  let current = contextId;
  // Bounded whatever a hostile subtree announced.
  while (chain.length <= MAX_TREE_DEPTH) {
    const parent = tree.parentOf(current);
    if (parent === undefined) return undefined;
    if (parent === tree.id) return chain;
    chain.push(parent);
    current = parent;
  }
  return undefined;
}

/** What a context `level` below a child of this context may take (the child is level 0) of the child's `limit`. */
export function shareAt(limit: number, level: number, floor: number): number {
  return Math.max(Math.min(floor, limit), Math.floor(limit * MEMBER_SHARE ** level));
}

/** Where a charge did not fit: the context whose share was full, its share and what it held. */
export interface Shortfall {
  /** The context whose subtree's share is full. */
  contextId: number;
  /** Its level below this context's child (0: the child itself). */
  level: number;
  /** Its share. */
  share: number;
  /** What its subtree held or had taken already. */
  used: number;
}

/**
 * Amounts taken by each subtree, checked against the shares of every
 * level. Entries exist only while some amount is charged to them.
 */
export class Shares {
  private readonly used = new Map<number, number>();

  /** What the subtree of one child of this context may take. */
  readonly limit: number;

  /**
   * @param limit what the subtree of one child of this context may take.
   * @param floor the least share of any context, however deep.
   */
  constructor(
    limit: number,
    private readonly floor: number,
  ) {
    this.limit = limit;
  }

  /** What each subtree has taken now, by the ID of the context at its top. */
  snapshot(): Map<number, number> {
    return new Map(this.used);
  }

  /** What the subtree of `contextId` has taken. */
  usedBy(contextId: number): number {
    return this.used.get(contextId) ?? 0;
  }

  /** The most that may still be taken for the context at the head of `chain` (see `lineageOf`). */
  room(chain: readonly number[]): number {
    let room = Number.POSITIVE_INFINITY;
    for (let i = 0; i < chain.length; i++)
      room = Math.min(room, this.bound(chain, i) - this.usedBy(chain[i] as number));
    return Math.max(0, room);
  }

  /**
   * How much the subtree of `chain[i]` may hold of what the context at the
   * head of `chain` takes: its share, for that context itself; for an
   * ancestor, the share of a child of it, so that what its descendants
   * take together (one after another too, for what is counted for a
   * subtree's life, such as IDs) leaves it the rest of its own.
   */
  private bound(chain: readonly number[], i: number): number {
    const level = chain.length - 1 - i;
    return shareAt(this.limit, i === 0 ? level : level + 1, this.floor);
  }

  /**
   * Where `amount` more for the context at the head of `chain` would not
   * fit, nearest first; undefined when it fits every level.
   */
  shortfall(chain: readonly number[], amount: number): Shortfall | undefined {
    for (let i = 0; i < chain.length; i++) {
      const contextId = chain[i] as number;
      const share = this.bound(chain, i);
      const used = this.usedBy(contextId);
      if (used + amount > share) return { contextId, level: chain.length - 1 - i, share, used };
    }
    return undefined;
  }

  /** Counts `amount` against every context of `chain` (checked first with `shortfall`). */
  take(chain: readonly number[], amount: number): void {
    for (const contextId of chain) this.used.set(contextId, this.usedBy(contextId) + amount);
  }

  /** Forgets what `contextId`'s own entry counts (it has gone); its ancestors' entries keep counting it. */
  forget(contextId: number): void {
    this.used.delete(contextId);
  }

  /** Gives back `amount` taken for `chain` earlier. */
  give(chain: readonly number[], amount: number): void {
    for (const contextId of chain) {
      const left = this.usedBy(contextId) - amount;
      if (left > 0) this.used.set(contextId, left);
      else this.used.delete(contextId);
    }
  }
}
