/**
 * What other contexts make this one hold, accounted per child (and for
 * the contexts beyond the parent together).
 *
 * Every feature that keeps bytes or values in memory because another
 * context sent them (values queued in a Receiver, a command's output kept
 * for its result, service calls waiting for their turn, the entries a
 * transfer remembers) charges them here, to the account of the child
 * stream they came through. A child speaks for its whole subtree, whatever
 * context IDs it uses, so one account bounds all of them: one review of
 * this file answers "how much can a child make us hold?" — `maxHeldBytes`
 * (default 256 MiB) per child, whatever it does, and as much for all the
 * contexts beyond the parent together. Within a child's subtree, what a
 * descendant sends counts against it and each of its ancestors up to the
 * child, and each context's subtree holds at most `MEMBER_SHARE` of what
 * its parent's may (shares.ts, at least `MIN_HELD_SHARE`): a grandchild or
 * an isolated call's interpreter cannot fill its parent's account.
 *
 * Past the limit a charge throws `HeldBytesError` and the feature fails
 * that one operation (drops the value, kills the command, refuses the
 * call, fails the transfer), saying so; the stream stays open and the rest
 * of the tree carries on. Only this context and its ancestors are not
 * limited: they have authority over this context anyway. Every other
 * context reached through the parent stream (a sibling, and everything
 * else not below this context: a child of the master reaches a receiver
 * in its sibling this way, with as many IDs as it asks for) is charged to
 * one more account, that of the contexts beyond the parent, limited like
 * a child's.
 */
import { HeldBytesError } from './errors.js';
import { lineageOf, MEMBER_SHARE, Shares } from './shares.js';
import type { Stream } from './stream.js';

/** What the contexts behind one child may make this context hold, by default: 256 MiB. */
export const DEFAULT_MAX_HELD_BYTES = 256 * 1024 * 1024;

/** The least share of held bytes of a context however deep in a child's subtree: 1 MiB. */
export const MIN_HELD_SHARE = 1024 * 1024;

/**
 * Bytes charged for an item held on a child's behalf besides its payload:
 * the objects around it (a queued message, a remembered path, a waiting
 * call). Makes many small items cost what they really take.
 */
export const ITEM_OVERHEAD = 128;

/** What a router offers the accounts: who a context is, and which child stream it speaks through. */
export interface AccountRouter {
  /** This context's name. */
  readonly name: string;
  /** This context's ID. */
  readonly id: number;
  /** Its ancestors, nearest first (empty in the master). */
  readonly parentIds: readonly number[];
  /** The child stream `contextId` is routed through; undefined for this context and those behind the parent. */
  routeOf(contextId: number): Stream | undefined;
  /** The context that started a descendant (see `MessageSwitch.parentOf`). */
  parentOf(contextId: number): number | undefined;
  /** A context's name, for messages. */
  nameOf(contextId: number): string;
  /** Reports a refusal (a `quota` router warning). */
  warn(code: 'quota', message: string): void;
}

/** What a `Holding` charges: an account, or the shares of a descendant and its ancestors. */
export interface Charges {
  /**
   * Charges `bytes` held for `what`.
   * @param reserve bytes that must stay free after this charge; default 0.
   * @throws HeldBytesError past the limit; nothing is charged then.
   */
  charge(bytes: number, what: string, reserve?: number): void;
  /** Gives back `bytes` charged earlier. */
  release(bytes: number): void;
}

/**
 * The bytes the contexts one account is for hold here: the contexts
 * beyond the parent, or (unlimited) this context and its ancestors.
 */
export class Account implements Charges {
  /** Bytes charged and not yet released. */
  held = 0;
  /** The context the bytes come through: the child, or the parent for the contexts beyond it. */
  readonly contextName: string;
  /** Its ID. */
  readonly contextId: number;
  /** Most bytes held at once; `Infinity` for an account that is not limited. */
  readonly limit: number;

