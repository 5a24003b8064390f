import { TendrilError } from './base.js';

/**
 * An option has the wrong type or is out of range. Thrown synchronously
 * (or as the rejection of the call it was passed to) before anything is
 * started or sent.
 */
export class InvalidOptionError extends TendrilError {
  /** The option, e.g. `'timeout'` or `'shutdownGrace'`. */
  readonly option: string;

  /**
   * @param option the option's name.
   * @param where what it was passed to, e.g. `'context.callWith()'`.
   * @param expected what it must be, e.g. `'a number of milliseconds from 0 to 2147483647'`.
   * @param value the value given.
   */
  constructor(option: string, where: string, expected: string, value: unknown) {
    super(
      `option ${option} of ${where} must be ${expected}, got ${describeValue(value)}`,
      'ERR_TENDRIL_INVALID_OPTION',
    );
    this.option = option;
  }
}

function describeValue(value: unknown): string {
  if (typeof value === 'string') return JSON.stringify(value.length > 80 ? `${value.slice(0, 80)}...` : value);
  if (typeof value === 'number' || typeof value === 'boolean' || value === null || value === undefined)
    return String(value);
  if (typeof value === 'bigint') return `${value}n`;
  return Array.isArray(value) ? 'an array' : `a ${typeof value}`;
}
