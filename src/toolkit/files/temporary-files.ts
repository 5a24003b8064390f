/**
 * Files are written under a temporary name beside their real one and
 * renamed once checked; these are the names, and their removal when the
 * process exits in the middle of a transfer.
 */
import { randomBytes } from 'node:crypto';
import { type promises as fs, unlinkSync } from 'node:fs';
import { basename, dirname, join } from 'node:path';
import { markOwn } from '../../core/process-state.js';

/**
 * Temporary files being written in this process. A context told to shut
 * down exits without waiting for its transfers to fail, so whatever is
 * still here then is removed as the process exits.
 */
const pendingTemporaryFiles = new Set<string>();
let removingAtExit = false;

/** Remembers the temporary file at `path`, to be removed if the process exits before `forgetTemporaryFile(path)`. */
export function writingTemporaryFile(path: string): void {
  if (!removingAtExit) {
    removingAtExit = true;
    process.on(
      'exit',
      markOwn(() => {
        for (const temp of pendingTemporaryFiles) {
          try {
            unlinkSync(temp);
          } catch {
            // Already gone.
          }
        }
      }),
    );
  }
  pendingTemporaryFiles.add(path);
}
/** A temporary name beside `path`, in the same directory so that the rename is atomic. */
export function tempName(path: string): string {
  return join(dirname(path), `.${basename(path).slice(0, 200)}.${randomBytes(6).toString('hex')}.tendril-tmp`);
}

/**
 * Writes all of `data` at `position` in the file (default: the handle's
 * position), however many writes it takes (a write may take part of it).
 */
export async function writeAll(handle: fs.FileHandle, data: Uint8Array, position?: number): Promise<void> {
  let offset = 0;
  while (offset < data.length) {
    const at = position === undefined ? null : position + offset;
    const { bytesWritten } = await handle.write(data, offset, data.length - offset, at);
    offset += bytesWritten;
  }
}

/** The temporary file at `path` was renamed or removed: nothing to remove at exit. */
export function forgetTemporaryFile(path: string): void {
  pendingTemporaryFiles.delete(path);
}
