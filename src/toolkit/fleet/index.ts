/**
 * Fleets: one function across many targets, `router.fleet()`. See docs/fleets.md.
 */
import { Router } from '../../master/router.js';
import { Fleet, type FleetFunction, type FleetOptions } from './fleet.js';
import type { FleetTarget } from './target.js';

export { FleetError } from './errors.js';
export type {
  FleetEvents,
  FleetFailureOutcome,
  FleetFunction,
  FleetOptions,
  FleetOutcome,
  FleetProgress,
  FleetStep,
  FleetSuccessOutcome,
} from './fleet.js';
export { DEFAULT_FLEET_CONCURRENCY, Fleet, MAX_FLEET_CONCURRENCY } from './fleet.js';
export type { FleetFailure, FleetSkip, FleetSuccess } from './summary.js';
export { FleetSummary } from './summary.js';
export type { FleetTarget } from './target.js';

declare module '../../master/router.js' {
  interface Router {
    /**
     * Runs `fn` across many targets: each is acquired from `router.pool`
     * (or used as it is, for a `Context`), `fn(context, target, { signal,
     * label, index })` runs in the master with its context, and the lease
     * is released when `fn` ends, so a later fleet over the same targets
     * reuses the connections. At most `concurrency` targets run at once,
     * each under its own `timeout` (connecting included).
     *
     * ```ts
     * const fleet = router.fleet(hosts.map((hostname) => ({ method: 'ssh', hostname })), (context) =>
     *   context.call(() => require('node:os').loadavg()[0]),
     * );
     * fleet.on('progress', ({ done, total }) => console.log(`${done}/${total}`));
     * for await (const outcome of fleet) console.log(outcome.label, outcome.ok ? outcome.value : outcome.error.message);
     * console.log((await fleet.summary()).format());
     * ```
     * @param targets pool targets (`{ method, ... }`) and contexts, checked before any starts.
     * @param fn runs once per target; what it returns is that target's `value`, what it throws its error.
     * @param options `concurrency` (default 16), `timeout` per target, `signal`, `pool`, `close`.
     * @returns the running fleet: iterate its outcomes, listen to its events, await its `summary()`.
     *   A target's failure is a `FleetError` naming it, never a rejection of the fleet.
     * @throws InvalidOptionError for a malformed target (naming its index and field), `fn` or option.
     */
    fleet<T, Target extends FleetTarget = FleetTarget>(
      targets: Iterable<Target>,
      fn: FleetFunction<T, Target>,
      options?: FleetOptions,
    ): Fleet<T, Target>;
  }
}

Router.prototype.fleet = function <T, Target extends FleetTarget>(
  this: Router,
  targets: Iterable<Target>,
  fn: FleetFunction<T, Target>,
  options?: FleetOptions,
): Fleet<T, Target> {
  return new Fleet(() => this.pool, targets, fn, options);
};
