/**
 * Where a child context gets the runtimes it ships to its own children:
 * its account's runtime cache on its machine (the directory the shell
 * stage keeps runtimes in, ship-stage.ts), filled from its parent with
 * NODE_RUNTIME once. So a runtime crosses each hop at most once: a
 * context that was itself started with a shipped runtime has the package
 * already, and one that runs its own Node fetches it from its parent the
 * first time one of its children needs it. Which runtime is the master's
 * decision, asked once per architecture.
 *
 * A package in the cache is checked against the SHA-512 its parent gave
 * before it is first sent on; one received is written under a temporary
 * name, checked, and put in place by rename. With no cache directory of
 * its own (a read-only home), a context passes the bytes through from its
 * parent for each child, and the target's shell checks them.
 */
import { createHash } from 'node:crypto';
import { closeSync, createReadStream, createWriteStream, promises as fs } from 'node:fs';
import { basename, dirname, join } from 'node:path';
import { effectiveUid, privateDirectory, SYSTEM_TEMPORARY_DIRECTORIES } from '../core/private-directory.js';
import { ask } from '../core/protocol/serve.js';
import { Receiver } from '../core/receiver.js';
import { openRegularFile } from '../core/regular-file.js';
import type { Runtime } from '../core/runtime.js';
import { ownedAlone } from '../core/target-code-cache.js';
import { NODE_RUNTIME_SPEC, RUNTIME_CHUNK, type RuntimeReply } from './runtime-protocol.js';
import { ENTRY, type RuntimeArch, type RuntimeSource, type ShippableRuntime } from './runtime-types.js';

/** The package's file name in an entry's directory. */
export const PACKAGE_FILE = 'node.tgz';

const sources = new WeakMap<object, RuntimeSource>();

/** The source of the child context `runtime` belongs to, made on first use. */
export function childRuntimeSource(runtime: Runtime): RuntimeSource {
  let source = sources.get(runtime.router);
  if (!source) {
    source = new CachedRuntimes(runtime);
    sources.set(runtime.router, source);
  }
  return source;
}

class CachedRuntimes implements RuntimeSource {
  /** The master's choice for each architecture. */
  private readonly chosen = new Map<RuntimeArch, Promise<RuntimeReply>>();
  /** Each entry's package in the cache, checked (or undefined: none could be kept). */
  private readonly packages = new Map<string, Promise<string | undefined>>();
  private directory: Promise<string | undefined> | undefined;

  constructor(private readonly runtime: Runtime) {}

  async get(arch: RuntimeArch): Promise<ShippableRuntime> {
    let chosen = this.chosen.get(arch);
    if (!chosen) {
      chosen = this.ask(arch);
      this.chosen.set(arch, chosen);
      // A failure is not kept: the next start asks again.
      chosen.catch(() => this.chosen.delete(arch));
    }
    const reply = await chosen;
    return { ...reply, open: () => this.bytes(reply) };
  }

  private ask(arch: RuntimeArch, receiver?: Receiver<Uint8Array>): Promise<RuntimeReply> {
    const { router } = this.runtime;
    return ask(
      router,
      router.parentId,
      NODE_RUNTIME_SPEC,
      { arch, ...(receiver && { chunks: receiver.toSender() }) },
      { what: `asking for a Node runtime for ${arch}` },
    );
  }

  private async *bytes(runtime: RuntimeReply): AsyncIterable<Uint8Array> {
    let kept = this.packages.get(runtime.entry);
    if (!kept) {
      kept = this.keep(runtime);
      this.packages.set(runtime.entry, kept);
      kept.catch(() => this.packages.delete(runtime.entry));
    }
    const path = await kept;
    if (path) {
      try {
        // Opened as matches() checked it: without blocking, a regular file of this account's alone.
        yield* createReadStream('', { fd: openPackage(path), highWaterMark: RUNTIME_CHUNK });
      } catch (error) {
        // Gone since (a cleaner of temporary files): the next start keeps it anew.
        this.packages.delete(runtime.entry);
        throw error;
      }
      return;
    }
    // Nowhere to keep it: passed through from the parent, checked by the target's shell.
    const receiver = new Receiver<Uint8Array>(this.runtime.router);
    const asking = this.ask(runtime.arch, receiver);
    asking.catch(() => receiver.close());
    try {
      yield* receiver;
      await asking;
    } finally {
      // A send cut short (the target gave up) ends the parent's too, rather than leaving it waiting on credit.
      receiver.close();
    }
  }

