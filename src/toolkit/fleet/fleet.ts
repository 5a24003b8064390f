/**
 * One function across many targets: connect each through the pool, run the
 * function with its context, at most `concurrency` at once (p-queue), each
 * under its own timeout, and report outcomes as they come — an async
 * iterator, events, and a summary at the end.
 */
import { EventEmitter } from 'eventemitter3';
import PQueue from 'p-queue';
import { InvalidOptionError, TimeoutError } from '../../core/errors.js';
import { abortSignal, integer, milliseconds, optionsObject } from '../../core/options.js';
import { Context } from '../context.js';
import { ContextPool, type PoolLease } from '../pool/pool.js';
import { FleetError } from './errors.js';
import { type FleetFailure, type FleetSkip, type FleetSuccess, FleetSummary } from './summary.js';
import { type FleetTarget, labelOf } from './target.js';

/** The options a fleet takes (`FleetOptions`). */
const FLEET_OPTIONS = new Set(['concurrency', 'timeout', 'signal', 'pool', 'close']);

/**
 * Default `concurrency`: 16 targets at once. Above the pool's default
 * `maxConnecting` (10), so connections are always being made while other
 * targets run the function; low enough that the master (which runs every
 * target's function) and the hosts are not swamped.
 */
export const DEFAULT_FLEET_CONCURRENCY = 16;

/** Highest `concurrency` accepted: each running target holds a context, a lease and a timer. */
export const MAX_FLEET_CONCURRENCY = 10_000;

/** Options of `router.fleet()`. */
export interface FleetOptions {
  /** Targets running at once (connecting included), 1 to 10000. Default `DEFAULT_FLEET_CONCURRENCY` (16). */
  concurrency?: number;
  /**
   * Milliseconds each target may take, connecting and the function
   * together, counted from its start (not from the fleet's). Past it the
   * target's `signal` aborts with a `TimeoutError` and the target fails with
   * it. Default: no limit.
   */
  timeout?: number;
  /**
   * Stops the fleet when it aborts: no further target starts (those left
   * are `skipped`), and running ones see their `signal` abort and fail.
   */
  signal?: AbortSignal;
  /** The pool targets are acquired from. Default `router.pool`. */
  pool?: ContextPool;
  /**
   * Give each target a context of its own, closed when its function ends
   * (the pool's `unique` leases), instead of the pool's shared one that
   * stays open for the next fleet. Pooled `via` hops are shared and kept as
   * usual; `Context` targets are never closed. Default false.
   */
  close?: boolean;
}

/** What the fleet's function is given besides the context and the target. */
export interface FleetStep {
  /**
   * Aborts at the target's `timeout`, when the fleet is stopped, or when
   * the fleet's `signal` aborts: pass it on (`context.callWith({ signal })`,
   * `exec(..., { signal })`...). The fleet stops waiting for the function
   * when it aborts, whether or not the function heeds it.
   */
  readonly signal: AbortSignal;
  /** The target's label, as outcomes and errors name it. */
  readonly label: string;
  /** The target's position in the list given to the fleet. */
  readonly index: number;
}

/**
 * The function a fleet runs for each target, in the master, with the
 * target's context; what it returns (awaited) is the target's `value`.
 */
export type FleetFunction<T, Target = FleetTarget> = (
  context: Context,
  target: Target,
  step: FleetStep,
) => T | PromiseLike<T>;

interface OutcomeBase<Target> {
  /** The target as given. */
  readonly target: Target;
  /** How outcomes, errors and the summary name it. */
  readonly label: string;
  /** Its position in the list given to the fleet. */
  readonly index: number;
  /** From its start (connecting included) to this outcome, in ms. */
  readonly durationMs: number;
}

/** A target whose function returned `value`. */
export interface FleetSuccessOutcome<T, Target = FleetTarget> extends OutcomeBase<Target> {
  /** Always true: tells a success from a failure. */
  readonly ok: true;
  /** What the fleet's function returned for the target, awaited. */
  readonly value: T;
}

/** A target that failed; `error` names it first and carries the original as `cause`. */
export interface FleetFailureOutcome<Target = FleetTarget> extends OutcomeBase<Target> {
  /** Always false: tells a failure from a success. */
  readonly ok: false;
  /**
   * Its message starts with the target's label; `cause` is what was
   * thrown: the connection's or the function's error, the `TimeoutError`
   * of the fleet's `timeout`, or the reason the fleet was stopped.
   */
  readonly error: FleetError;
}

