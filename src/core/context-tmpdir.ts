import * as fs from 'node:fs';
import * as os from 'node:os';
import { join } from 'node:path';
import { isOwnListener, markOwn } from './process-state.js';

/**
 * One temporary directory per context run (Mitogen learned to make one
 * per run, not per task): made on first use with mode 0700 under the
 * target's temporary directory, shared by every call, and removed as the
 * context exits: at shutdown, when its parent (the master) goes away, and
 * on SIGTERM. Only SIGKILL leaves it behind.
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
 * removed meanwhile).
 * @throws Error from `mkdtemp` when the temporary directory is not writable.
 */
export function contextTmpdir(): string {
  if (directory !== undefined && stillOurs(directory)) return directory;
  const made = fs.mkdtempSync(join(os.tmpdir(), 'tendril-'));
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
