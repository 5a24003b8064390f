/**
 * The UNIX listener: other local processes of this user join a master's
 * tree (`router.listen(path)` there, `connect(path)` here) and share its
 * connections and services. See docs/listener.md.
 */
import { Router } from '../master/router.js';
import { Listener, type ListenOptions } from './listener.js';

export type { ConnectOptions, WorkerAcquireOptions, WorkerLease, WorkerRouterEvents, WorkerTarget } from './client.js';
export { connect, WorkerRouter } from './client.js';
export { ListenerError } from './errors.js';
export type { ListenerEvents, ListenOptions, Peer } from './listener.js';
export { Listener } from './listener.js';

declare module '../master/router.js' {
  interface Router {
    /**
     * Lets other processes of this user on this machine join this tree
     * through a UNIX socket at `path` (see `connect()`): each gets a
     * context ID, acts with the master's authority, and shares the
     * master's connections and services. The socket's directory is created
     * with mode 0700 when missing and must otherwise be private to this
     * user; the socket gets mode 0600; a stale socket is replaced, a live
     * one refused; and a process running as another user is refused by
     * the kernel's record of its credentials (SO_PEERCRED, Linux; read
     * with perl), not only by file modes. `router.shutdown()` closes it.
     * @param options `allowUids`, `maxPeers` (default 256), `helloTimeout` (ms, default 10000).
     * @returns the listening `Listener`; `listener.close()` disconnects the
     *   processes that joined and leaves the master's own contexts alone.
     * @throws ListenerError when the directory is shared or not a
     *   directory, the path is too long, something else is at the path, or
     *   another master listens there (`ERR_TENDRIL_LISTENER_IN_USE`).
     */
    listen(path: string, options?: ListenOptions): Promise<Listener>;
  }
}

Router.prototype.listen = function (this: Router, path: string, options?: ListenOptions) {
  return Listener.open(this, path, options);
};
