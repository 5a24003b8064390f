/**
 * One connection per target: `ContextPool` and `router.pool`. See docs/pool.md.
 */
import { Router } from '../../master/router.js';
import { ContextPool, routerShuttingDown } from './pool.js';

export { PoolError } from './errors.js';
export type { AcquireOptions, PoolLease, PoolOptions, PoolStats } from './pool.js';
export { ContextPool, DEFAULT_MAX_CONNECTING, DEFAULT_MAX_CONTEXTS } from './pool.js';
export type { PoolMethod, PoolTarget, PoolVia } from './target.js';
export { describeTarget, MAX_VIA_DEPTH, POOL_METHODS } from './target.js';

declare module '../../master/router.js' {
  interface Router {
    /**
     * This router's default `ContextPool` (default limits), made on first
     * use: one context per target, shared by every part of the program
     * that acquires it. `router.shutdown()` closes it.
     *
     * ```ts
     * const lease = await router.pool.acquire({ method: 'ssh', hostname: 'web1' });
     * ```
     */
    readonly pool: ContextPool;
  }
}

const defaults = new WeakMap<Router, ContextPool>();

Object.defineProperty(Router.prototype, 'pool', {
  configurable: true,
  get(this: Router): ContextPool {
    const pool = defaults.get(this) ?? new ContextPool(this);
    defaults.set(this, pool);
    return pool;
  },
});

// Pools close with their router: what waits is rejected before the router stops the contexts.
const shutdown = Router.prototype.shutdown;
Router.prototype.shutdown = function (this: Router): Promise<void> {
  routerShuttingDown(this);
  return shutdown.call(this);
};
