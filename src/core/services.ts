/**
 * What every context knows of services: the types that make
 * `context.callService()` typed from the implementation, the identity of a
 * caller, and `thisContext()` (the `tendril/child` entry), through which
 * code running in a child registers services of its own. The registry itself (policies, queues) is
 * in src/toolkit/services/, loaded in a child from `tendril:toolkit` on
 * its first registration, so the core stays small.
 */

import { NOT_IN_A_CHILD } from './child-entry.js';
import { Context, type ContextInfo } from './context.js';
import { contextTmpdir } from './context-tmpdir.js';
import type { Message } from './message.js';
import type { ServiceRequest } from './protocol/call-service.js';
import { contextRuntime } from './runtime.js';
import type { MessageSwitch } from './switch.js';

// biome-ignore lint/suspicious/noExplicitAny: method parameter types are inferred from the implementation.
type AnyFunction = (...args: any[]) => unknown;

/** Phantom key of `ServiceName`: present in the type only, never on a value. */
declare const SERVICE_TYPE: unique symbol;

/**
 * A service's name that carries the type of its implementation `S`: what
 * `registerService` returns, and what `serviceName<S>()` makes from a
 * string. Given one, `context.callService()` and `context.service()` check
 * method names and arguments and type results; given a plain string, they
 * are untyped. At run time it is the string itself.
 */
export type ServiceName<S> = string & { readonly [SERVICE_TYPE]: S };

/** The implementation type a service name carries; `unknown` for a plain string. */
export type ServiceOf<N> = N extends { readonly [SERVICE_TYPE]: infer S } ? S : unknown;

/**
 * Names of the methods a service exposes: function-valued properties, not
 * `constructor`, not starting with `_`.
 */
export type ServiceMethods<S> = {
  [K in keyof S]-?: K extends string
    ? K extends 'constructor' | `_${string}`
      ? never
      : S[K] extends AnyFunction
        ? K
        : never
    : never;
}[keyof S];

/** Method names accepted for service name `N`: any string for an untyped name. */
export type ServiceMethodOf<N> = unknown extends ServiceOf<N> ? string : ServiceMethods<ServiceOf<N>>;

/** Arguments of method `M` of the service named `N`. */
export type ServiceArgs<N, M> =
  unknown extends ServiceOf<N>
    ? // biome-ignore lint/suspicious/noExplicitAny: an untyped service takes anything.
      any[]
    : M extends keyof ServiceOf<N>
      ? ServiceOf<N>[M] extends (...args: infer A) => unknown
        ? A
        : never
      : never;

/** What a call to method `M` of the service named `N` resolves with. */
export type ServiceResult<N, M> =
  unknown extends ServiceOf<N>
    ? // biome-ignore lint/suspicious/noExplicitAny: an untyped service returns anything.
      any
    : M extends keyof ServiceOf<N>
      ? ServiceOf<N>[M] extends (...args: never[]) => infer R
        ? Awaited<R>
        : never
      : never;

/**
 * A service as seen from another context through `context.service()`:
 * each exposed method runs there and returns a promise of its (awaited)
 * result. Untyped (any method, any arguments) when `S` is unknown.
 */
export type RemoteService<S> = unknown extends S
  ? {
      // biome-ignore lint/suspicious/noExplicitAny: an untyped service takes and returns anything.
      readonly [method: string]: (...args: any[]) => Promise<any>;
    }
  : {
      readonly [K in ServiceMethods<S>]: S[K] extends (...args: infer A) => infer R
        ? (...args: A) => Promise<Awaited<R>>
        : never;
    };

/** The context that called a service, as its policy sees it. */
export interface ServiceCaller {
  /** The calling context's ID (the message's source). */
  readonly id: number;
  /**
   * Its name as this context knows it (`'context <id>'` when it knows none).
   * Contexts started by another one are named by that one: a name is only
   * as trustworthy as the contexts above the caller. Prefer IDs where it matters.
   */
  readonly name: string;
  /**
   * The authority the call acts with: the caller's own ID, or an ancestor's
   * when the call was relayed on its behalf (a listener's worker acts with
   * the master's).
   */
  readonly authId: number;
}

/**
 * Who may call a service: `'parents'` (this context and its ancestors: the
 * default), `'any'` context of the tree, or a predicate over the caller
 * that returns true to admit it (a predicate that throws refuses).
 */
export type ServicePolicy = 'parents' | 'any' | ((caller: ServiceCaller) => boolean);

