/**
 * How a fleet ended, per target: what `fleet.summary()` resolves with, and
 * the report its `format()` prints.
 */
import type { FleetError } from './errors.js';
import type { FleetTarget } from './target.js';

/** A target whose function returned. */
export interface FleetSuccess<Target = FleetTarget> {
  readonly target: Target;
  readonly label: string;
  /** From its start (connecting included) to its outcome, in ms. */
  readonly durationMs: number;
}

/** A target that failed: connecting, in the function, by its timeout, or stopped while running. */
export interface FleetFailure<Target = FleetTarget> {
  readonly target: Target;
  readonly label: string;
  /** Names the target first; the original error is its `cause`. */
  readonly error: FleetError;
  /** From its start to its outcome, in ms. */
  readonly durationMs: number;
}

/** A target never started, because the fleet was stopped first. */
export interface FleetSkip<Target = FleetTarget> {
  readonly target: Target;
  readonly label: string;
}

/** Lines of failures and skipped labels `format()` prints before it says how many more there are. */
const SHOWN = 20;

/**
 * How a fleet ended: every target is in exactly one of `succeeded`,
 * `failed` and `skipped`, each list in the order the targets were given.
 * `format()` (and `toString()`) gives a report for people.
 */
export class FleetSummary<Target = FleetTarget> {
  /** Targets given. */
  readonly total: number;
  readonly succeeded: readonly FleetSuccess<Target>[];
  readonly failed: readonly FleetFailure<Target>[];
  /** Targets never started: the fleet was stopped (signal, `stop()`, a loop left early) before their turn. */
  readonly skipped: readonly FleetSkip<Target>[];
  /** From the fleet's start to its last outcome, in ms. */
  readonly durationMs: number;

  /** Built by the fleet; not for programs. */
  constructor(
    total: number,
    succeeded: FleetSuccess<Target>[],
    failed: FleetFailure<Target>[],
    skipped: FleetSkip<Target>[],
    durationMs: number,
  ) {
    this.total = total;
    this.succeeded = succeeded;
    this.failed = failed;
    this.skipped = skipped;
    this.durationMs = durationMs;
  }

  /** Whether every target succeeded. */
  get ok(): boolean {
    return this.succeeded.length === this.total;
  }

  /**
   * The report: counts and wall time, the median and slowest time per
   * target, then each failure (its error's first line, which starts with
   * the target's label) and the skipped targets, the first 20 of each.
   *
   * ```text
   * 50 targets in 1.31 s: 48 succeeded, 2 failed
   * time per target: median 412 ms, slowest 903 ms (local-17)
   * failed:
   *   local-7: Error: disk full (raised in context 'local-7', id 9)
   *   local-9: connecting and running the fleet's function in context 'local-9' timed out after 5000 ms; ...
   * ```
   */
  format(): string {
    const counts = [`${this.succeeded.length} succeeded`, `${this.failed.length} failed`];
    if (this.skipped.length > 0) counts.push(`${this.skipped.length} skipped`);
    const lines = [
      `${this.total} target${this.total === 1 ? '' : 's'} in ${seconds(this.durationMs)}: ${counts.join(', ')}`,
    ];
    const timed = [...this.succeeded, ...this.failed].sort((a, b) => a.durationMs - b.durationMs);
    const slowest = timed[timed.length - 1];
    if (slowest) {
      const median = (timed[timed.length >> 1] as FleetSuccess<Target>).durationMs;
      lines.push(`time per target: median ${ms(median)}, slowest ${ms(slowest.durationMs)} (${slowest.label})`);
    }
    if (this.failed.length > 0) {
      lines.push('failed:');
      for (const { error } of this.failed.slice(0, SHOWN)) lines.push(`  ${error.message.split('\n')[0]}`);
      if (this.failed.length > SHOWN) lines.push(`  ...and ${this.failed.length - SHOWN} more (summary.failed)`);
    }
    if (this.skipped.length > 0) {
      const labels = this.skipped.slice(0, SHOWN).map((skip) => skip.label);
      const more = this.skipped.length > SHOWN ? ` and ${this.skipped.length - SHOWN} more` : '';
      lines.push(`skipped (the fleet was stopped first): ${labels.join(', ')}${more}`);
    }
    return lines.join('\n');
  }

  /** `format()`. */
  toString(): string {
    return this.format();
  }
}

const ms = (value: number): string => `${Math.round(value)} ms`;
const seconds = (value: number): string => (value < 1000 ? ms(value) : `${(value / 1000).toFixed(2)} s`);
