/**
 * A context's services: what `registerService` records, and what answers
 * CALL_TOOLKIT once installed as the router's dispatcher. The same code
 * runs in the master and, loaded from `tendril:toolkit`, in a child.
 */
import PQueue from 'p-queue';
import {
  describeError,
  HeldBytesError,
  InvalidOptionError,
  ServiceError,
  type ServiceErrorCode,
} from '../../core/errors.js';
import { ITEM_OVERHEAD, MIN_HELD_SHARE } from '../../core/holdings.js';
import type { Message } from '../../core/message.js';
import { integer, optionsObject, text } from '../../core/options.js';
import { hasParentAuthority } from '../../core/policy.js';
import { describeServiceCaller, type ServiceRequest, serviceErrorDetails } from '../../core/protocol/call-service.js';
import { MAX_NAME_LENGTH } from '../../core/protocol/check.js';
import type {
  ServiceCaller,
  ServiceName,
  ServiceOptions,
  ServicePolicy,
  ServiceRegistryApi,
} from '../../core/services.js';
import { lineageOf, MEMBER_SHARE, Shares } from '../../core/shares.js';
import type { MessageSwitch } from '../../core/switch.js';
import { FifoQueue } from './fifo.js';

/** The options `registerService` takes (`ServiceOptions`). */
const SERVICE_OPTIONS = new Set(['policy', 'concurrency', 'maxQueued', 'maxQueuedBytes', 'validate']);

/** Calls of one service running at once, by default. */
export const DEFAULT_SERVICE_CONCURRENCY = 16;
/** Calls of one service waiting for a turn at most, by default. */
export const DEFAULT_SERVICE_MAX_QUEUED = 1000;
/** Bytes of arguments the waiting calls of one service may hold at most, by default. */
export const DEFAULT_SERVICE_MAX_QUEUED_BYTES = 64 * 1024 * 1024;
/** Largest `concurrency` and `maxQueued` accepted. */
const MAX_LIMIT = 1_000_000;
/** Method names listed at most in an unknown-method error. */
const LISTED_METHODS = 20;

// biome-ignore lint/suspicious/noExplicitAny: a service's methods take whatever its implementation declares.
type Method = (...args: any[]) => unknown;

interface Service {
  readonly implementation: object;
  /** Exposed methods by name: looked up here, never on the object, so no caller-given name reaches its prototype. */
  readonly methods: Map<string, Method>;
  readonly admits: (caller: ServiceCaller, message: Message) => boolean;
  readonly validate: Map<string, (args: unknown[]) => void>;
  readonly queue: PQueue<FifoQueue>;
  readonly maxQueued: number;
  readonly maxQueuedBytes: number;
  /** Bytes of arguments of the calls added and not yet started. */
  queuedBytes: number;
  /** The calls and bytes waiting, by the caller's subtree (see `callerChain`): no caller fills the queue for all. */
  readonly waitingCalls: Shares;
  readonly waitingBytes: Shares;
}

/**
 * The services of one context. `register` and `unregister` are what
 * `registerService` and `unregisterService` do; `dispatch` answers a
 * checked CALL_TOOLKIT request: the service, its policy, the method, the
 * arguments, room in the queue, in that order, then the method in its turn.
 */
export class ServiceRegistry implements ServiceRegistryApi {
  private readonly services = new Map<string, Service>();

  /** @param router the router of the context the services are offered in. */
  constructor(private readonly router: MessageSwitch) {}

