import { logger } from './log.js';
import { Message } from './message.js';
import { SHUTDOWN } from './protocol/handles.js';
import { serve } from './protocol/serve.js';
import { STOP_CHILD_SPEC } from './protocol/stop-child.js';
import type { Stream } from './stream.js';
import type { MessageSwitch } from './switch.js';

const debug = logger('broker');

/** Default wait for a graceful exit before SIGTERM, and again before SIGKILL, in ms. */
export const DEFAULT_SHUTDOWN_GRACE = 2000;

/** How a child process ended. */
export interface ExitStatus {
  /** Exit code, or null when it was killed by a signal. */
  code: number | null;
  /** Signal that killed it, or null. */
  signal: string | null;
  /** Set when the process could not be started at all. */
  error?: Error;
}

/** `'exit code 1'`, `'signal SIGKILL'`, or the spawn error. */
export function describeExit(status: ExitStatus): string {
  if (status.error) return `could not be started: ${status.error.message}`;
  return status.signal ? `killed by signal ${status.signal}` : `exit code ${status.code}`;
}

/**
 * The process behind a child context, as the broker needs it. Connection
 * methods adapt their process (a local child process, an SSH channel, ...)
 * to this shape.
 */
export interface ChildProcessHandle {
  /** Process ID, where the method knows it. */
  readonly pid: number | undefined;
  /** Sends a signal; a no-op once the process has exited. */
  kill(signal: 'SIGTERM' | 'SIGKILL'): void;
  /** Resolves once the process has exited and been reaped (never rejects). */
  readonly exited: Promise<ExitStatus>;
  /** Lets the process keep the event loop alive (while waiting on it). */
  ref(): void;
  /** Stops the process from keeping the event loop alive. */
  unref(): void;
}

/**
 * A child being started (its bootstrap under way), as the broker needs it
 * to abort the start when it shuts down.
 */
export interface StartingChild {
  /** Name of the context being started, for debug output. */
  readonly name: string;
  /**
   * Makes the start fail at once with a `BootstrapError` quoting `reason`;
   * the start kills and reaps its process, if it has one. Called at most
   * once, and only while the start is registered.
   */
  abort(reason: string): void;
  /**
   * Resolves (never rejects) once the start has ended, whichever way, and
   * every process it started and did not hand to `addChild` is reaped.
   */
  readonly settled: Promise<void>;
}

interface ManagedChild {
  id: number;
  name: string;
  process: ChildProcessHandle;
  stream: Stream;
  stopping: Promise<void> | undefined;
}

/**
 * A context's owner of IO: the child processes it started, their streams,
 * and timers. It stops children in order — ask, then SIGTERM, then SIGKILL —
 * and reaps them, so a shutdown leaves no process behind.
 */
export class Broker {
  private readonly children = new Map<number, ManagedChild>();
  private readonly starting = new Set<StartingChild>();
  private readonly timers = new Set<ReturnType<typeof setTimeout>>();
  private readonly cleanups = new Set<(grace: number) => Promise<void> | void>();
  private closing: Promise<void> | undefined;

  /** The router of this context; the broker serves STOP_CHILD on it. */
  readonly router: MessageSwitch;
  /** Default grace period of stops, in ms. */
  readonly grace: number;

  /**
   * @param router the router of this context.
   * @param grace default grace period of stops, in ms. Default 2000.
   */
  constructor(router: MessageSwitch, grace = DEFAULT_SHUTDOWN_GRACE) {
    this.router = router;
    this.grace = grace;
    serve(router, STOP_CHILD_SPEC, ([id, grace]) => this.stopChild(id, grace ?? this.grace).then(() => null));
  }

  /** IDs of the children currently alive. */
  get childIds(): number[] {
    return [...this.children.keys()];
  }

  /** True once `shutdown()` has begun. */
  get isShuttingDown(): boolean {
    return this.closing !== undefined;
  }

  /**
   * Registers a child being started, so that `shutdown()` aborts it and
   * waits until it has settled. A start registered once shutdown has begun
   * is aborted before this returns, and not waited for: register before
   * starting anything, so that such a start never starts a process.
   * @returns a function that unregisters the start; call it when the start
   *   has ended, right after `addChild` when it succeeded.
   */
  addStarting(start: StartingChild): () => void {
    if (this.closing) {
      start.abort(this.shutdownReason());
      return () => {};
    }
    this.starting.add(start);
    return () => {
      this.starting.delete(start);
    };
  }

