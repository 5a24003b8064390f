/**
 * The core's V8 code cache kept on a target, in the cache directory of the
 * account a child runs as (`$XDG_CACHE_HOME/tendril`, else
 * `~/.cache/tendril`), when the Router's targetCodeCache asks for it. The
 * first stage reads it (bootstrap/first-stage-cache.js); this writes it,
 * once the child is up, when there was none or V8 turned the one there
 * down. A child that has it skips compiling the core and most of what V8
 * compiles lazily while the core starts: about 5 ms of a child's start on
 * Debian's Node 18.
 *
 * V8 does not check a code cache against tampering: whoever can write the
 * file decides what the next child runs. So the directories from the home
 * (or XDG_CACHE_HOME) down must be this account's, and writable by no one
 * else, and no account but root and this one may change any directory
 * above them (private-directory.ts: never another account's home, or a
 * directory in one, that HOME or XDG_CACHE_HOME still names after sudo or
 * su); the file is written with mode 0600 into the physical directory and
 * put in place by rename. The first stage applies the same rule before it
 * reads.
 */
import * as fs from 'node:fs';
import { basename, dirname, join } from 'node:path';
import type * as vm from 'node:vm';
import { describeError } from './errors/base.js';
import { effectiveUid, privateDirectory } from './private-directory.js';

/** Code caches kept in the directory (one per tendril version, Node binary and architecture), newest first. */
export const KEPT_CODE_CACHES = 8;

/**
 * Writes `script`'s code cache to `name` (the path the first stage looked
 * for). Best effort: a read-only or foreign home, a full disk or anything
 * else that fails leaves the target as it was, and `onSkip` says why.
 */
export function writeTargetCodeCache(script: vm.Script, name: string, onSkip: (why: string) => void): void {
  let temp: string | undefined;
  let path: string;
  try {
    const place = cacheDirectory(name);
    if ('refusal' in place) {
      onSkip(place.refusal);
      return;
    }
    // In the physical directory: no account but root and this one can change the way there.
    path = join(place.directory, basename(name));
    const data = script.createCachedData();
    temp = `${path}.${process.pid}.tmp`;
    removeIfThere(temp);
    const fd = fs.openSync(temp, fs.constants.O_WRONLY | fs.constants.O_CREAT | fs.constants.O_EXCL, 0o600);
    try {
      for (let written = 0; written < data.length; ) written += fs.writeSync(fd, data, written);
    } finally {
      fs.closeSync(fd);
    }
    fs.renameSync(temp, path);
    temp = undefined;
  } catch (error) {
    onSkip((error as Error).message);
    return;
  } finally {
    try {
      if (temp !== undefined) removeIfThere(temp);
    } catch {
      // Pruned by a later writer (prune below).
    }
  }
  try {
    prune(dirname(path), basename(path));
  } catch {
    // The cache is in place; what could not be pruned now will be by a later writer.
  }
}

/**
 * The physical directory the cache at `path` goes to, after making its
 * directories (mode 0700) where they are missing; or why it may not go there.
 */
function cacheDirectory(path: string): { directory: string } | { refusal: string } {
  if (effectiveUid() === undefined) return { refusal: 'no user IDs on this platform' };
  const dir = dirname(path);
  // XDG_CACHE_HOME itself, or the home that holds .cache (see the first stage).
  const [root, below] = process.env.XDG_CACHE_HOME
    ? [dirname(dir), [basename(dir)]]
    : [dirname(dirname(dir)), [basename(dirname(dir)), basename(dir)]];
  try {
    return { directory: privateDirectory(root, below, 'the target code cache', 'no code cache is written') };
  } catch (error) {
    return { refusal: describeError(error) };
  }
}

/** Whether `stats` are of a file owned by `uid` that neither group nor others may write. */
export function ownedAlone(stats: { uid: number; mode: number }, uid: number): boolean {
  return stats.uid === uid && (stats.mode & 0o022) === 0;
}

/** Whether `stats` are of a directory owned by `uid` that neither group nor others may write. */
export function closed(stats: { uid: number; mode: number; isDirectory(): boolean }, uid: number): boolean {
  return stats.isDirectory() && ownedAlone(stats, uid);
}

/** Temporary files a child killed while writing left behind are removed after this long, in ms. */
const STALE_TEMPORARY = 10 * 60_000;

/**
 * Keeps the newest `KEPT_CODE_CACHES` caches in `dir` (`kept` among them),
 * so old tendril versions' go, and removes temporary files of writers that
 * died.
 */
function prune(dir: string, kept: string): void {
  const names = fs.readdirSync(dir);
  const now = Date.now();
  for (const name of names) {
    if (/^core-.*\.v8\.\d+\.tmp$/.test(name) && now - fs.statSync(join(dir, name)).mtimeMs > STALE_TEMPORARY) {
      removeIfThere(join(dir, name));
    }
  }
  const caches = names
    .filter((name) => /^core-.*\.v8$/.test(name) && name !== kept)
    .map((name) => ({ name, mtime: fs.statSync(join(dir, name)).mtimeMs }))
    .sort((a, b) => b.mtime - a.mtime);
  for (const { name } of caches.slice(KEPT_CODE_CACHES - 1)) removeIfThere(join(dir, name));
}

/** Removes `path` if it is there (fs.rmSync is not in Node 12). */
function removeIfThere(path: string): void {
  try {
    fs.unlinkSync(path);
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== 'ENOENT') throw error;
  }
}
