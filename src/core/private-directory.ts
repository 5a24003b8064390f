/**
 * Places only this account controls. A context keeps files of its own on
 * its target (its temporary directory, the runtime and code caches, job
 * state, an askpass socket), and takes some paths from an environment it
 * may have inherited from another account (`su` without `-l` keeps the
 * caller's TMPDIR and PATH; so do `sudo -E` and doas's keepenv). A place
 * is trusted only when no account but root and this one can change what
 * its path names:
 *
 * - every directory from `/` down is root's or this account's, and
 *   writable by group or others only when sticky (as /tmp is: there
 *   another account can make entries, but not rename or remove ours);
 * - every entry on the way (directories, the file, and each symbolic link
 *   followed) is root's or this account's;
 * - a file or directory at the end is writable by neither group nor
 *   others, and a directory to keep files in is this account's own.
 *
 * Otherwise whoever owns a directory on the way could rename the next one
 * aside and put their own in its place, whatever its mode (the rename
 * needs write access to the parent only). Links are followed one by one,
 * as the kernel does, so the directory each one lives in is checked too;
 * the physical path is returned, and used from then on. ACLs are not read.
 *
 * Paths are checked with lstat(2) only: nothing is opened, so a FIFO
 * cannot block a check. On a platform without user IDs nothing is checked.
 */
import * as fs from 'node:fs';
import * as os from 'node:os';
import { join } from 'node:path';
import { TendrilError } from './errors/base.js';
import { registerRemoteErrors } from './errors/revival.js';

/** Most symbolic links followed while resolving one path, as Linux's limit. */
const MAX_LINKS = 40;

/** Why a place is not trusted (`UnsafePlaceError.reason`). */
export type PlaceReason = 'owner' | 'writable' | 'missing' | 'not-absolute' | 'not-directory' | 'links' | 'unusable';

/** What is wrong with one place, as `placeProblem` finds it. */
export interface PlaceProblem {
  /** The path found wanting: the directory, file or link on the way (not always the one asked about). */
  readonly path: string;
  /** Its owner's user ID; -1 when unknown. */
  readonly owner: number;
  /** Which rule it breaks. */
  readonly reason: PlaceReason;
  /** The rule in words, after the path: `is owned by uid 1001`, `may be written by group or others`... */
  readonly detail: string;
}

/**
 * A place tendril would keep its own files in (or run a program from) is
 * one another account could change: a directory on the way is another
 * account's, or writable by others without being sticky. The message
 * names the place, the path at fault, its owner, and what to do.
 */
export class UnsafePlaceError extends TendrilError {
  /** The path at fault (a directory, file or link on the way to the place). */
  readonly path: string;
  /** Its owner's user ID; -1 when unknown. */
  readonly owner: number;
  /** Which rule it breaks: `'owner'`, `'writable'`, `'missing'`, `'not-absolute'`, `'not-directory'`, `'links'` or `'unusable'`. */
  readonly reason: PlaceReason;

  /**
   * @param what the place, e.g. `'the context tmpdir'`.
   * @param problem what is wrong, from `placeProblem`.
   * @param advice what to do, e.g. `'set TMPDIR to a directory of your own'`.
   * @param others further places tried, each described (for a choice among several).
   */
  constructor(what: string, problem: PlaceProblem, advice: string, others: readonly string[] = []) {
    super(
      `${what}: ${describeProblem(problem)}, so another account could put its own files in its place${
        others.length > 0 ? `; also tried: ${others.join('; ')}` : ''
      }; ${advice}`,
      'ERR_TENDRIL_UNSAFE_PLACE',
    );
    this.path = problem.path;
    this.owner = problem.owner;
    this.reason = problem.reason;
  }
}

registerRemoteErrors({ UnsafePlaceError });

/** `problem` as a message says it: `/home/bob/tmp is owned by uid 1001`. */
export function describeProblem(problem: PlaceProblem): string {
  return `${problem.path} ${problem.detail}`;
}

/** This process's effective user ID; undefined on a platform without one. */
export function effectiveUid(): number | undefined {
  return process.geteuid?.();
}

/** How a checked path ends, for `placeProblem`. */
export interface PlaceOptions {
  /** The account that must control it. Default this process's effective user. */
  uid?: number;
  /**
   * Whether a path that does not exist (yet) passes, when the directory it
   * would be made in admits no other account. Default false.
   */
  allowMissing?: boolean;
  /**
   * Whether the last entry's mode is left unjudged (only its owner is): for
   * a socket, whose write permission lets others connect to it, not
   * replace it. Default false.
   */
  anyModeAtEnd?: boolean;
}

