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
 * contexts beyond the parent together.
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
import type { Stream } from './stream.js';

/** What the contexts behind one child may make this context hold, by default: 256 MiB. */
export const DEFAULT_MAX_HELD_BYTES = 256 * 1024 * 1024;

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
  /** A context's name, for messages. */
  nameOf(contextId: number): string;
  /** Reports a refusal (a `quota` router warning). */
  warn(code: 'quota', message: string): void;
}

/**
 * The bytes the contexts one account is for hold here: one child's
 * subtree, or the contexts beyond the parent.
 */
export class Account {
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
    private readonly account: Account,
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
 * The accounts of one context: one per child stream, one for the contexts
 * beyond the parent, and one unlimited for this context and its ancestors.
 */
export class Holdings {
  private readonly accounts = new Map<Stream, Account>();
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
    this.unlimited = new Account(router.name, router.id, router.name, Number.POSITIVE_INFINITY, () => undefined);
  }

  /**
   * The account charged for what `contextId` sends: that of the child
   * stream it is routed through; none (unlimited) for this context and its
   * ancestors; for any other, that of the contexts beyond the parent.
   */
  accountOf(contextId: number): Account {
    const stream = this.router.routeOf(contextId);
    if (stream === undefined) {
      if (contextId === this.router.id || this.router.parentIds.includes(contextId)) return this.unlimited;
      this.beyond ??= this.limited(this.router.parentIds[0] ?? this.router.id, this.beyondParent());
      return this.beyond;
    }
    let account = this.accounts.get(stream);
    if (!account) {
      account = this.limited(stream.remoteId);
      this.accounts.set(stream, account);
    }
    return account;
  }

  /** Whom the account of the contexts beyond the parent is for, for errors. */
  private beyondParent(): string {
    const parentId = this.router.parentIds[0];
    // The master has no parent: only a context that left the tree is neither below it nor itself.
    if (parentId === undefined) return `contexts no longer below '${this.router.name}'`;
    return `the contexts beyond the parent of '${this.router.name}' (all it hears from through '${this.router.nameOf(parentId)}', id ${parentId}, but its ancestors)`;
  }

  /** An account limited to `maxHeldBytes`, for what comes through context `throughId`. */
  private limited(throughId: number, whose?: string): Account {
    return new Account(
      this.router.nameOf(throughId),
      throughId,
      this.router.name,
      this.limit,
      (error) => this.router.warn('quota', `${this.router.name}: ${error.message}`),
      whose,
    );
  }

  /** A holding charged to `contextId`'s account (see `Holding`). */
  holding(contextId: number, what: string): Holding {
    return new Holding(this.accountOf(contextId), what);
  }

  /** Forgets the account of a stream that closed: what is still charged to it is released by its holders. */
  streamClosed(stream: Stream): void {
    this.accounts.delete(stream);
  }

  /**
   * Bytes each child's account holds now, by child ID, and that of the
   * contexts beyond the parent by the parent's ID: for tests and diagnostics.
   */
  snapshot(): Map<number, number> {
    const held = new Map<number, number>();
    for (const account of this.accounts.values()) held.set(account.contextId, account.held);
    if (this.beyond) held.set(this.beyond.contextId, this.beyond.held);
    return held;
  }
}
