/**
 * The core's V8 code cache kept on a target, in the cache directory of the
 * account a child runs as (`$XDG_CACHE_HOME/tendril`, else
 * `~/.cache/tendril`). The first stage reads it (bootstrap/first-stage.js);
 * this writes it, once the child is up, when there was none or V8 turned
 * the one there down. A child that has it skips compiling the core and
 * most of what V8 compiles lazily while the core starts: about 9 ms of a
 * child's start on Debian's Node 18, more on a Node with a startup
 * snapshot, where the core is most of what is left.
 *
 * V8 does not check a code cache against tampering: whoever can write the
 * file decides what the next child runs. So it is written only into a
 * directory this account owns and nobody else may write, under a home or
 * XDG_CACHE_HOME it owns (never into another account's home that HOME
 * still points to after sudo or su), as a file of mode 0600 put in place
 * by rename; the first stage takes only a regular file owned by this
 * account that nobody else may write.
 */
import * as fs from 'node:fs';
import { basename, dirname, join } from 'node:path';
import type * as vm from 'node:vm';

/** Code caches kept in the directory (one per tendril version, Node binary and architecture), newest first. */
export const KEPT_CODE_CACHES = 8;

/**
 * Writes `script`'s code cache to `path` (the name the first stage looked
 * for). Best effort: a read-only or foreign home, a full disk or anything
 * else that fails leaves the target as it was, and `onSkip` says why.
 */
export function writeTargetCodeCache(script: vm.Script, path: string, onSkip: (why: string) => void): void {
  let temp: string | undefined;
  try {
    const refusal = whyNot(path);
    if (refusal !== undefined) {
      onSkip(refusal);
      return;
    }
    const data = script.createCachedData();
    temp = `${path}.${process.pid}.tmp`;
    fs.rmSync(temp, { force: true });
    const fd = fs.openSync(temp, fs.constants.O_WRONLY | fs.constants.O_CREAT | fs.constants.O_EXCL, 0o600);
    try {
      fs.writeSync(fd, data);
    } finally {
      fs.closeSync(fd);
    }
    fs.renameSync(temp, path);
    temp = undefined;
    prune(dirname(path), basename(path));
  } catch (error) {
    onSkip((error as Error).message);
  } finally {
    if (temp !== undefined) fs.rmSync(temp, { force: true });
  }
}

/**
 * Why the cache may not go to `path`, after making its directory (mode
 * 0700) where it may; undefined when it may.
 */
function whyNot(path: string): string | undefined {
  const euid = process.geteuid?.();
  if (euid === undefined) return 'no user IDs on this platform';
  const dir = dirname(path);
  const base = dirname(dir);
  // XDG_CACHE_HOME itself, or the home that holds .cache (see the first stage).
  const root = process.env.XDG_CACHE_HOME ? base : dirname(base);
  if (!ownedAndClosed(root, euid, false)) return `${root} is not a directory of this account's (uid ${euid})`;
  fs.mkdirSync(dir, { recursive: true, mode: 0o700 });
  if (!ownedAndClosed(dir, euid, true)) return `${dir} is not this account's own, or others may write it`;
  return undefined;
}

/** Whether `path` is a directory owned by `uid` (and, when `closed`, that neither group nor others may write). */
function ownedAndClosed(path: string, uid: number, closed: boolean): boolean {
  const stats = fs.lstatSync(path);
  return stats.isDirectory() && stats.uid === uid && (!closed || (stats.mode & 0o022) === 0);
}

/** Keeps the newest `KEPT_CODE_CACHES` caches in `dir` (`kept` among them), so old tendril versions' go. */
function prune(dir: string, kept: string): void {
  const caches = fs
    .readdirSync(dir)
    .filter((name) => /^core-.*\.v8$/.test(name) && name !== kept)
    .map((name) => ({ name, mtime: fs.statSync(join(dir, name)).mtimeMs }))
    .sort((a, b) => b.mtime - a.mtime);
  for (const { name } of caches.slice(KEPT_CODE_CACHES - 1)) fs.rmSync(join(dir, name), { force: true });
}