/** The physical path a trusted place resolved to, or what is wrong with it. */
export type PlaceCheck = { readonly real: string; readonly stats?: fs.Stats } | { readonly problem: PlaceProblem };

/**
 * Resolves `path` as the kernel would, one component and one link at a
 * time, and checks each entry on the way against the rules in the
 * module's comment.
 * @returns the physical path (and the last entry's stats, when it
 *   exists), or the first problem found. Never throws.
 */
export function checkPlace(path: string, options: PlaceOptions = {}): PlaceCheck {
  const uid = options.uid ?? effectiveUid();
  if (!path.startsWith('/')) return problem(path, -1, 'not-absolute', 'is not an absolute path');
  if (uid === undefined) return { real: path };
  try {
    return walk(path, uid, options.allowMissing === true, options.anyModeAtEnd === true);
  } catch (error) {
    // Changed while it was walked (a directory removed, a link replaced).
    return problem(path, -1, 'unusable', `cannot be examined (${(error as Error).message})`);
  }
}

function walk(path: string, uid: number, allowMissing: boolean, anyModeAtEnd: boolean): PlaceCheck {
  let stats: fs.Stats;
  try {
    stats = fs.lstatSync('/');
  } catch (error) {
    return problem('/', -1, 'unusable', `cannot be examined (${(error as Error).message})`);
  }
  const bad = ruleBroken('/', stats, uid);
  if (bad) return { problem: bad };
  let real = '';
  const pending = path.split('/').reverse();
  let links = 0;
  while (pending.length > 0) {
    const name = pending.pop() as string;
    if (name === '' || name === '.') continue;
    if (name === '..') {
      // The physical parent, as the kernel takes `..` after a link.
      real = real.slice(0, real.lastIndexOf('/'));
      // Checked on the way down; its stats are what a missing entry below it is judged by.
      stats = fs.lstatSync(real || '/');
      continue;
    }
    const next = `${real}/${name}`;
    let entry: fs.Stats;
    try {
      entry = fs.lstatSync(next);
    } catch (error) {
      const code = (error as NodeJS.ErrnoException).code;
      if (code === 'ENOENT' && allowMissing && !pending.includes('..')) {
        // Only whoever may write the directory it would be made in can make it.
        if (writableByOthers(stats)) {
          return problem(next, -1, 'missing', `does not exist, and another account may make it in ${real || '/'}`);
        }
        return { real: [next, ...pending.reverse().filter((part) => part !== '' && part !== '.')].join('/') };
      }
      if (code === 'ENOENT') return problem(next, -1, 'missing', 'does not exist');
      if (code === 'ENOTDIR') return problem(real || '/', stats.uid, 'not-directory', 'is not a directory');
      return problem(next, -1, 'unusable', `cannot be examined (${(error as Error).message})`);
    }
    if (entry.isSymbolicLink()) {
      // A link's own mode means nothing; who made it does (in a sticky directory, anyone may have).
      if (entry.uid !== 0 && entry.uid !== uid) return problem(next, entry.uid, 'owner', ownedBy(entry.uid));
      if (++links > MAX_LINKS) return problem(next, entry.uid, 'links', `leads through more than ${MAX_LINKS} links`);
      const target = fs.readlinkSync(next);
      if (target.startsWith('/')) real = '';
      pending.push(...target.split('/').reverse());
      continue;
    }
    const broken = ruleBroken(next, entry, uid);
    if (
      broken &&
      !(anyModeAtEnd && broken.reason === 'writable' && pending.every((part) => part === '' || part === '.'))
    ) {
      return { problem: broken };
    }
    real = next;
    stats = entry;
  }
  return { real: real || '/', stats };
}

/** The problem with `path`, or undefined when it is a trusted place (see `checkPlace`). */
export function placeProblem(path: string, options: PlaceOptions = {}): PlaceProblem | undefined {
  const check = checkPlace(path, options);
  return 'problem' in check ? check.problem : undefined;
}

/**
 * The physical path of `path` when it is a trusted place (see the module's comment).
 * @param what the place, for the error: `'the runtime cache'`.
 * @param advice what to do when it is not.
 * @throws UnsafePlaceError when it is not.
 */
export function trustedPath(path: string, what: string, advice: string, options: PlaceOptions = {}): string {
  const check = checkPlace(path, options);
  if ('problem' in check) throw new UnsafePlaceError(what, check.problem, advice);
  return check.real;
}

