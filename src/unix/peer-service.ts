/**
 * The master's side of what a joined process asks for: contexts from the
 * master's pool, and the list of contexts the master holds. Each peer gets
 * a service of its own (named for its ID, admitting it alone), so every
 * lease it takes is tied to it and released when it leaves.
 */
import type { ContextInfo } from '../core/context.js';
import type { MasterSwitch } from '../master/master-switch.js';
import type { Context } from '../toolkit/context.js';
import type { ContextPool, PoolLease } from '../toolkit/pool/pool.js';
import { MAX_VIA_DEPTH, type PoolTarget } from '../toolkit/pool/target.js';
import { serviceRegistry } from '../toolkit/services/registry.js';

/** Leases one peer may hold (or be acquiring) at once: a peer cannot grow the master without bound. */
export const MAX_PEER_LEASES = 4096;

/** A context as it travels to a peer. */
export interface ContextRecord {
  /** Its context ID in the master's tree. */
  id: number;
  /** Its name, which the peer records for the ID. */
  name: string;
  /** The ID of the context that started it (0: the master). */
  parentId: number;
  /** What it reported when it became ready. */
  info: ContextInfo;
}

/** What `acquire` answers: the context, and how the pool knows the target. */
export interface AcquiredRecord extends ContextRecord {
  /** The pool's identity of the target: equal keys share a context. */
  key: string;
  /** How the pool names the target, e.g. `sudo:root via ssh:deploy@web1:22`. */
  label: string;
}

/** Name of the service the master offers the peer `peerId`. */
export function peerServiceName(peerId: number): string {
  return `tendril.listener.${peerId}`;
}

/** The methods a peer calls; `this` is bound to one peer. */
export interface PeerApi {
  /**
   * Acquires `target` from the master's pool under `token` (an integer the
   * peer picks, not already in use), a `via` given as a context ID resolved
   * to the master's context. `options` takes `unique` and `timeout` (ms).
   * @throws TypeError for a token in use or not an integer, a malformed
   *   target, via or option; RangeError past `MAX_PEER_LEASES`; the pool's errors.
   */
  acquire(token: number, target: unknown, options: unknown): Promise<AcquiredRecord>;
  /** Releases the lease taken under `token` (or being acquired); false when there is none. */
  release(token: number): boolean;
  /** The contexts the master has started and still holds. */
  contexts(): ContextRecord[];
}

/** The record of a context handle, for the peer. */
export function recordOf(context: Context): ContextRecord {
  return { id: context.id, name: context.name, parentId: context.parentId, info: context.info };
}

/**
 * Offers the service of peer `peerId` in the master.
 * @returns a function that withdraws it and releases every lease the peer held.
 */
export function offerPeerService(pool: () => ContextPool, core: MasterSwitch<Context>, peerId: number): () => void {
  /** A lease by the peer's token; null while it is being acquired. */
  const leases = new Map<number, PoolLease | null>();
  let gone = false;
  const api: PeerApi = {
    async acquire(token, target, options) {
      if (!Number.isInteger(token)) throw new TypeError('acquire: the token must be an integer');
      if (leases.has(token)) throw new TypeError(`acquire: token ${token} is already in use`);
      if (leases.size >= MAX_PEER_LEASES) {
        throw new RangeError(`this process holds ${MAX_PEER_LEASES} leases already; release some first`);
      }
      const { unique, timeout } = acquireOptions(options);
      const resolved = resolveVia(core, target, 0);
      leases.set(token, null);
      let lease: PoolLease;
      try {
        lease = await pool().acquire(resolved, { unique, timeout });
      } catch (error) {
        leases.delete(token);
        throw error;
      }
      // Released (or the peer left) while it was being acquired: give it straight back.
      if (gone || !leases.has(token)) {
        lease.release();
        throw new Error('the lease was released before it was acquired');
      }
      leases.set(token, lease);
      return { ...recordOf(lease.context), key: lease.key, label: lease.label };
    },
    release(token) {
      if (!leases.has(token)) return false;
      leases.get(token)?.release();
      leases.delete(token);
      return true;
    },
    contexts() {
      return core.startedContexts().map(recordOf);
    },
  };
  const name = peerServiceName(peerId);
  const registry = serviceRegistry(core);
  registry.register(name, api, {
    // This peer alone (it acts with the master's authority, so 'parents' would admit every peer).
    policy: (caller) => caller.id === peerId,
    // Nothing waits here: acquires wait in the pool (and are bounded per peer by
    // MAX_PEER_LEASES), and a release must never queue behind them.
    concurrency: 100_000,
    validate: {
      release: (args) => {
        if (args.length !== 1 || !Number.isInteger(args[0])) throw new TypeError('release takes one integer token');
      },
      contexts: (args) => {
        if (args.length !== 0) throw new TypeError('contexts takes no arguments');
      },
    },
  });
  return () => {
    gone = true;
    registry.unregister(name);
    for (const lease of leases.values()) lease?.release();
    leases.clear();
  };
}

function acquireOptions(options: unknown): { unique: boolean; timeout: number | undefined } {
  if (options === null || typeof options !== 'object' || Array.isArray(options)) {
    throw new TypeError('acquire: options must be an object');
  }
  const { unique, timeout } = options as { unique?: unknown; timeout?: unknown };
  if (unique !== undefined && typeof unique !== 'boolean') throw new TypeError('acquire: unique must be a boolean');
  if (timeout !== undefined && (typeof timeout !== 'number' || !(timeout >= 0))) {
    throw new TypeError('acquire: timeout must be a number of milliseconds');
  }
  return { unique: unique === true, timeout: timeout as number | undefined };
}

/**
 * The target with each `via` given as a context ID (how a peer names a
 * context it holds) replaced by the master's handle on that context.
 * @throws TypeError when a via names a context the master did not start.
 */
function resolveVia(core: MasterSwitch<Context>, target: unknown, depth: number): PoolTarget {
  if (target === null || typeof target !== 'object' || Array.isArray(target)) {
    throw new TypeError('acquire: the target must be an object such as { method: "ssh", host: "web1" }');
  }
  if (depth > MAX_VIA_DEPTH) throw new TypeError(`acquire: a via chain may have at most ${MAX_VIA_DEPTH} hops`);
  const { via } = target as { via?: unknown };
  if (via === undefined) return target as PoolTarget;
  if (typeof via === 'number') {
    const context = core.startedContext(via);
    if (!context) throw new TypeError(`acquire: via context ${via} is not one the master holds`);
    return { ...(target as PoolTarget), via: context };
  }
  return { ...(target as PoolTarget), via: resolveVia(core, via, depth + 1) };
}
