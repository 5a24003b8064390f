/**
 * The part of the child API (`tendril/child`) that needs no running
 * context, so the master's `tendril/child` entry loads it without the
 * core: `serviceName`, and what `thisContext()` says when called in the
 * master. In a child the whole entry is the core (src/core/services.ts has
 * `thisContext`).
 */
import type { ServiceName } from './services.js';

/** What `thisContext()` throws outside a child. */
export const NOT_IN_A_CHILD =
  'thisContext() is for code running in a child context; in the master, call registerService on the Router you created';

/**
 * Makes a typed service name from a string, for a caller that does not
 * hold what `registerService` returned (the service is registered in
 * another program or module): `serviceName<typeof import('./math.js').math>('math')`.
 * Nothing is checked at run time: the type is the caller's promise.
 * @param name the name the service was registered under.
 */
export function serviceName<S>(name: string): ServiceName<S> {
  return name as ServiceName<S>;
}
