/**
 * One rule for how a target is called: the default name of the context a
 * connection method starts, and the label a pool or fleet gives the target
 * before anything is started (docs/connection-methods.md, "Context names").
 * Both say what the caller wrote, never what the start found out (the ssh
 * config's User and Port, a resolved address), so a label read before
 * connecting is the name the context gets. Two contexts never share a
 * default name: the second gets its ID appended.
 */
import type { Runtime } from '../core/runtime.js';

/** What a target is called by: the options that say where it is and as whom. */
export interface NamedTarget {
  /** The host as the options give it (ssh, openssh). */
  hostname?: unknown;
  /** The port, when the options give one (ssh, openssh). */
  port?: unknown;
  /** The account logged in as (ssh, openssh) or become (sudo, su, doas). */
  username?: unknown;
}

/**
 * The name of a target of `method` as the caller wrote it:
 * `ssh:[<user>@]<host>[:<port>]` (likewise `openssh`; the host in lower
 * case, as OpenSSH reads it; user and port only when given),
 * `sudo:<user>` (likewise `su`, `doas`; default user `root`), `local`.
 * A context's default name is this, but for `local` (`local.<pid>@<machine>`)
 * and the become methods (`sudo:<user>@<machine>`), which add the machine
 * only the start knows.
 */
export function targetName(method: string, options: NamedTarget): string {
  if (method === 'ssh' || method === 'openssh') {
    const user = typeof options.username === 'string' && options.username !== '' ? `${options.username}@` : '';
    const port = options.port !== undefined ? `:${String(options.port)}` : '';
    return `${method}:${user}${String(options.hostname).toLowerCase()}${port}`;
  }
  if (method === 'sudo' || method === 'su' || method === 'doas') {
    return `${method}:${typeof options.username === 'string' ? options.username : 'root'}`;
  }
  return method;
}

/**
 * A default name no other context has: `name`, else `name#<id>` (a second
 * context to the same account on the same host). This router knows its own
 * subtree; `taken` holds the names the master knows elsewhere in the tree.
 */
export function uniqueName(router: Runtime['router'], name: string, id: number, taken: ReadonlySet<string>): string {
  return router.hasContextNamed(name) || taken.has(name) ? `${name}#${id}` : name;
}
