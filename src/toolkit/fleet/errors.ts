import { TendrilError } from '../../core/errors.js';

/**
 * One target of a fleet failed: connecting to it, the fleet's function
 * there, its per-target timeout, or the fleet was stopped while it ran.
 * The message starts with the target's label, so a list of them reads as
 * a report; what went wrong is `cause`, as it was thrown (a
 * `PasswordError`, a `CallError`, a `TimeoutError`...), to branch on by class.
 */
export class FleetError extends TendrilError {
  /** The target's label, as the fleet names it (e.g. `'web-3'`, `'ssh:deploy@web3:22'`). */
  readonly label: string;

  /**
   * @param label the target's label.
   * @param what what happened to it (the message after the label).
   * @param cause the underlying error.
   */
  constructor(label: string, what: string, cause: unknown) {
    super(`${label}: ${what}`, 'ERR_TENDRIL_FLEET', { cause });
    this.label = label;
  }
}
