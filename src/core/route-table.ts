import { Shares } from './shares.js';
import type { DisconnectKind, Stream } from './stream.js';

/** Departed contexts remembered, for errors that say what became of them. */
const MAX_DEPARTED = 1024;
/**
 * Most descendants one child stream may announce; within it, each
 * context's subtree may announce a share of its parent's (shares.ts), at
 * least `MIN_ROUTE_SHARE`.
 */
export const MAX_ROUTES_PER_STREAM = 65_536;
/** The least number of routes the subtree of a context however deep may announce. */
export const MIN_ROUTE_SHARE = 16;

/** What became of a context that went away: its name and why. */
export interface Departure {
  /** The name it had. */
  name: string;
  /** Why it went away, e.g. `'end of stream (stream to web1)'`. */
  reason: string;
  /** The same in one word. */
  kind: DisconnectKind;
  /** The context that started it (see `RouteTable.parentOf`). */
  parent: number | undefined;
}

/**
 * What a switch knows of the contexts it reaches: the stream each
 * descendant is reached through, the context that started it (its
 * parent), every context's name, and what became of the contexts that
 * went away (so an error about one says why it is gone rather than that
 * there is no route to it).
 */
export class RouteTable {
  /** Descendant context ID -> stream it is reached through. */
  private readonly routes = new Map<number, Stream>();
  private readonly names = new Map<number, string>();
  /** How many reachable contexts have each name, so that a name is found without a scan of them all. */
  private readonly named = new Map<string, number>();
  /** Descendant context ID -> the context that started it, as announced (checked by each router on the way). */
  private readonly parents = new Map<number, number>();
  /** Contexts that went away: name and why, oldest first, at most MAX_DEPARTED. */
  private readonly departed = new Map<number, Departure>();
  /** Why contexts being stopped on purpose are going away, until they have. */
  private readonly leaving = new Map<number, string>();
  /** Routes announced in each subtree, to bound them: each route counts against the chain it was announced under. */
  private readonly routeCounts = new Shares(MAX_ROUTES_PER_STREAM, MIN_ROUTE_SHARE);
  /** The chain each route was counted against (the target and its ancestors up to this table's child). */
  private readonly chains = new Map<number, readonly number[]>();

  /** Name recorded for a context ID, or `'context <id>'`. */
  nameOf(contextId: number): string {
    return this.names.get(contextId) ?? this.departed.get(contextId)?.name ?? `context ${contextId}`;
  }

  /** True when a reachable context known here has this name. */
  hasContextNamed(name: string): boolean {
    return this.named.has(name);
  }

  /** Records a context's name for messages and errors. */
  setName(contextId: number, name: string): void {
    this.unname(contextId);
    this.names.set(contextId, name);
    this.named.set(name, (this.named.get(name) ?? 0) + 1);
  }

  private unname(contextId: number): void {
    const name = this.names.get(contextId);
    if (name === undefined) return;
    const count = (this.named.get(name) ?? 1) - 1;
    if (count > 0) this.named.set(name, count);
    else this.named.delete(name);
  }

  /** The stream a descendant is reached through, if it is known. */
  get(contextId: number): Stream | undefined {
    return this.routes.get(contextId);
  }

  /**
   * The context that started `contextId` (its parent), while it has a
   * route or is one of the last departed; undefined for any other.
   */
  parentOf(contextId: number): number | undefined {
    return this.parents.get(contextId) ?? this.departed.get(contextId)?.parent;
  }

  /** True when a route to `contextId` is recorded (its stream may have closed since). */
  has(contextId: number): boolean {
    return this.routes.has(contextId);
  }

  /**
   * What became of `contextId` the last time it went away, if it is one of
   * the last `MAX_DEPARTED` contexts that did (it may have a route again).
   */
  lastDeparture(contextId: number): Departure | undefined {
    return this.departed.get(contextId);
  }

  /** Every descendant with a route, as a list taken now. */
  descendants(): number[] {
    return [...this.routes.keys()];
  }

  /** The descendants reached through `stream`, as a list taken now. */
  reachedThrough(stream: Stream): number[] {
    const found: number[] = [];
    for (const [target, via] of this.routes) if (via === stream) found.push(target);
    return found;
  }

  /**
   * Records that `contextId` is being stopped on purpose, so that once it
   * is gone, errors about it give `why` instead of the stream's end.
   */
  expectDeparture(contextId: number, why: string): void {
    if (this.routes.has(contextId)) this.leaving.set(contextId, why);
  }

  /** `expectDeparture` for every context reached. */
  expectAllDepartures(why: string): void {
    for (const contextId of this.routes.keys()) this.leaving.set(contextId, why);
  }

  /**
   * The share that one more route, for `target` announced under `chain`
   * (it and its ancestors up to a child, nearest first), would pass:
   * undefined when it fits (or `target` is counted already).
   */
  fullShare(target: number, chain: readonly number[]): { contextId: number; share: number } | undefined {
    if (this.chains.has(target)) return undefined;
    return this.routeCounts.shortfall(chain, 1);
  }

  /** Records that `target`, named `name` and started by `parent`, is reached through `stream`, counted against `chain`. */
  add(target: number, name: string, parent: number, stream: Stream, chain: readonly number[]): void {
    if (!this.chains.has(target)) {
      this.routeCounts.take(chain, 1);
      this.chains.set(target, chain);
    }
    this.routes.set(target, stream);
    this.setName(target, name);
    this.parents.set(target, parent);
  }

  /**
   * Forgets the route to `target` and remembers it as departed.
   * @param streamReason why, unless it was expected to leave (`expectDeparture`).
   * @param streamKind the same in one word (`'shutdown'` when it was expected).
   * @returns why it departed; undefined when no route to it was recorded.
   */
  delete(target: number, streamReason: string, streamKind: DisconnectKind): Departure | undefined {
    const via = this.routes.get(target);
    if (!via || !this.routes.delete(target)) return undefined;
    const chain = this.chains.get(target);
    if (chain) this.routeCounts.give(chain, 1);
    this.chains.delete(target);
    const expected = this.leaving.get(target);
    const reason = expected ?? streamReason;
    const kind = expected === undefined ? streamKind : 'shutdown';
    this.leaving.delete(target);
    const departure = { name: this.nameOf(target), reason, kind, parent: this.parents.get(target) };
    this.departed.set(target, departure);
    this.unname(target);
    this.names.delete(target);
    this.parents.delete(target);
    if (this.departed.size > MAX_DEPARTED) this.departed.delete(this.departed.keys().next().value as number);
    return departure;
  }
}
