import { promises as fs } from 'node:fs';
import { connect } from 'node:net';
import { dirname, resolve } from 'node:path';
import { ListenerError } from './errors.js';

/** Longest socket path the kernel accepts (sun_path, less its terminating NUL), in bytes. */
export const MAX_SOCKET_PATH = 107;

/**
 * Makes `path` ready to listen on: its directory exists, belongs to this
 * user and admits nobody else (created with mode 0700 when missing); a
 * stale socket left by a master that died is removed; a live one is not.
 * @returns the absolute path.
 * @throws ListenerError when the directory is shared or not a directory,
 *   the path is too long, another master listens there
 *   (`ERR_TENDRIL_LISTENER_IN_USE`), or something else than a socket is there.
 */
export async function prepareSocketPath(path: string): Promise<string> {
  const absolute = resolve(path);
  if (Buffer.byteLength(absolute) > MAX_SOCKET_PATH) {
    throw new ListenerError(
      absolute,
      `cannot listen on ${absolute}: a UNIX socket path may have at most ${MAX_SOCKET_PATH} bytes; choose a shorter one`,
    );
  }
  await privateDirectory(absolute);
  await removeStale(absolute);
  return absolute;
}

async function privateDirectory(socketPath: string): Promise<void> {
  const directory = dirname(socketPath);
  let stat = await fs.lstat(directory).catch((error: NodeJS.ErrnoException) => {
    if (error.code === 'ENOENT') return undefined;
    throw new ListenerError(socketPath, `cannot listen on ${socketPath}: ${error.message}`, undefined, {
      cause: error,
    });
  });
  if (!stat) {
    await fs.mkdir(directory, { recursive: true, mode: 0o700 });
    stat = await fs.lstat(directory);
  }
  const euid = process.geteuid?.();
  const problem = !stat.isDirectory()
    ? 'it is not a directory'
    : euid !== undefined && stat.uid !== euid
      ? `it belongs to uid ${stat.uid}, not to this process's user (uid ${euid})`
      : (stat.mode & 0o077) !== 0
        ? `its mode is ${(stat.mode & 0o777).toString(8).padStart(4, '0')}, so other users can reach it`
        : undefined;
  if (problem) {
    throw new ListenerError(
      socketPath,
      `cannot listen on ${socketPath}: its directory ${directory} must be private to this user (mode 0700), but ${problem}; use a directory of its own, which listen() creates when it does not exist`,
    );
  }
}

async function removeStale(socketPath: string): Promise<void> {
  const stat = await fs.lstat(socketPath).catch(() => undefined);
  if (!stat) return;
  if (!stat.isSocket()) {
    throw new ListenerError(
      socketPath,
      `cannot listen on ${socketPath}: something other than a socket is there; it was left alone, remove it or choose another path`,
    );
  }
  if (await isLive(socketPath)) {
    throw new ListenerError(
      socketPath,
      `cannot listen on ${socketPath}: another process is listening there; close it, or choose another path`,
      'ERR_TENDRIL_LISTENER_IN_USE',
    );
  }
  // Nobody answers: a master that died left it.
  await fs.unlink(socketPath).catch((error: NodeJS.ErrnoException) => {
    if (error.code !== 'ENOENT') throw error;
  });
}

/** True when a process accepts connections on `socketPath`. */
function isLive(socketPath: string): Promise<boolean> {
  return new Promise((resolve) => {
    const probe = connect(socketPath);
    probe.once('connect', () => {
      probe.destroy();
      resolve(true);
    });
    probe.once('error', (error: NodeJS.ErrnoException) => {
      // ECONNREFUSED: nobody listens; anything else (EACCES...) is not ours to judge, so treat it as live.
      resolve(error.code !== 'ECONNREFUSED');
    });
  });
}