  /**
   * Registers `implementation`'s methods under `name`.
   * @throws InvalidOptionError for a bad name, implementation or option.
   * @throws Error when a service of that name is registered already.
   */
  register<S extends object>(name: string, implementation: S, options?: ServiceOptions<S>): ServiceName<S> {
    const where = 'registerService()';
    text(name, 'name', where, undefined, MAX_NAME_LENGTH);
    if (
      implementation === null ||
      (typeof implementation !== 'object' && typeof implementation !== 'function') ||
      Array.isArray(implementation)
    ) {
      throw new InvalidOptionError('implementation', where, 'an object whose methods are the service', implementation);
    }
    const checked = optionsObject(options, where, SERVICE_OPTIONS) as ServiceOptions<object>;
    const concurrency = integer(checked.concurrency, 'concurrency', where, DEFAULT_SERVICE_CONCURRENCY, 1, MAX_LIMIT);
    const maxQueued = integer(checked.maxQueued, 'maxQueued', where, DEFAULT_SERVICE_MAX_QUEUED, 0, MAX_LIMIT);
    const maxQueuedBytes = integer(
      checked.maxQueuedBytes,
      'maxQueuedBytes',
      where,
      DEFAULT_SERVICE_MAX_QUEUED_BYTES,
      0,
      Number.MAX_SAFE_INTEGER,
    );
    const admits = this.policy(checked.policy, where);
    const methods = exposedMethods(implementation);
    const validate = validators(checked.validate, methods, where);
    if (this.services.has(name)) {
      throw new Error(
        `a service named '${name}' is already registered in context '${this.router.name}'; unregister it first or choose another name`,
      );
    }
    this.services.set(name, {
      implementation,
      methods,
      admits,
      validate,
      queue: new PQueue({ concurrency, queueClass: FifoQueue }),
      maxQueued,
      maxQueuedBytes,
      queuedBytes: 0,
      // A caller's share starts below the whole queue, so that another caller always finds room.
      waitingCalls: new Shares(Math.max(1, Math.floor(maxQueued * MEMBER_SHARE)), 1),
      waitingBytes: new Shares(Math.floor(maxQueuedBytes * MEMBER_SHARE), MIN_HELD_SHARE),
    });
    return name as ServiceName<S>;
  }

  /** Withdraws the service `name`: later calls are unknown; those queued or running finish. */
  unregister(name: string): boolean {
    return this.services.delete(name);
  }

  /** Answers a CALL_TOOLKIT request: resolves with the method's result, or rejects with a `ServiceError`. */
  dispatch(request: ServiceRequest, message: Message): unknown {
    const [name, method, args] = request;
    const service = this.services.get(name);
    if (!service) {
      throw this.error(
        'ERR_TENDRIL_SERVICE_UNKNOWN',
        name,
        method,
        message,
        `context '${this.router.name}' offers no service '${name}' (called by ${this.callerText(message)}); check the name, and that it was registered in this context`,
      );
    }
    const caller: ServiceCaller = { id: message.src, name: this.router.nameOf(message.src), authId: message.auth };
    if (!service.admits(caller, message)) {
      this.router.warn(
        'policy',
        `${this.router.name}: refused a call to ${method}() of service '${name}' from ${this.callerText(message)} (auth ${message.auth}): not allowed by its policy`,
      );
      throw this.error(
        'ERR_TENDRIL_SERVICE_REFUSED',
        name,
        method,
        message,
        `call to ${method}() of service '${name}' in context '${this.router.name}' refused by policy: it does not admit ${this.callerText(message)}; the service's policy option decides who may call it (default 'parents': this context and its ancestors)`,
      );
    }
    const fn = service.methods.get(method);
    if (!fn) {
      const known = [...service.methods.keys()].sort();
      const listed =
        known.length === 0
          ? 'it has no methods'
          : `its methods are ${known.slice(0, LISTED_METHODS).join(', ')}${known.length > LISTED_METHODS ? ', ...' : ''}`;
      throw this.error(
        'ERR_TENDRIL_SERVICE_METHOD',
        name,
        method,
        message,
        `service '${name}' in context '${this.router.name}' has no method '${method}'; ${listed}`,
      );
    }
    const validate = service.validate.get(method);
    if (validate) {
      try {
        validate(args);
      } catch (error) {
        throw this.error(
          'ERR_TENDRIL_SERVICE_ARGUMENTS',
          name,
          method,
          message,
          `bad arguments to ${method}() of service '${name}' in context '${this.router.name}': ${describeError(error)}`,
        );
      }
    }
    const { queue, implementation } = service;
    // p-queue starts a call at once while fewer than `concurrency` run.
    if (queue.pending < queue.concurrency) return queue.add(() => fn.apply(implementation, args));
    return this.wait(service, name, method, fn, message);
  }