/** How one target ended, as the iterator yields it and the `outcome` event carries it. */
export type FleetOutcome<T, Target = FleetTarget> = FleetSuccessOutcome<T, Target> | FleetFailureOutcome<Target>;

/**
 * Where a fleet stands. `done` counts outcomes (`succeeded + failed`);
 * `done + running + waiting + skipped` is always `total`.
 */
export interface FleetProgress {
  /** Targets given to the fleet. */
  readonly total: number;
  /** Targets with an outcome: `succeeded + failed`. */
  readonly done: number;
  /** Targets whose function returned. */
  readonly succeeded: number;
  /** Targets that failed: connecting, in the function, by their timeout, or stopped while running. */
  readonly failed: number;
  /** Started (connecting or in the function), without an outcome yet. */
  readonly running: number;
  /** Not started yet: waiting for a place under `concurrency`. */
  readonly waiting: number;
  /** Never started: the fleet was stopped first. */
  readonly skipped: number;
}

/** Events of a `Fleet`. A listener that throws stops the fleet; `summary()` then rejects with what it threw. */
export interface FleetEvents<T, Target = FleetTarget> {
  /** A target started or ended, or the fleet was stopped. */
  progress: [progress: FleetProgress];
  /** A target ended (before the iterator yields it). */
  outcome: [outcome: FleetOutcome<T, Target>];
}

type State = 'waiting' | 'running' | 'done' | 'skipped';

interface Entry<T, Target> {
  readonly target: Target;
  readonly label: string;
  state: State;
  outcome?: FleetOutcome<T, Target>;
}

/**
 * One function running across many targets, from `router.fleet()`. It starts
 * at once (listeners added in the same tick see every event) and:
 *
 * - is an `AsyncIterable` of outcomes in the order they come;
 *   leaving the loop early (`break`, `return`, a throw) stops the fleet and
 *   waits until no target is running;
 * - emits `progress` and `outcome` (eventemitter3);
 * - resolves `summary()` once every target has ended, iterated or not.
 *
 * It keeps every outcome until it is itself unreachable (the summary and
 * late iterators need them): a slow loop makes it hold more outcomes, never
 * more running targets. That is a few hundred bytes per target (entry,
 * outcome and summary line; `npm run bench:fleet memory` measures it) plus
 * the function's value or the error; return only what you need.
 */
export class Fleet<T, Target = FleetTarget> extends EventEmitter<FleetEvents<T, Target>> {
  readonly #entries: Entry<T, Target>[];
  readonly #outcomes: FleetOutcome<T, Target>[] = [];
  readonly #fn: FleetFunction<T, Target>;
  readonly #pool: () => ContextPool;
  readonly #timeout: number | undefined;
  readonly #close: boolean;
  readonly #signal: AbortSignal | undefined;
  readonly #queue: PQueue;
  /** Running targets' own abort controllers. */
  readonly #running = new Set<AbortController>();
  readonly #started = performance.now();
  #succeeded = 0;
  #failed = 0;
  #skipped = 0;
  #stopped = false;
  #ended = false;
  /** What a throwing listener threw: the fleet stops and `summary()` rejects with it. */
  #listenerError: { error: unknown } | undefined;
  #summary: FleetSummary<T, Target> | undefined;
  readonly #end: Promise<void>;
  #resolveEnd!: () => void;
  /** Iterators waiting for the next outcome or the end. */
  #wake: (() => void)[] = [];
  readonly #onAbort = () => this.#stop(this.#signal?.reason);

