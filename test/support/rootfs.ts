/**
 * The test image as a directory tree: what LXC containers (as the lower
 * layer of their overlay root) and chroot run in. Unpacked from the cached
 * tarball (test/support/containers.ts) into a directory the caller owns and
 * removes; about 4 s and 560 MB.
 */
import { execFileSync } from 'node:child_process';
import { mkdirSync } from 'node:fs';
import { nodeImageTarball } from './containers.js';

/**
 * Unpacks the test image into `dir` (created if missing), owners and
 * modes as in the image (this runs as root).
 * @throws Error quoting tar when it fails.
 */
export function unpackNodeImage(dir: string): string {
  mkdirSync(dir, { recursive: true });
  try {
    execFileSync(
      'tar',
      ['--extract', '--same-owner', '--preserve-permissions', '--file', nodeImageTarball(), '--directory', dir],
      {
        stdio: ['ignore', 'ignore', 'pipe'],
      },
    );
  } catch (error) {
    const stderr = String((error as { stderr?: Buffer }).stderr ?? '').trim();
    throw new Error(`the test image could not be unpacked into ${dir}: ${stderr || (error as Error).message}`);
  }
  return dir;
}
