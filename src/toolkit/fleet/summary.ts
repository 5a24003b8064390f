/**
 * How a fleet ended, per target: what `fleet.summary()` resolves with, and
 * the report its `format()` prints.
 */
import { inspect } from 'node:util';
import { InvalidOptionError } from '../../core/errors.js';
import { integer, knownOptions, optionsObject } from '../../core/options.js';
import { escapeTerminalText } from '../../core/terminal-text.js';
import type { FleetError } from './errors.js';
import type { FleetTarget } from './target.js';

/** A target whose function returned `value`. */
export interface FleetSuccess<T = unknown, Target = FleetTarget> {
  /** The target as given to the fleet. */
  readonly target: Target;
  /**
   * How the report and errors name it: a context's name, else the target's
   * `name` or the pool's label (`ssh:deploy@web1:22`); ` via <its label>` follows for a `via`.
   */
  readonly label: string;
  /** Its position in the list given to the fleet. */
  readonly index: number;
  /** What the fleet's function returned for it (awaited), as its outcome carried it. */
  readonly value: T;
  /** From its start (connecting included) to its outcome, in ms. */
  readonly durationMs: number;
}

/** A target that failed: connecting, in the function, by its timeout, or stopped while running. */
export interface FleetFailure<Target = FleetTarget> {
  /** The target as given to the fleet. */
  readonly target: Target;
  /**
   * How the report and errors name it: a context's name, else the target's
   * `name` or the pool's label (`ssh:deploy@web1:22`); ` via <its label>` follows for a `via`.
   */
  readonly label: string;
  /** Its position in the list given to the fleet. */
  readonly index: number;
  /** Names the target first; the original error is its `cause`. */
  readonly error: FleetError;
  /** From its start to its outcome, in ms. */
  readonly durationMs: number;
}

/** A target never started, because the fleet was stopped first. */
export interface FleetSkip<Target = FleetTarget> {
  /** The target as given to the fleet. */
  readonly target: Target;
  /**
   * How the report names it: a context's name, else the target's
   * `name` or the pool's label (`ssh:deploy@web1:22`); ` via <its label>` follows for a `via`.
   */
  readonly label: string;
  /** Its position in the list given to the fleet. */
  readonly index: number;
}

/** What `FleetSummary.format()` shows besides counts, times and failures. */
export interface FleetFormatOptions<T = unknown> {
  /**
   * Show the targets that succeeded, each as `<label>: <value>`: `true`
   * for the value as `util.inspect` shows it on one line (cut at 200
   * characters), or a function that gives the text. Default false: a
   * report for many targets stays short.
   */
  values?: boolean | ((value: T, success: FleetSuccess<T, unknown>) => string);
  /** Lines of each list (values, failures, skipped labels) shown before it says how many more there are. Default 20. */
  limit?: number;
}

/** Lines of each list `format()` prints by default before it says how many more there are. */
const SHOWN = 20;
/** Longest value `format({ values: true })` shows, in characters. */
const VALUE_TEXT = 200;
const FORMAT_OPTIONS: ReadonlySet<string> = new Set(['values', 'limit']);

/**
 * How a fleet ended: every target is in exactly one of `succeeded`,
 * `failed` and `skipped`, each list in the order the targets were given.
 * `format()` (and `toString()`) gives a report for people.
 */
export class FleetSummary<T = unknown, Target = FleetTarget> {
  /** Targets given. */
  readonly total: number;
  /** The targets whose function returned, with their values. */
  readonly succeeded: readonly FleetSuccess<T, Target>[];
  /** The targets that failed (connecting, in the function, by timeout, or stopped while running), with their errors. */
  readonly failed: readonly FleetFailure<Target>[];
  /** Targets never started: the fleet was stopped (signal, `stop()`, a loop left early) before their turn. */
  readonly skipped: readonly FleetSkip<Target>[];
  /** From the fleet's start to its last outcome, in ms. */
  readonly durationMs: number;

  /** Built by the fleet; not for programs. */
  constructor(
    total: number,
    succeeded: FleetSuccess<T, Target>[],
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
   * the target's label) and the skipped targets, the first 20 of each;
   * with `values`, first each success with its value. Labels, values and
   * messages are escaped for a terminal, each on its one line
   * (`escapeTerminalText`): what targets returned or threw cannot drive
   * the terminal or add lines to the report.
   *
   * ```text
   * 50 targets in 1.31 s: 48 succeeded, 2 failed
   * time per target: median 412 ms, slowest 903 ms (local-17)
   * failed:
   *   local-7: Error: disk full (raised in context 'local-7', id 9)
   *   local-9: connecting and running the fleet's function in context 'local-9' timed out after 5000 ms; ...
   * ```
   * @throws InvalidOptionError for an unknown option, or a bad `values` or `limit`.
   */
  format(options?: FleetFormatOptions<T>): string {
    const where = 'summary.format()';
    const given = optionsObject(options, where);
    knownOptions(given, FORMAT_OPTIONS, where);
    const limit = integer(given.limit, 'limit', where, SHOWN, 0, Number.MAX_SAFE_INTEGER);
    const { values } = given;
    if (values !== undefined && typeof values !== 'boolean' && typeof values !== 'function') {
      throw new InvalidOptionError('values', where, 'true, false or a function', values);
    }
    const counts = [`${this.succeeded.length} succeeded`, `${this.failed.length} failed`];
    if (this.skipped.length > 0) counts.push(`${this.skipped.length} skipped`);
    const lines = [
      `${this.total} target${this.total === 1 ? '' : 's'} in ${seconds(this.durationMs)}: ${counts.join(', ')}`,
    ];
    const timed = [...this.succeeded, ...this.failed].sort((a, b) => a.durationMs - b.durationMs);
    const slowest = timed[timed.length - 1];
    if (slowest) {
      const median = (timed[timed.length >> 1] as { durationMs: number }).durationMs;
      lines.push(`time per target: median ${ms(median)}, slowest ${ms(slowest.durationMs)} (${shown(slowest.label)})`);
    }
    if (values && this.succeeded.length > 0) {
      const show = typeof values === 'function' ? values : showValue;
      lines.push('succeeded:');
      for (const success of this.succeeded.slice(0, limit)) {
        lines.push(`  ${shown(success.label)}: ${shown(show(success.value, success))}`);
      }
      if (this.succeeded.length > limit) {
        lines.push(`  ...and ${this.succeeded.length - limit} more (summary.succeeded)`);
      }
    }
    if (this.failed.length > 0) {
      lines.push('failed:');
      for (const { error } of this.failed.slice(0, limit)) lines.push(`  ${shown(error.message.split('\n')[0])}`);
      if (this.failed.length > limit) lines.push(`  ...and ${this.failed.length - limit} more (summary.failed)`);
    }
    if (this.skipped.length > 0) {
      const labels = this.skipped.slice(0, limit).map((skip) => shown(skip.label));
      const more = this.skipped.length > limit ? ` and ${this.skipped.length - limit} more` : '';
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

/** Text of the report that comes from targets or the program: escaped, and kept to its line. */
const shown = (text: string): string => escapeTerminalText(String(text));

/** A value on one line, as `util.inspect` shows it, cut at `VALUE_TEXT` characters. */
function showValue(value: unknown): string {
  const text = inspect(value, { breakLength: Number.POSITIVE_INFINITY, depth: 2, maxArrayLength: 20 });
  return text.length > VALUE_TEXT ? `${text.slice(0, VALUE_TEXT)}...` : text;
}
const seconds = (value: number): string => (value < 1000 ? ms(value) : `${(value / 1000).toFixed(2)} s`);
