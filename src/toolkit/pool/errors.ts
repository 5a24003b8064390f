import { registerRemoteErrors, TendrilError } from '../../core/errors.js';

/**
 * A `ContextPool` could not give out a context for a reason of its own:
 * it is closed (or was closed while the request waited), or the target's
 * via chain needs more contexts than `maxContexts` allows. A connection
 * that fails rejects with the connection's own error instead
 * (`PasswordError`, `AuthenticationError`...), so it can be caught by class.
 *
 * Registered for remote revival: a worker that asks the master's pool
 * through the UNIX listener receives it as this class.
 */
export class PoolError extends TendrilError {
  /** The target, as the pool names it (e.g. `'sudo:root via ssh:deploy@web1:22'`). */
  readonly target: string;

  /**
   * @param target the target's label.
   * @param what what happened and what to do.
   */
  constructor(target: string, what: string) {
    super(`${what} (pool target ${target})`, 'ERR_TENDRIL_POOL');
    this.target = target;
  }
}

registerRemoteErrors({ PoolError });