  /**
   * Use `router.fleet()`.
   * @param pool gives the pool (read only if a target needs it).
   * @throws InvalidOptionError for a malformed target (naming its index and field), `fn` or option.
   */
  constructor(
    pool: () => ContextPool,
    targets: Iterable<Target>,
    fn: FleetFunction<T, Target>,
    options: FleetOptions = {},
  ) {
    super();
    const where = 'router.fleet()';
    if (targets === null || typeof (targets as Iterable<Target>)?.[Symbol.iterator] !== 'function') {
      throw new InvalidOptionError('targets', where, 'an array (or iterable) of targets and contexts', targets);
    }
    if (typeof fn !== 'function') throw new InvalidOptionError('fn', where, 'a function', fn);
    options = optionsObject(options, where, FLEET_OPTIONS);
    const concurrency = integer(
      options.concurrency,
      'concurrency',
      where,
      DEFAULT_FLEET_CONCURRENCY,
      1,
      MAX_FLEET_CONCURRENCY,
    );
    this.#timeout = milliseconds(options.timeout, 'timeout', where, undefined, 1);
    this.#signal = abortSignal(options.signal, 'signal', where);
    if (options.pool !== undefined && !(options.pool instanceof ContextPool)) {
      throw new InvalidOptionError('pool', where, 'a ContextPool', options.pool);
    }
    if (options.close !== undefined && typeof options.close !== 'boolean') {
      throw new InvalidOptionError('close', where, 'a boolean', options.close);
    }
    const chosen = options.pool;
    this.#pool = chosen ? () => chosen : pool;
    this.#close = options.close === true;
    this.#fn = fn;
    // Every target is checked before any starts: a typo in the 40th fails the call, not the 40th step.
    this.#entries = Array.from(targets, (target, index) => ({
      target,
      label: labelOf(target, `${where} targets[${index}]`),
      state: 'waiting' as State,
    }));
    this.#end = new Promise((resolve) => {
      this.#resolveEnd = resolve;
    });
    this.#queue = new PQueue({ concurrency, autoStart: false });
    this.#entries.forEach((entry, index) => {
      // Tasks never throw: each target's failure is its outcome.
      void this.#queue.add(() => this.#run(entry, index));
    });
    // Started in a microtask, so listeners added after router.fleet() returns see the first events.
    queueMicrotask(() => {
      if (this.#ended) return; // stopped in the same tick
      if (this.#signal?.aborted) this.#stop(this.#signal.reason);
      else this.#signal?.addEventListener('abort', this.#onAbort, { once: true });
      this.#queue.start();
      this.#check();
    });
  }

  /** Where the fleet stands now. */
  get progress(): FleetProgress {
    const done = this.#succeeded + this.#failed;
    const running = this.#running.size;
    return {
      total: this.#entries.length,
      done,
      succeeded: this.#succeeded,
      failed: this.#failed,
      running,
      waiting: this.#entries.length - done - running - this.#skipped,
      skipped: this.#skipped,
    };
  }

  /**
   * Resolves once every target has ended (succeeded, failed or skipped),
   * whether or not the outcomes were iterated.
   * @throws what a `progress` or `outcome` listener threw (it stopped the fleet).
   */
  async summary(): Promise<FleetSummary<T, Target>> {
    await this.#end;
    if (this.#listenerError) throw this.#listenerError.error;
    return this.#summary as FleetSummary<T, Target>;
  }

  /**
   * Stops the fleet: no further target starts (the rest are `skipped`) and
   * running targets' signals abort with `reason`; they fail with it.
   * Resolves once no target is running. Idempotent.
   * @param reason default: an `AbortError` saying `fleet.stop()` was called.
   */
  async stop(reason?: unknown): Promise<void> {
    this.#stop(reason ?? new DOMException('fleet.stop() was called', 'AbortError'));
    await this.#end;
  }

  /** Outcomes in the order they come; a second loop starts again from the first. */
  [Symbol.asyncIterator](): AsyncIterator<FleetOutcome<T, Target>> {
    let cursor = 0;
    const iterator: AsyncIterableIterator<FleetOutcome<T, Target>> = {
      next: async () => {
        while (cursor >= this.#outcomes.length) {
          if (this.#ended) {
            if (this.#listenerError) throw this.#listenerError.error;
            return { done: true, value: undefined };
          }
          await new Promise<void>((resolve) => this.#wake.push(resolve));
        }
        return { done: false, value: this.#outcomes[cursor++] as FleetOutcome<T, Target> };
      },
      return: async () => {
        cursor = Number.POSITIVE_INFINITY;
        if (!this.#ended) {
          this.#stop(new DOMException("the loop over the fleet's outcomes ended before the fleet", 'AbortError'));
        }
        await this.#end;
        return { done: true, value: undefined };
      },
      [Symbol.asyncIterator]: () => iterator,
    };
    return iterator;
  }

  async #run(entry: Entry<T, Target>, index: number): Promise<void> {
    if (entry.state !== 'waiting') return;
    entry.state = 'running';
    const controller = new AbortController();
    const { signal } = controller;
    this.#running.add(controller);
    const timer =
      this.#timeout === undefined
        ? undefined
        : setTimeout(
            () =>
              controller.abort(
                new TimeoutError("connecting and running the fleet's function", entry.label, this.#timeout as number),
              ),
            this.#timeout,
          );
    const aborted = new Promise<never>((_resolve, reject) => {
      signal.addEventListener('abort', () => reject(signal.reason), { once: true });
    });
    const started = performance.now();
    this.#emit(() => this.emit('progress', this.progress));
    const work = this.#work(entry, index, signal);
    // Past an abort the fleet stops waiting for the function; its end is still caught.
    work.catch(() => {});
    aborted.catch(() => {});
    let outcome: FleetOutcome<T, Target>;
    const base = { target: entry.target, label: entry.label, index };
    try {
      const value = await Promise.race([work, aborted]);
      outcome = { ...base, durationMs: performance.now() - started, ok: true, value };
    } catch (thrown) {
      // Once the target's signal has aborted, that is the reason, whatever the function rejected with.
      const cause = signal.aborted ? signal.reason : thrown;
      const what = signal.aborted && !(cause instanceof TimeoutError) ? `stopped: ${text(cause)}` : text(cause);
      const error = new FleetError(entry.label, what, cause);
      outcome = { ...base, durationMs: performance.now() - started, ok: false, error };
    } finally {
      clearTimeout(timer);
      this.#running.delete(controller);
    }
    entry.state = 'done';
    entry.outcome = outcome;
    if (outcome.ok) this.#succeeded++;
    else this.#failed++;
    this.#outcomes.push(outcome);
    this.#emit(() => this.emit('outcome', outcome));
    this.#emit(() => this.emit('progress', this.progress));
    this.#wakeIterators();
    this.#check();
  }

  /** Acquires the target (unless it is a context), runs the function, releases when the function ends. */
  async #work(entry: Entry<T, Target>, index: number, signal: AbortSignal): Promise<T> {
    let lease: PoolLease | undefined;
    let context: Context;
    if (entry.target instanceof Context) context = entry.target;
    else {
      lease = await this.#pool().acquire(entry.target as never, { signal, unique: this.#close });
      context = lease.context;
    }
    try {
      return await this.#fn(context, entry.target, { signal, label: entry.label, index });
    } finally {
      lease?.release();
    }
  }

  #stop(reason: unknown): void {
    if (this.#stopped || this.#ended) return;
    this.#stopped = true;
    this.#queue.clear();
    for (const entry of this.#entries) {
      if (entry.state !== 'waiting') continue;
      entry.state = 'skipped';
      this.#skipped++;
    }
    for (const controller of this.#running) controller.abort(reason);
    if (this.#skipped > 0) this.#emit(() => this.emit('progress', this.progress));
    this.#check();
  }

  /** Ends the fleet once every target has ended. */
  #check(): void {
    if (this.#ended) return;
    if (this.#succeeded + this.#failed + this.#skipped < this.#entries.length) return;
    this.#ended = true;
    this.#signal?.removeEventListener('abort', this.#onAbort);
    const succeeded: FleetSuccess<T, Target>[] = [];
    const failed: FleetFailure<Target>[] = [];
    const skipped: FleetSkip<Target>[] = [];
    this.#entries.forEach(({ target, label, outcome }, index) => {
      if (!outcome) skipped.push({ target, label, index });
      else if (outcome.ok)
        succeeded.push({ target, label, index, value: outcome.value, durationMs: outcome.durationMs });
      else failed.push({ target, label, index, error: outcome.error, durationMs: outcome.durationMs });
    });
    const duration = performance.now() - this.#started;
    this.#summary = new FleetSummary(this.#entries.length, succeeded, failed, skipped, duration);
    this.#resolveEnd();
    this.#wakeIterators();
  }

  #wakeIterators(): void {
    const waiting = this.#wake;
    this.#wake = [];
    for (const wake of waiting) wake();
  }

  /** Emits to listeners; one that throws stops the fleet, and `summary()` rejects with what it threw. */
  #emit(emit: () => void): void {
    try {
      emit();
    } catch (error) {
      this.#listenerError ??= { error };
      this.#stop(error);
    }
  }
}

/** An error's message (or a thrown value as text) for a `FleetError`'s message. */
function text(cause: unknown): string {
  if (cause instanceof Error) return cause.message || cause.name;
  try {
    return String(cause);
  } catch {
    return 'a value that cannot be shown';
  }
}
