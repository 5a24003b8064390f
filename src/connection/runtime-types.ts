/**
 * What the parts of shipping a Node runtime share: the architectures
 * published, how a runtime is named in a target's cache, and what a
 * context that ships one gets from its source.
 */

/**
 * Architectures the npm registry publishes official Node builds for, in
 * Node's names (`process.arch`): `node-linux-<arch>` packages. Every
 * release is published for x64 and arm64; armv7l, ppc64le and s390x have
 * a few (14.12.0, 16.20.2, 18.19.0, 18.20.4, 20.11.0 when this was
 * written), so they need a `nodeRuntime.version` that one matches.
 */
export const RUNTIME_ARCHES = ['x64', 'arm64', 'armv7l', 'ppc64le', 's390x'] as const;
/** One of `RUNTIME_ARCHES`. */
export type RuntimeArch = (typeof RUNTIME_ARCHES)[number];

/** What an entry looks like (so one can be named to the shell without quoting). */
export const ENTRY = /^\d{1,4}\.\d{1,4}\.\d{1,4}-[a-z0-9]{1,16}-[0-9a-f]{16}$/;

/** The entry for a runtime: version, architecture and the first 16 hex digits of its SHA-512. */
export function entryName(version: string, arch: RuntimeArch, sha512: string): string {
  return `${version}-${arch}-${sha512.slice(0, 16)}`;
}

/** A runtime a context can send: what the shell is told, and its bytes. */
export interface ShippableRuntime {
  /** The name of its directory in a target's cache: `<version>-<arch>-<16 hex digits of its hash>`. */
  readonly entry: string;
  /** The Node release, `22.23.3`. */
  readonly version: string;
  /** Its architecture. */
  readonly arch: RuntimeArch;
  /** Size of the package (the registry's gzip-compressed tarball), in bytes. */
  readonly bytes: number;
  /** SHA-512 of the package, in hex (the registry's integrity). */
  readonly sha512: string;
  /** The package's bytes, from the start. */
  open(): AsyncIterable<Uint8Array>;
}

/** Where a context gets the runtimes it sends: the master's store, or an intermediate's cache and its parent. */
export interface RuntimeSource {
  /**
   * The runtime for `arch`, of the version the program chose.
   * @param have entries the target has already: when one is the runtime, its bytes are not needed.
   * @throws Error saying why there is none (no registry access, nothing published).
   */
  get(arch: RuntimeArch, have: readonly string[]): Promise<ShippableRuntime>;
}