/** Options of `registerService`. */
export interface ServiceOptions<S = unknown> {
  /** Who may call it. Default `'parents'`. */
  policy?: ServicePolicy;
  /** Calls run at once; more wait in a queue. Default 16. */
  concurrency?: number;
  /**
   * Calls waiting for a turn at most; past it, a call is refused with a
   * `ServiceError` of code `ERR_TENDRIL_SERVICE_BUSY`, so a flood from
   * another context cannot grow this one's memory. Default 1000.
   */
  maxQueued?: number;
  /**
   * Bytes of arguments the waiting calls may hold at most; past it, a call
   * that would wait is refused as busy (`ERR_TENDRIL_SERVICE_BUSY`).
   * Default 64 MiB. A waiting call holds its arguments encoded, as they
   * arrived (they are decoded again when its turn comes), so this bounds
   * what the queue really holds. Each waiting call is also charged to its
   * caller's account (`maxHeldBytes` of the Router), and refused as busy
   * past it.
   */
  maxQueuedBytes?: number;
  /**
   * Checks of the arguments, by method, run before the call is queued: a
   * check that throws refuses the call with a `ServiceError` of code
   * `ERR_TENDRIL_SERVICE_ARGUMENTS` carrying its message. Arguments come
   * from another context: check what the method relies on. A check must
   * not keep the arguments or use their Senders: a call that waits holds
   * them encoded, and decodes them again when its turn comes.
   */
  validate?: { [M in ServiceMethods<S>]?: (args: unknown[]) => void };
}

/**
 * What a context does with a CALL_TOOLKIT request once the handle has
 * checked its shape: the registry installed by the services layer. Its
 * result (or rejection) is the call's reply.
 */
export type ServiceDispatcher = (request: ServiceRequest, message: Message) => unknown;

/** The services registry of a context, as `thisContext()` uses it. */
export interface ServiceRegistryApi {
  /** Registers `implementation` under `name`. */
  register<S extends object>(name: string, implementation: S, options?: ServiceOptions<S>): ServiceName<S>;
  /** Removes the service `name`; false when there was none. */
  unregister(name: string): boolean;
}

/** What `tendril:toolkit` gives the core for services. */
export interface ServicesModule {
  /** The registry of `router`'s context, installed as its dispatcher on first use. */
  serviceRegistry(router: MessageSwitch): ServiceRegistryApi;
}

/**
 * The context this code runs in, for code running in a child (what
 * `thisContext()` of `tendril/child` returns): its identity, handles on its
 * parent and on the master, and its own services.
 */
export interface ThisContext {
  /** This context's ID. */
  readonly id: number;
  /** This context's name. */
  readonly name: string;
  /**
   * The parent, to call (its services, under their policies). Its `info` is
   * empty: a child is not told its parent's process details.
   */
  readonly parent: Context;
  /** The master (the root of the tree), likewise. */
  readonly master: Context;
  /**
   * Offers `implementation`'s methods to other contexts under `name`, as
   * `Router.registerService` does in the master; see docs/services.md.
   * The first registration in a context loads the services module from its
   * parent (once, synchronously).
   * @returns `name`, typed with the implementation for `callService()`.
   * @throws InvalidOptionError for a bad option; Error when the name is taken.
   */
  registerService<S extends object>(name: string, implementation: S, options?: ServiceOptions<S>): ServiceName<S>;
  /** Withdraws the service `name`; calls already running finish. False when there was none. */
  unregisterService(name: string): boolean;
  /**
   * This context's temporary directory: made on first use (mode 0700,
   * under the target's temporary directory), shared by its calls, removed
   * when the context exits (shutdown, its master gone, SIGTERM). The
   * master gets the same path with `context.tmpdir()`.
   * @returns its absolute path.
   * @throws Error when it cannot be made (the temporary directory is not writable).
   */
  tmpdir(): string;
}

let loadServices: (() => ServicesModule) | undefined;

/** Records how this child loads `tendril:toolkit` synchronously (set once as it starts). */
export function setServicesLoader(load: () => ServicesModule): void {
  loadServices = load;
}

let facade: ThisContext | undefined;

/**
 * The context this code runs in, when it runs in a child: shipped
 * functions and modules forwarded there get it with
 * `require('tendril/child').thisContext()` (or `import { thisContext } from
 * 'tendril/child'`), to offer services to their own children or call their
 * parent's.
 * @throws Error in the master: there, call `registerService` on the Router you created.
 */
export function thisContext(): ThisContext {
  if (facade) return facade;
  let runtime: ReturnType<typeof contextRuntime>;
  try {
    runtime = contextRuntime();
  } catch {
    throw new Error(NOT_IN_A_CHILD);
  }
  const { router } = runtime;
  const registry = (): ServiceRegistryApi => {
    if (!loadServices) throw new Error(`context '${router.name}' cannot load tendril:toolkit`);
    return loadServices().serviceRegistry(router);
  };
  const ancestor = (index: number): Context => {
    const id = router.parentIds[index] as number;
    return new Context(router, id, router.nameOf(id), router.parentIds[index + 1] ?? -1, UNKNOWN_INFO);
  };
  facade = {
    id: router.id,
    name: router.name,
    parent: ancestor(0),
    master: ancestor(router.parentIds.length - 1),
    registerService: (name, implementation, options) => registry().register(name, implementation, options),
    unregisterService: (name) => registry().unregister(name),
    tmpdir: contextTmpdir,
  };
  return facade;
}

/** The `info` of a context handle made in a child for an ancestor, whose details it was never told. */
const UNKNOWN_INFO: ContextInfo = Object.freeze({ pid: 0, nodeVersion: '', hostname: '', platform: '', arch: '' });
