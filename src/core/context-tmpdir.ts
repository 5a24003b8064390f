import * as fs from 'node:fs';
import { join } from 'node:path';
import { temporaryDirectory } from './private-directory.js';
import { isOwnListener, markOwn } from './process-state.js';

/**
 * One temporary directory per context run (Mitogen learned to make one
 * per run, not per task): made on first use with mode 0700 under the
 * target's temporary directory, shared by every call, and removed as the
 * context exits: at shutdown, when its parent (the master) goes away, and
 * on SIGTERM. Only SIGKILL leaves it behind.
 *
 * The temporary directory it is made in must be one no other account can
 * change (private-directory.ts): a TMPDIR that `su` kept from the account
 * it was run from names a directory that account owns, which could rename
 * this one aside and put its own in its place, to read what is written
 * there next and replace scripts before they run. Such a TMPDIR is passed
 * over for /tmp, /var/tmp or /dev/shm.
 */
let directory: string | undefined;
/** Its device and inode as made: a name in a shared /tmp that someone else made since is not it. */
let identity = '';

/** Whether `path` is still the directory this context made: not a symlink, its own, mode 0700. */
function stillOurs(path: string): boolean {
  try {
    const stat = fs.lstatSync(path);
    return stat.isDirectory() && `${stat.dev}:${stat.ino}` === identity && (stat.mode & 0o777) === 0o700;
  } catch {
    return false;
  }
}

/**
 * This context's temporary directory, made now if it has none (or it was
 * removed meanwhile): under the first of `os.tmpdir()`, /tmp, /var/tmp
 * and /dev/shm that no other account can change.
 * @throws UnsafePlaceError when none of them will do, naming each and why.
 */
export function contextTmpdir(): string {
  if (directory !== undefined && stillOurs(directory)) return directory;
  const made = fs.mkdtempSync(join(temporaryDirectory("the context's temporary directory"), 'tendril-'));
  const stat = fs.lstatSync(made);
  if (directory === undefined) {
    process.on('exit', markOwn(removeTmpdir));
    // Only now: a context without the directory keeps SIGTERM's default.
    process.on(
      'SIGTERM',
      markOwn(() => {
        removeTmpdir();
        // Exiting is SIGTERM's default; a listener of the program's own decides instead.
        if (process.listeners('SIGTERM').every(isOwnListener)) process.exit(143);
      }),
    );
  }
  directory = made;
  identity = `${stat.dev}:${stat.ino}`;
  return made;
}

function removeTmpdir(): void {
  if (directory === undefined || !stillOurs(directory)) return;
  try {
    // rmSync is missing before Node 14.14; rmdirSync's recursive option is there from 12.10.
    const rm = (fs as { rmSync?: typeof fs.rmSync }).rmSync;
    if (rm) rm(directory, { recursive: true, force: true });
    else fs.rmdirSync(directory, { recursive: true });
  } catch {
    // What is left is under the system's temporary directory, which is cleaned in time.
  }
}
