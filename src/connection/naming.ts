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
  /** The container (docker, podman, buildah, lxc, lxd, incus, setns) or the pod's container (kubectl). */
  container?: unknown;
  /** The image a throwaway container is started from (docker, podman). */
  image?: unknown;
  /** The account inside a container or chroot. */
  user?: unknown;
  /** kubectl's pod. */
  pod?: unknown;
  /** kubectl's namespace. */
  namespace?: unknown;
  /** chroot's directory. */
  path?: unknown;
  /** setns's process. */
  pid?: unknown;
  /** The runtime that finds setns's container. */
  runtime?: unknown;
  /** command's program and arguments. */
  argv?: unknown;
}

/** The container methods, named `<method>:<container>[(<user>)]`. */
const CONTAINER_METHODS = new Set(['docker', 'podman', 'buildah', 'lxc', 'lxd', 'incus']);

/**
 * The name of a target of `method` as the caller wrote it:
 * `ssh:[<user>@]<host>[:<port>]` (likewise `openssh`; the host in lower
 * case, as OpenSSH reads it; user and port only when given),
 * `sudo:<user>` (likewise `su`, `doas`; default user `root`), `local`,
 * `docker:<container>[(<user>)]` or `docker:image=<image>` (likewise
 * `podman`, `buildah`, `lxc`, `lxd`, `incus`), `kubectl:[<ns>/]<pod>[/<container>]`,
 * `chroot:<path>`, `setns:pid=<pid>` or `setns:<runtime>/<container>`,
 * `command:<program>`.
 * A context's default name is this, but for `local` (`local.<pid>@<machine>`)
 * and the methods that run a program on the starting machine (`sudo:<user>@<machine>`,
 * `docker:web@<machine>`...), which add the machine only the start knows.
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
  const user = options.user === undefined ? '' : `(${String(options.user)})`;
  if (CONTAINER_METHODS.has(method)) {
    return `${method}:${options.container === undefined ? `image=${String(options.image)}` : String(options.container)}${user}`;
  }
  switch (method) {
    case 'kubectl': {
      const namespace = options.namespace === undefined ? '' : `${String(options.namespace)}/`;
      const container = options.container === undefined ? '' : `/${String(options.container)}`;
      return `kubectl:${namespace}${String(options.pod)}${container}`;
    }
    case 'chroot':
      return `chroot:${String(options.path)}${user}`;
    case 'setns':
      return `setns:${options.container === undefined ? `pid=${String(options.pid)}` : `${String(options.runtime)}/${String(options.container)}`}${user}`;
    case 'command': {
      const program = Array.isArray(options.argv) ? String(options.argv[0]) : '';
      return `command:${program.slice(program.lastIndexOf('/') + 1)}`;
    }
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
