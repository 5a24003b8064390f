/**
 * Services: named objects whose methods other contexts call under a
 * policy, with bounded concurrency. `router.registerService()` in the
 * master, `contextRouter().registerService()` in a child,
 * `context.callService()` and `context.service()` anywhere. See docs/services.md.
 */

import type { ServiceName, ServiceOptions } from '../../core/services.js';
import { ROUTER_SWITCH } from '../../core/switch.js';
import { Router } from '../../master/router.js';
import { serviceRegistry } from './registry.js';

export type { ServiceCallOptions } from '../../core/context.js';
export type { ServiceErrorCode, ServiceErrorDetails } from '../../core/errors.js';
export { ServiceError } from '../../core/errors.js';
export type {
  ContextRouter,
  RemoteService,
  ServiceArgs,
  ServiceCaller,
  ServiceMethodOf,
  ServiceMethods,
  ServiceName,
  ServiceOf,
  ServiceOptions,
  ServicePolicy,
  ServiceResult,
} from '../../core/services.js';
export { contextRouter, serviceName } from '../../core/services.js';
export {
  DEFAULT_SERVICE_CONCURRENCY,
  DEFAULT_SERVICE_MAX_QUEUED,
  DEFAULT_SERVICE_MAX_QUEUED_BYTES,
} from './registry.js';

declare module '../../master/router.js' {
  interface Router {
    /**
     * Offers `implementation`'s methods to the contexts of the tree under
     * `name`: its function-valued properties and those of its prototypes
     * (a class instance's methods), except `constructor` and names starting
     * with `_`, as they are now. Other contexts call them with
     * `context.callService(name, method, ...args)` through their handle on
     * the master; children reach it through `contextRouter().master`.
     *
     * ```ts
     * const MATH = router.registerService('math', { add: (a: number, b: number) => a + b }, { policy: 'any' });
     * // in a child: await contextRouter().master.callService(MATH, 'add', 1, 2)
     * ```
     *
     * @param name the service's name, up to 256 characters.
     * @param implementation the object whose methods are the service.
     * @param options `policy` (who may call: `'parents'`, the default, which
     *   in the master admits only the master itself and processes acting
     *   with its authority; `'any'`; or a predicate over the caller),
     *   `concurrency` (calls running at once, default 16), `maxQueued`
     *   (calls waiting at most, default 1000) and `validate` (checks of the
     *   arguments by method).
     * @returns `name`, typed with the implementation, for `callService()`.
     * @throws InvalidOptionError for a bad name, implementation or option.
     * @throws Error when a service of that name is registered already.
     */
    registerService<S extends object>(name: string, implementation: S, options?: ServiceOptions<S>): ServiceName<S>;
    /**
     * Withdraws the service `name`: later calls to it fail with
     * `ERR_TENDRIL_SERVICE_UNKNOWN`; those already queued or running finish.
     * @returns false when no service of that name was registered.
     */
    unregisterService(name: string): boolean;
  }
}

Router.prototype.registerService = function (this: Router, name, implementation, options) {
  return serviceRegistry(this[ROUTER_SWITCH]).register(name, implementation, options);
};
Router.prototype.unregisterService = function (this: Router, name) {
  return serviceRegistry(this[ROUTER_SWITCH]).unregister(name);
};