  /**
   * Queues a call that must wait for its turn, or refuses it as busy. A
   * waiting call holds its arguments encoded, as they came (`maxQueuedBytes`
   * and the caller's account count those bytes, and a decoded value can be
   * tens of times larger); they are decoded again when its turn comes. Kept
   * apart from `dispatch`, so that no closure here keeps the decoded
   * arguments alive.
   */
  private wait(service: Service, name: string, method: string, fn: Method, message: Message): Promise<unknown> {
    const { queue, maxQueued, maxQueuedBytes, implementation } = service;
    const bytes = message.data.length;
    const busy = (text: string) => this.error('ERR_TENDRIL_SERVICE_BUSY', name, method, message, text);
    if (queue.size >= maxQueued || service.queuedBytes + bytes > maxQueuedBytes) {
      throw busy(
        `service '${name}' in context '${this.router.name}' is busy: ${queue.pending} calls running and ${queue.size} waiting with ${service.queuedBytes} bytes of arguments (its maxQueued is ${maxQueued}, its maxQueuedBytes ${maxQueuedBytes}); try again later, or raise its concurrency or those limits`,
      );
    }
    const placed = this.callerChain(message.src);
    if (placed === null) {
      throw busy(
        `service '${name}' in context '${this.router.name}' is busy, and the caller's place in the tree (its parent) is no longer known, so it has no share of the queue to wait in`,
      );
    }
    const chain = placed;
    if (chain !== undefined) {
      const full = service.waitingCalls.shortfall(chain, 1) ?? service.waitingBytes.shortfall(chain, bytes);
      if (full !== undefined) {
        throw busy(
          `service '${name}' in context '${this.router.name}' is busy: ${queue.size} calls wait with ${service.queuedBytes} bytes of arguments, and those of '${this.router.nameOf(full.contextId)}' (id ${full.contextId}) and the contexts it started have their share of the queue (at most ${Math.round(MEMBER_SHARE * 100)}% of what their parent's may have, of maxQueued ${maxQueued} and maxQueuedBytes ${maxQueuedBytes}), so that one caller cannot fill it for all; try again later, or raise its concurrency or those limits`,
        );
      }
    }
    const holding = this.router.holding(
      message.src,
      `the arguments of a call to ${method}() of service '${name}' waiting its turn`,
    );
    try {
      holding.add(bytes + ITEM_OVERHEAD);
    } catch (error) {
      if (!(error instanceof HeldBytesError)) throw error;
      throw busy(
        `service '${name}' in context '${this.router.name}' is busy, and ${error.account} already make '${this.router.name}' hold ${error.heldBytes} bytes (its maxHeldBytes is ${error.maxHeldBytes}): this call cannot wait for its turn; try again later, or raise the Router's maxHeldBytes option`,
      );
    }
    service.queuedBytes += bytes;
    if (chain !== undefined) {
      service.waitingCalls.take(chain, 1);
      service.waitingBytes.take(chain, bytes);
    }
    message.forget();
    return queue.add(() => {
      service.queuedBytes -= bytes;
      if (chain !== undefined) {
        service.waitingCalls.give(chain, 1);
        service.waitingBytes.give(chain, bytes);
      }
      holding.close();
      const [, , args] = message.unpack(this.router) as ServiceRequest;
      return fn.apply(implementation, args);
    });
  }

  /**
   * Whose share of a service's queue a call from `contextId` counts
   * against: a descendant's and its ancestors' up to the child it is
   * reached through; the contexts beyond the parent share one (the
   * parent's); none (undefined) for this context and its ancestors, who
   * have authority over it (only the queue's own limits bound them); and
   * null for a descendant whose chain is lost.
   */
  private callerChain(contextId: number): number[] | null | undefined {
    if (contextId === this.router.id || this.router.parentIds.includes(contextId)) return undefined;
    // A descendant whose chain is lost (its ancestors went first) has no share: null, and it waits for nothing.
    if (this.router.routeOf(contextId) !== undefined) return lineageOf(this.router, contextId) ?? null;
    return [this.router.parentIds[0] ?? contextId];
  }