/**
 * A directory of this account's own below `root`: `root` must be a
 * trusted place (see the module's comment), and each of `below` under it
 * is made (mode 0700) where missing, and must then be a directory of this
 * account's that neither group nor others may write. From then on no
 * other account can change it, so its path may be used without checking
 * again.
 * @param root an absolute path: the home, XDG_CACHE_HOME, a temporary directory...
 * @param below the directories under it, outermost first.
 * @param what the place, for the error.
 * @param advice what to do when it cannot be had.
 * @returns its physical path.
 * @throws UnsafePlaceError when `root` is not trusted, or a directory below cannot be made or is not this account's alone.
 */
export function privateDirectory(root: string, below: readonly string[], what: string, advice: string): string {
  const uid = effectiveUid();
  let path = trustedPath(root, what, advice);
  if (uid === undefined) {
    for (const name of below) {
      path = join(path, name);
      fs.mkdirSync(path, { recursive: true, mode: 0o700 });
    }
    return path;
  }
  for (const name of below) {
    path = join(path, name);
    try {
      fs.mkdirSync(path, 0o700);
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== 'EEXIST') {
        throw new UnsafePlaceError(
          what,
          { path, owner: -1, reason: 'unusable', detail: `cannot be made (${(error as Error).message})` },
          advice,
        );
      }
    }
    const stats = fs.lstatSync(path);
    const broken = !stats.isDirectory()
      ? { reason: 'not-directory' as const, detail: 'is not a directory' }
      : stats.uid !== uid
        ? { reason: 'owner' as const, detail: `${ownedBy(stats.uid)}, not by this account (uid ${uid})` }
        : writableByOthers(stats)
          ? { reason: 'writable' as const, detail: 'may be written by group or others' }
          : undefined;
    if (broken) throw new UnsafePlaceError(what, { path, owner: stats.uid, ...broken }, advice);
  }
  return path;
}

/** The system's temporary directories tried after `os.tmpdir()` (TMPDIR, else /tmp). */
export const SYSTEM_TEMPORARY_DIRECTORIES: readonly string[] = ['/tmp', '/var/tmp', '/dev/shm'];

/**
 * The first trusted temporary directory this account may write in:
 * `os.tmpdir()` (TMPDIR, TMP or TEMP, else /tmp), then /tmp, /var/tmp
 * and /dev/shm. One another account could change (a TMPDIR kept from the
 * account `su` was run from) is passed over for the next.
 * @param what the place wanted in it, for the error.
 * @returns its physical path.
 * @throws UnsafePlaceError naming each one tried when none will do.
 */
export function temporaryDirectory(what: string): string {
  const tried: PlaceProblem[] = [];
  const candidates = [os.tmpdir(), ...SYSTEM_TEMPORARY_DIRECTORIES];
  for (const candidate of candidates.filter((path, i) => candidates.indexOf(path) === i)) {
    const check = checkPlace(candidate);
    if ('problem' in check) {
      tried.push(check.problem);
      continue;
    }
    try {
      if (check.stats && !check.stats.isDirectory()) throw new Error('not a directory');
      fs.accessSync(check.real, fs.constants.W_OK | fs.constants.X_OK);
      return check.real;
    } catch (error) {
      tried.push({
        path: check.real,
        owner: check.stats?.uid ?? -1,
        reason: 'unusable',
        detail: `cannot be written in (${(error as Error).message})`,
      });
    }
  }
  const [first, ...others] = tried as [PlaceProblem, ...PlaceProblem[]];
  throw new UnsafePlaceError(
    what,
    first,
    'set TMPDIR to a directory of this account that no other account can change (or unset it to use /tmp)',
    others.map(describeProblem),
  );
}

/** What is wrong with `stats` of `path` on the way to a place, for `uid`; undefined when nothing. */
function ruleBroken(path: string, stats: fs.Stats, uid: number): PlaceProblem | undefined {
  if (stats.uid !== 0 && stats.uid !== uid)
    return { path, owner: stats.uid, reason: 'owner', detail: ownedBy(stats.uid) };
  if (writableByOthers(stats) && !(stats.isDirectory() && (stats.mode & 0o1000) !== 0)) {
    return {
      path,
      owner: stats.uid,
      reason: 'writable',
      detail: 'may be written by group or others and is not sticky',
    };
  }
  return undefined;
}

function writableByOthers(stats: fs.Stats): boolean {
  return (stats.mode & 0o022) !== 0;
}

function ownedBy(uid: number): string {
  return `is owned by another account (uid ${uid})`;
}

function problem(path: string, owner: number, reason: PlaceReason, detail: string): { problem: PlaceProblem } {
  return { problem: { path, owner, reason, detail } };
}