  /**
   * @param contextName the context the bytes come through (the child, or the parent).
   * @param contextId its ID.
   * @param holder the name of the context that holds the bytes.
   * @param limit most bytes held at once; `Infinity` for an account that is not limited.
   * @param onRefused told about each refusal (a `quota` warning).
   * @param whose whom the account is for, for errors (`HeldBytesError.account`); default: the child `contextName` and the contexts behind it.
   */
  constructor(
    contextName: string,
    contextId: number,
    private readonly holder: string,
    limit: number,
    private readonly onRefused: (error: HeldBytesError) => void,
    private readonly whose?: string,
  ) {
    this.contextName = contextName;
    this.contextId = contextId;
    this.limit = limit;
  }

  /**
   * Charges `bytes` held for `what`.
   * @param reserve bytes that must stay free after this charge (for values
   *   already on their way that will be charged when they arrive); default 0.
   * @throws HeldBytesError when that would pass the limit; nothing is charged then.
   */
  charge(bytes: number, what: string, reserve = 0): void {
    if (this.held + bytes + reserve > this.limit) {
      const error = new HeldBytesError(
        this.contextName,
        this.contextId,
        this.holder,
        reserve > 0 ? `${what} (keeping ${reserve} bytes free for what is still on its way)` : what,
        bytes,
        this.held,
        this.limit,
        this.whose,
      );
      this.onRefused(error);
      throw error;
    }
    this.held += bytes;
  }

  /** Gives back `bytes` charged earlier. */
  release(bytes: number): void {
    this.held = Math.max(0, this.held - bytes);
  }
}

/**
 * What one operation holds on a context's behalf (a receiver's queue, a
 * command's kept output): charged to that context's account as it grows,
 * and given back in one call when the operation lets go of it, so that no
 * path can forget to release what it charged.
 */
export class Holding {
  /** Bytes this operation holds now. */
  bytes = 0;
  /** What is held, for the error past the limit (`'output of exec ls'`). */
  readonly what: string;

  /**
   * @param account the account charged.
   * @param what what is held, for the error past the limit.
   */
  constructor(
    private readonly account: Charges,
    what: string,
  ) {
    this.what = what;
  }

  /**
   * Charges `bytes` more.
   * @param reserve bytes that must stay free after it (see `Account.charge`); default 0.
   * @throws HeldBytesError past the account's limit; nothing is charged then.
   */
  add(bytes: number, reserve = 0): void {
    this.account.charge(bytes, this.what, reserve);
    this.bytes += bytes;
  }

  /** Gives back `bytes` (at most what is held). */
  remove(bytes: number): void {
    const released = Math.min(bytes, this.bytes);
    this.bytes -= released;
    this.account.release(released);
  }

  /** Gives back everything held. */
  close(): void {
    this.remove(this.bytes);
  }
}

/**
 * The bytes a descendant and its ancestors up to a child of this context
 * hold here, each within its share (shares.ts).
 */
class ShareAccount implements Charges {
  constructor(
    private readonly holdings: Holdings,
    private readonly shares: Shares,
    private readonly chain: readonly number[],
  ) {}

  charge(bytes: number, what: string, reserve = 0): void {
    const full = this.shares.shortfall(this.chain, bytes + reserve);
    if (full !== undefined)
      throw this.holdings.refused(
        full.contextId,
        full.contextId !== this.chain[0] ? 'descendants' : full.level === 0 ? 'child' : 'member',
        full.share,
        full.used,
        bytes,
        what,
        reserve,
      );
    this.shares.take(this.chain, bytes);
  }

  release(bytes: number): void {
    this.shares.give(this.chain, bytes);
  }
}

/** What is charged for a descendant whose place in the tree is not known: nothing may be held for it. */
class Unplaced implements Charges {
  constructor(
    private readonly holdings: Holdings,
    private readonly contextId: number,
  ) {}

  charge(bytes: number, what: string, reserve = 0): void {
    throw this.holdings.refused(this.contextId, 'unplaced', 0, 0, bytes, what, reserve);
  }

  release(): void {}
}

/**
 * The accounts of one context: a share for each descendant (within one
 * for each child), one for the contexts beyond the parent, and one
 * unlimited for this context and its ancestors.
 */
export class Holdings {
  private readonly shares: Shares;
  private readonly unlimited: Account;
  private beyond: Account | undefined;