  /** The package of `runtime` in the cache: found there and checked, or fetched from the parent. */
  private async keep(runtime: RuntimeReply): Promise<string | undefined> {
    this.directory ??= cacheDirectory();
    const directory = await this.directory;
    if (!directory) return undefined;
    const path = join(directory, runtime.entry, PACKAGE_FILE);
    if (await matches(path, runtime)) return path;
    const work = await fs.mkdtemp(join(directory, '.new-'));
    try {
      const temporary = join(work, PACKAGE_FILE);
      const receiver = new Receiver<Uint8Array>(this.runtime.router);
      const asking = this.ask(runtime.arch, receiver);
      asking.catch(() => receiver.close());
      const hash = createHash('sha512');
      let size = 0;
      const out = createWriteStream(temporary, { mode: 0o600 });
      const written = new Promise<void>((resolve, reject) => {
        out.on('finish', resolve);
        out.on('error', reject);
      });
      // Awaited below; a failure before then must not count as unhandled in the meantime.
      written.catch(() => {});
      try {
        for await (const chunk of receiver) {
          size += chunk.length;
          if (size > runtime.bytes) throw new Error(`more than the ${runtime.bytes} bytes of Node ${runtime.version}`);
          hash.update(chunk);
          // A write that fails (a full disk) ends the wait as surely as one that drains.
          if (!out.write(chunk))
            await Promise.race([new Promise<void>((resolve) => out.once('drain', () => resolve())), written]);
        }
      } catch (error) {
        // The parent's sending fails at once, rather than waiting on credit nobody gives.
        receiver.close();
        throw error;
      } finally {
        out.end();
      }
      await written;
      await asking;
      if (size !== runtime.bytes || hash.digest('hex') !== runtime.sha512) {
        throw new Error(`the Node runtime ${runtime.entry} received from the parent does not match its size and hash`);
      }
      await fs.mkdir(join(directory, runtime.entry), { mode: 0o700 }).catch(() => {});
      await fs.rename(temporary, path);
      return path;
    } finally {
      await fs.rm(work, { recursive: true, force: true });
    }
  }
}

/** Whether the file at `path` is this account's own package of `runtime`: its size and SHA-512. */
async function matches(path: string, runtime: RuntimeReply): Promise<boolean> {
  try {
    const fd = openPackage(path, runtime.bytes);
    const hash = createHash('sha512');
    for await (const chunk of createReadStream('', { fd })) hash.update(chunk as Buffer);
    return hash.digest('hex') === runtime.sha512;
  } catch {
    return false;
  }
}

/**
 * A descriptor of the package kept at `path`, opened without blocking or
 * following a link, once it is a regular file of this account's alone (of
 * `bytes` bytes, when given): what is hashed and sent is what was checked.
 * @throws Error otherwise, or as open(2) fails.
 */
function openPackage(path: string, bytes?: number): number {
  const { fd, stats } = openRegularFile(path);
  if (!ownedAlone(stats, euid()) || (bytes !== undefined && stats.size !== bytes)) {
    closeSync(fd);
    throw new Error(`${path} is not this account's package of the runtime`);
  }
  return fd;
}

/** This process's effective user (-1 where there are none: nothing is then this account's). */
function euid(): number {
  return effectiveUid() ?? -1;
}

/**
 * The first usable of the places the shell stage keeps runtimes in: the
 * one this context's own Node came from, when it was shipped, then
 * `$XDG_CACHE_HOME/tendril/node`, `~/.cache/tendril/node` and
 * `tendril-<uid>/node` in `$TMPDIR` (else /tmp), /tmp, /var/tmp and
 * /dev/shm: each a directory of this account's alone, reached only
 * through places no other account can change (core/private-directory.ts),
 * as the shell stage requires too. Undefined when none is.
 */
async function cacheDirectory(): Promise<string | undefined> {
  const uid = euid();
  const { XDG_CACHE_HOME, HOME, TMPDIR } = process.env;
  const shipped = dirname(process.execPath);
  const places: [string, string[]][] = [];
  if (ENTRY.test(basename(shipped))) places.push([dirname(dirname(shipped)), [basename(dirname(shipped))]]);
  if (XDG_CACHE_HOME?.startsWith('/')) places.push([XDG_CACHE_HOME, ['tendril', 'node']]);
  if (HOME?.startsWith('/')) places.push([HOME, ['.cache', 'tendril', 'node']]);
  const temporary = [TMPDIR || '/tmp', ...SYSTEM_TEMPORARY_DIRECTORIES];
  for (const root of temporary.filter((path, i) => temporary.indexOf(path) === i)) {
    places.push([root, [`tendril-${uid}`, 'node']]);
  }
  for (const [root, below] of places) {
    try {
      return privateDirectory(root, below, 'the runtime cache', 'the next place is tried');
    } catch {
      // Not this account's alone, or not writable: the next.
    }
  }
  return undefined;
}
