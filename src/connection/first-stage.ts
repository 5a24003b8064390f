/**
 * The command that starts a child: a POSIX shell moves the stream from
 * fds 0/1 (all that survives ssh, sudo and friends, since sudo closes fds
 * >= 3) to fds 3/4, points fd 0 at /dev/null and fd 1 at fd 2, then execs
 * Node with the first stage. From then on nothing user code writes to
 * stdout or stderr can reach the stream.
 */

/** Placeholder in the first stage for the deflated core's byte count. */
export const CORE_SIZE_PLACEHOLDER = '__TENDRIL_CORE_SIZE__';

/** Shell script run by `sh -c`; `"$@"` is the Node command and its arguments. */
export const SHELL_WRAPPER = 'exec "$@" 3<&0 4>&1 </dev/null >&2';

/** The first stage with the core's byte count filled in. */
export function firstStage(template: string, coreSize: number): string {
  return template.replace(CORE_SIZE_PLACEHOLDER, String(coreSize));
}

/**
 * What the parent writes before any message: the code cache's length (4
 * bytes, big-endian), the deflated core, the code cache (possibly empty).
 */
export function bootstrapPayload(core: Uint8Array, cache: Uint8Array | undefined): Uint8Array[] {
  const length = Buffer.alloc(4);
  length.writeUInt32BE(cache?.length ?? 0, 0);
  return cache ? [length, core, cache] : [length, core];
}

/**
 * The argv that starts a child: `sh -c <wrapper> tendril <node...> -e <first stage>`.
 * @param node the interpreter command, e.g. `['/usr/bin/node']` or `['nice', 'node']`.
 */
export function bootstrapArgv(node: readonly string[], stage: string): string[] {
  return ['sh', '-c', SHELL_WRAPPER, 'tendril', ...node, '-e', stage];
}