  /** `maxHeldBytes`: most bytes each child's account, and that of the contexts beyond the parent, may hold. */
  readonly limit: number;

  /**
   * @param router the context's router.
   * @param limit `maxHeldBytes`: most bytes each limited account may hold.
   */
  constructor(
    private readonly router: AccountRouter,
    limit: number,
  ) {
    this.limit = limit;
    this.shares = new Shares(limit, MIN_HELD_SHARE);
    this.unlimited = new Account(router.name, router.id, router.name, Number.POSITIVE_INFINITY, () => undefined);
  }

  /**
   * What is charged for what `contextId` sends: its share and those of
   * its ancestors up to the child it is routed through; none (unlimited)
   * for this context and its ancestors; for any other, the account of the
   * contexts beyond the parent.
   */
  accountOf(contextId: number): Charges {
    if (this.router.routeOf(contextId) !== undefined) {
      // A route is announced with its parent, and its chain checked; one whose chain is lost (its
      // ancestors went first, as a subtree goes) is held nothing: it has no share to charge.
      const chain = lineageOf(this.router, contextId);
      return chain ? new ShareAccount(this, this.shares, chain) : new Unplaced(this, contextId);
    }
    if (contextId === this.router.id || this.router.parentIds.includes(contextId)) return this.unlimited;
    this.beyond ??= new Account(
      this.router.nameOf(this.router.parentIds[0] ?? this.router.id),
      this.router.parentIds[0] ?? this.router.id,
      this.router.name,
      this.limit,
      (error) => this.router.warn('quota', `${this.router.name}: ${error.message}`),
      this.beyondParent(),
    );
    return this.beyond;
  }

  /**
   * The error for a charge past the share of `contextId`, reported as a
   * `quota` warning: a child's account, a context's own share below it,
   * what the contexts below one may hold together, or a context whose
   * place in the tree is not known.
   */
  refused(
    contextId: number,
    kind: 'child' | 'member' | 'descendants' | 'unplaced',
    share: number,
    used: number,
    bytes: number,
    what: string,
    reserve: number,
  ): HeldBytesError {
    const name = this.router.nameOf(contextId);
    const percent = Math.round(MEMBER_SHARE * 100);
    const whose = {
      child: undefined,
      member: `context '${name}' (id ${contextId}) and the contexts it started (a share of ${percent}% of their parent's, so that one context cannot use up its parent's account)`,
      descendants: `the contexts started under '${name}' (id ${contextId}) together (at most ${percent}% of its own share: the rest is kept for it)`,
      unplaced: `context '${name}' (id ${contextId}), whose parent has gone (nothing is held for a context whose place in the tree is not known)`,
    }[kind];
    const error = new HeldBytesError(
      name,
      contextId,
      this.router.name,
      reserve > 0 ? `${what} (keeping ${reserve} bytes free for what is still on its way)` : what,
      bytes,
      used,
      share,
      whose,
    );
    this.router.warn('quota', `${this.router.name}: ${error.message}`);
    return error;
  }

  /** Whom the account of the contexts beyond the parent is for, for errors. */
  private beyondParent(): string {
    const parentId = this.router.parentIds[0];
    // The master has no parent: only a context that left the tree is neither below it nor itself.
    if (parentId === undefined) return `contexts no longer below '${this.router.name}'`;
    return `the contexts beyond the parent of '${this.router.name}' (all it hears from through '${this.router.nameOf(parentId)}', id ${parentId}, but its ancestors)`;
  }

  /** A holding charged to `contextId`'s account (see `Holding`). */
  holding(contextId: number, what: string): Holding {
    return new Holding(this.accountOf(contextId), what);
  }

  /**
   * Bytes each context's subtree holds now, by its ID (a child's
   * account is its subtree's), and that of the contexts beyond the parent
   * by the parent's ID: for tests and diagnostics.
   */
  snapshot(): Map<number, number> {
    const held = this.shares.snapshot();
    if (this.beyond) held.set(this.beyond.contextId, this.beyond.held);
    return held;
  }
}
