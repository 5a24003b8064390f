import * as fs from 'node:fs';
import * as os from 'node:os';
import { join } from 'node:path';
import { markOwn } from './process-state.js';

/**
 * One temporary directory per context run (Mitogen learned to make one
 * per run, not per task): made on first use with mode 0700 under the
 * target's temporary directory, shared by every call, and removed as the
 * context exits: at shutdown, when its parent (the master) goes away, and
 * on SIGTERM. Only SIGKILL leaves it behind.
 */
let directory: string | undefined;

/**
 * This context's temporary directory, made now if it has none (or it was
 * removed meanwhile).
 * @throws Error from `mkdtemp` when the temporary directory is not writable.
 */
export function contextTmpdir(): string {
  if (directory !== undefined && fs.existsSync(directory)) return directory;
  const made = fs.mkdtempSync(join(os.tmpdir(), 'tendril-'));
  if (directory === undefined) {
    process.on('exit', markOwn(removeTmpdir));
    // Only now: a context without the directory keeps SIGTERM's default.
    process.on(
      'SIGTERM',
      markOwn(() => {
        removeTmpdir();
        process.exit(143);
      }),
    );
  }
  directory = made;
  return made;
}

function removeTmpdir(): void {
  if (directory === undefined) return;
  try {
    // rmSync is missing before Node 14.14; rmdirSync's recursive option is there from 12.10.
    const rm = (fs as { rmSync?: typeof fs.rmSync }).rmSync;
    if (rm) rm(directory, { recursive: true, force: true });
    else fs.rmdirSync(directory, { recursive: true });
  } catch {
    // What is left is under the system's temporary directory, which is cleaned in time.
  }
}
