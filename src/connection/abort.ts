/**
 * How a shutdown stops a child that is still starting. An attempt waits
 * on several things in turn (IDs, the transport, prompts, the BOOT reply),
 * and a shutdown may land during any of them: one object that every wait
 * races and that is checked after every wait means no step can miss it.
 */
import { BootstrapError } from './errors.js';

/**
 * An attempt's abort: fired (once) by the broker's shutdown. The attempt
 * races `rejected` against whatever it waits for, and checks `reason`
 * after each wait, so an abort is noticed wherever it lands.
 */
export class Abort {
  /** Why the attempt was aborted; undefined while it was not. */
  reason: string | undefined;
  /** Rejects when the attempt is aborted (handled: only ever raced). */
  readonly rejected: Promise<never>;
  private rejectNow: (error: Error) => void = () => {};
  private readonly listeners = new Set<() => void>();

  /** An abort not yet fired. */
  constructor() {
    this.rejected = new Promise<never>((_, reject) => (this.rejectNow = reject));
    this.rejected.catch(() => {});
  }

  /** Aborts the attempt with `reason` (later calls are ignored). */
  fire(reason: string): void {
    if (this.reason !== undefined) return;
    this.reason = reason;
    this.rejectNow(new Error(reason));
    for (const listener of [...this.listeners]) listener();
  }

  /** Calls `listener` when fired; returns a function that stops that. */
  onFire(listener: () => void): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  /** @throws the abort's reason as an Error when it was fired. */
  check(): void {
    if (this.reason !== undefined) throw new Error(this.reason);
  }

  /**
   * The error an aborted start rejects with.
   * @param name the context's name.
   * @param stage how far it got: `'not started'` (shut down before it
   *   began), `'starting'` (no process of its own yet, or one being killed),
   *   `'stopped'` (its process was killed and reaped).
   * @param lastOutput the process's last output, for `'stopped'`.
   */
  error(name: string, stage: 'not started' | 'starting' | 'stopped', lastOutput?: string): BootstrapError {
    const what =
      stage === 'not started'
        ? `${this.reason}, so it was not started`
        : stage === 'starting'
          ? `${this.reason} while starting it`
          : `${this.reason} while starting it, so its process was stopped`;
    return new BootstrapError(name, what, lastOutput);
  }
}