  /** The admission check of `policy`. */
  private policy(policy: ServicePolicy | undefined, where: string): Service['admits'] {
    if (policy === undefined || policy === 'parents') {
      const parents = hasParentAuthority(this.router);
      return (_caller, message) => parents(message, undefined);
    }
    if (policy === 'any') return () => true;
    if (typeof policy !== 'function') {
      throw new InvalidOptionError('policy', where, "'parents', 'any' or a function of the caller", policy);
    }
    return (caller) => {
      try {
        return policy(Object.freeze({ ...caller })) === true;
      } catch (error) {
        this.router.warn(
          'policy',
          `${this.router.name}: a service policy threw for caller '${caller.name}' (id ${caller.id}), so the call was refused: ${describeError(error)}`,
        );
        return false;
      }
    };
  }

  private callerText(message: Message): string {
    return describeServiceCaller(this.router, message.src);
  }

  private error(code: ServiceErrorCode, name: string, method: string, message: Message, text: string): ServiceError {
    return new ServiceError(code, text, serviceErrorDetails(this.router, name, method, message));
  }
}

/**
 * The methods a service exposes: function-valued data properties of the
 * object and of the prototypes its own classes define, nearest first;
 * never `constructor` or a name starting with `_`. Getters are not called.
 * The walk stops at the first prototype that is not the program's own: a
 * built-in's (`Object`, `Map`, `Array`... whose constructor is native
 * code) or an event emitter's, so that `emit`, `removeAllListeners` and
 * the like are never callable by another context.
 */
export function exposedMethods(implementation: object): Map<string, Method> {
  const methods = new Map<string, Method>();
  for (
    let level: object | null = implementation;
    level !== null && !isForeignBase(level);
    level = Object.getPrototypeOf(level) as object | null
  ) {
    for (const key of Object.getOwnPropertyNames(level)) {
      if (key === 'constructor' || key.startsWith('_') || methods.has(key)) continue;
      const value = Object.getOwnPropertyDescriptor(level, key)?.value;
      if (typeof value === 'function') methods.set(key, value as Method);
    }
  }
  return methods;
}

/** True for a prototype whose methods a service never exposes: a built-in's, or an event emitter's. */
function isForeignBase(level: object): boolean {
  if (level === Object.prototype || level === Function.prototype) return true;
  // The object itself (level 0) is the service's, whatever its class.
  // biome-ignore lint/suspicious/noPrototypeBuiltins: the services module runs on Node 12 children, which lack Object.hasOwn.
  if (!Object.prototype.hasOwnProperty.call(level, 'constructor')) return false;
  const maker = (level as { constructor?: unknown }).constructor;
  if (typeof maker === 'function' && /\{\s*\[native code\]\s*\}\s*$/.test(Function.prototype.toString.call(maker))) {
    return true;
  }
  // node:events' EventEmitter and eventemitter3 alike: the methods that would let a caller fire or drop the service's listeners.
  const own = (name: string) => typeof Object.getOwnPropertyDescriptor(level, name)?.value === 'function';
  return own('emit') && own('removeAllListeners') && (own('on') || own('addListener'));
}

function validators(
  validate: ServiceOptions<object>['validate'] | undefined,
  methods: Map<string, Method>,
  where: string,
): Map<string, (args: unknown[]) => void> {
  const checks = new Map<string, (args: unknown[]) => void>();
  if (validate === undefined) return checks;
  if (typeof validate !== 'object' || validate === null || Array.isArray(validate)) {
    throw new InvalidOptionError('validate', where, 'an object of checks by method name', validate);
  }
  for (const method of Object.keys(validate)) {
    const check = (validate as Record<string, unknown>)[method];
    if (!methods.has(method)) {
      throw new InvalidOptionError(`validate.${method}`, where, 'the check of a method the service exposes', check);
    }
    if (typeof check !== 'function') {
      throw new InvalidOptionError(`validate.${method}`, where, 'a function of the arguments', check);
    }
    checks.set(method, check as (args: unknown[]) => void);
  }
  return checks;
}

const registries = new WeakMap<MessageSwitch, ServiceRegistry>();

/** The registry of `router`'s context, made and installed as its dispatcher on first use. */
export function serviceRegistry(router: MessageSwitch): ServiceRegistry {
  let registry = registries.get(router);
  if (!registry) {
    const made = new ServiceRegistry(router);
    registry = made;
    registries.set(router, made);
    router.serviceDispatcher = (request, message) => made.dispatch(request, message);
  }
  return registry;
}
