import { TendrilError } from './base.js';

/**
 * A module request to a parent failed as a whole: it was refused because
 * the requesting context had too many requests waiting, it was malformed,
 * or the answer could not be sent. Thrown by `require()` and `import()` in
 * the context that asked; nothing is remembered, so asking again later may
 * succeed.
 */
export class ModuleRequestError extends TendrilError {
  /**
   * @param message what the parent said, naming the limit or the problem.
   */
  constructor(message: string) {
    super(message, 'ERR_TENDRIL_MODULE_REQUEST');
  }
}
