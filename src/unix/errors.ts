/**
 * Errors of the UNIX listener and of joining a master through one. They
 * arise in the master's process and in the joining one, never in a child.
 */
import { TendrilError } from '../core/errors.js';

/**
 * `router.listen()` could not listen, or `connect()` could not join: the
 * socket's directory is not private, another master listens there, the
 * socket is missing or stale, the master refused the peer, or the
 * handshake failed. `path` is the socket's path.
 */
export class ListenerError extends TendrilError {
  /** The socket's path. */
  readonly path: string;

  /**
   * @param path the socket's path.
   * @param message what happened and what to do.
   * @param code `ERR_TENDRIL_LISTENER` (setting up or handshake), `ERR_TENDRIL_LISTENER_IN_USE`
   *   (a live master listens there), `ERR_TENDRIL_LISTENER_REFUSED` (the master refused this
   *   process), `ERR_TENDRIL_LISTENER_UNREACHABLE` (nothing listens there),
   *   `ERR_TENDRIL_LISTENER_UNTRUSTED` (another user's process listens there: not joined).
   * @param options `cause`: the underlying error.
   */
  constructor(path: string, message: string, code = 'ERR_TENDRIL_LISTENER', options?: { cause?: unknown }) {
    super(message, code, options);
    this.path = path;
  }
}