  /**
   * Takes ownership of a started child: its stream closes and it is
   * forgotten when its process exits.
   */
  addChild(id: number, name: string, process: ChildProcessHandle, stream: Stream): void {
    const child: ManagedChild = { id, name, process, stream, stopping: undefined };
    this.children.set(id, child);
    if (this.closing) void this.stopChild(id);
    let exited = false;
    void process.exited.then(() => {
      exited = true;
      this.children.delete(id);
      stream.close('process exited', 'process exited');
    });
    // A child whose stream closed first (declared dead by its heartbeat, or it broke) is no use to anyone:
    // it gets the grace a stop gives to exit by itself, as a child that lost its parent does, then the signals.
    stream.once('close', () => {
      if (exited) return;
      void this.within(process.exited, this.grace).then((gone) => {
        if (!gone) void this.stopChild(id);
      });
    });
  }

  /**
   * Stops a child: sends SHUTDOWN, waits `grace` ms, sends SIGTERM, waits
   * `grace` ms again, sends SIGKILL; resolves once it has been reaped.
   * Resolves at once for an unknown ID.
   */
  stopChild(id: number, grace = this.grace): Promise<void> {
    const child = this.children.get(id);
    if (!child) return Promise.resolve();
    if (!child.stopping) child.stopping = this.stop(child, grace);
    return child.stopping;
  }

  private async stop(child: ManagedChild, grace: number): Promise<void> {
    const { process } = child;
    // Waiting for the exit must keep the event loop alive, though an idle child does not.
    process.ref();
    // With its stream gone the child cannot be asked, only signalled.
    if (!child.stream.closed) {
      child.stream.send(
        Message.encoded(
          { dst: child.id, src: this.router.id, auth: this.router.id, handle: SHUTDOWN, replyTo: 0 },
          null,
        ),
      );
      if (await this.within(process.exited, grace)) return;
    }
    debug('%s: child %s did not exit within %d ms: SIGTERM', this.router.name, child.name, grace);
    process.kill('SIGTERM');
    if (await this.within(process.exited, grace)) return;
    debug('%s: child %s ignored SIGTERM: SIGKILL', this.router.name, child.name);
    process.kill('SIGKILL');
    await process.exited;
  }

  /** Resolves true if `promise` settles within `ms`, false otherwise. */
  private within(promise: Promise<unknown>, ms: number): Promise<boolean> {
    return new Promise((resolve) => {
      const timer = this.setTimeout(() => resolve(false), ms);
      void promise.then(() => {
        this.clearTimeout(timer);
        resolve(true);
      });
    });
  }

  /**
   * Registers work `shutdown()` does beside stopping children, such as
   * killing the process groups of commands still running: `cleanup` is
   * called once with the shutdown's grace, and the shutdown waits for the
   * promise it returns. A cleanup added once shutdown has begun runs at once.
   * @returns a function that unregisters it (when what it cleans up ended by itself).
   */
  addCleanup(cleanup: (grace: number) => Promise<void> | void): () => void {
    if (this.closing) {
      void Promise.resolve()
        .then(() => cleanup(this.grace))
        .catch(() => {});
      return () => {};
    }
    this.cleanups.add(cleanup);
    return () => {
      this.cleanups.delete(cleanup);
    };
  }

  /** A timer the broker clears at shutdown. */
  setTimeout(fn: () => void, ms: number): ReturnType<typeof setTimeout> {
    const timer = setTimeout(() => {
      this.timers.delete(timer);
      fn();
    }, ms);
    this.timers.add(timer);
    return timer;
  }

  /** Clears a timer made with `setTimeout`. */
  clearTimeout(timer: ReturnType<typeof setTimeout>): void {
    clearTimeout(timer);
    this.timers.delete(timer);
  }

  /**
   * Stops every child in parallel (each as `stopChild`), aborts every
   * child being started (its bootstrap rejects with a `BootstrapError` and
   * its process is killed and reaped), runs the cleanups (`addCleanup`),
   * and clears timers. Resolves once
   * all of those processes are gone. Idempotent: later calls return the
   * first call's promise.
   */
  shutdown(grace = this.grace): Promise<void> {
    if (!this.closing) {
      const starts = [...this.starting];
      this.starting.clear();
      const reason = this.shutdownReason();
      for (const start of starts) {
        debug('%s: aborting the start of %s: %s', this.router.name, start.name, reason);
        start.abort(reason);
      }
      const cleanups = [...this.cleanups];
      this.cleanups.clear();
      this.closing = Promise.all([
        ...this.childIds.map((id) => this.stopChild(id, grace)),
        ...starts.map((start) => start.settled),
        // A failing cleanup must not keep the others, or the shutdown, from finishing.
        ...cleanups.map((cleanup) =>
          Promise.resolve()
            .then(() => cleanup(grace))
            .catch((error: unknown) => debug('%s: a shutdown cleanup failed: %s', this.router.name, error)),
        ),
      ]).then(() => {
        for (const timer of this.timers) clearTimeout(timer);
        this.timers.clear();
      });
    }
    return this.closing;
  }

  /** Why starts are aborted: this context is shutting down. */
  private shutdownReason(): string {
    return this.router.id === 0
      ? `router '${this.router.name}' was shut down`
      : `context '${this.router.name}' was shut down`;
  }
}
