/**
 * Opening a file at a path that other processes of the account (a job,
 * a program the user ran, whoever else can write the directory) could
 * have replaced: by a FIFO, whose open(2) blocks until a writer comes and
 * would wedge the context (its calls run on one thread); by a device; or
 * by a symbolic link to a file this context must not read or append to.
 * The file is opened with O_NONBLOCK (a FIFO or a device opens at once
 * instead of waiting; it changes nothing for a regular file) and, unless
 * asked, O_NOFOLLOW, then the descriptor is checked with fstat: only a
 * regular file is read or written. The check is on what was opened, so no
 * rename between a check and the open can slip something else in.
 *
 * Runs in every context (the core ships it): synchronous, and only what
 * Node 12 has.
 */
import * as fs from 'node:fs';

/** What a path held instead of a regular file (`RegularFileError.code`). */
export const NOT_A_FILE = 'ERR_TENDRIL_NOT_A_FILE';
/** A regular file larger than the reader accepts (`RegularFileError.code`). */
export const FILE_TOO_LARGE = 'ERR_TENDRIL_FILE_TOO_LARGE';

/**
 * A path that must hold a regular file holds something else (a FIFO, a
 * device, a directory, a socket), or a larger one than may be read.
 * Opening errors (ENOENT, EACCES, ELOOP for a symbolic link that is not
 * followed) are thrown as Node gives them.
 */
export class RegularFileError extends Error {
  /** `ERR_TENDRIL_NOT_A_FILE` or `ERR_TENDRIL_FILE_TOO_LARGE`. */
  readonly code: string;
  /** The path, as given. */
  readonly path: string;
  /** What the path holds: `'fifo'`, `'directory'`, `'socket'`, `'device'`, `'other'`, or `'file'` (too large). */
  readonly kind: FileKind;

  /**
   * @param path the path, as given.
   * @param kind what it holds.
   * @param what what it is instead, e.g. `'a FIFO, not a regular file'`, or why it is refused.
   * @param code `NOT_A_FILE` or `FILE_TOO_LARGE`.
   */
  constructor(path: string, kind: FileKind, what: string, code: string = NOT_A_FILE) {
    super(`${path} is ${what}`);
    this.name = 'RegularFileError';
    this.code = code;
    this.path = path;
    this.kind = kind;
  }
}

/** What a path holds, as `RegularFileError.kind` names it. */
export type FileKind = 'file' | 'fifo' | 'directory' | 'socket' | 'device' | 'other';

/** Options of `openRegularFile` and `readRegularFile`. */
export interface RegularFileOptions {
  /**
   * Follow a symbolic link at the path's last component (to a regular
   * file). Default false: a link fails with Node's ELOOP error.
   */
  follow?: boolean;
  /**
   * Open for appending, creating the file with `mode` if it is missing,
   * instead of for reading. Default false.
   */
  append?: boolean;
  /** Mode of a file `append` creates. Default 0o600. */
  mode?: number;
}

const constants = fs.constants;
/** O_NONBLOCK and O_NOFOLLOW, where the platform has them (not Windows, which has no FIFOs to fear here). */
const NONBLOCK = constants.O_NONBLOCK ?? 0;
const NOFOLLOW = constants.O_NOFOLLOW ?? 0;

/** What `stats` are, and how an error says it. */
function kindOf(stats: fs.Stats): [FileKind, string] {
  if (stats.isFIFO()) return ['fifo', 'a FIFO, not a regular file'];
  if (stats.isDirectory()) return ['directory', 'a directory, not a regular file'];
  if (stats.isSocket()) return ['socket', 'a socket, not a regular file'];
  if (stats.isCharacterDevice() || stats.isBlockDevice()) return ['device', 'a device, not a regular file'];
  return ['other', 'not a regular file'];
}

/**
 * Opens `path` without blocking, and returns its descriptor once fstat
 * says it is a regular file (the caller closes it).
 * @returns the descriptor and what fstat said of it.
 * @throws RegularFileError `ERR_TENDRIL_NOT_A_FILE` when it is anything else (the descriptor is closed).
 * @throws Node's error from open(2): ENOENT, EACCES, ELOOP (a symbolic link not followed)...
 */
export function openRegularFile(path: string, options: RegularFileOptions = {}): { fd: number; stats: fs.Stats } {
  const flags =
    (options.append ? constants.O_WRONLY | constants.O_APPEND | constants.O_CREAT : constants.O_RDONLY) |
    NONBLOCK |
    (options.follow ? 0 : NOFOLLOW);
  const fd = fs.openSync(path, flags, options.mode ?? 0o600);
  let stats: fs.Stats;
  try {
    stats = fs.fstatSync(fd);
  } catch (error) {
    fs.closeSync(fd);
    throw error;
  }
  if (!stats.isFile()) {
    fs.closeSync(fd);
    throw new RegularFileError(path, ...kindOf(stats));
  }
  return { fd, stats };
}

/**
 * Reads bytes of the regular file open on `fd` from `position` into a new
 * Buffer of `length` (shorter when the file ended first): what a reader
 * keeps holds only these bytes, never a larger read they were cut from.
 */
export function readRange(fd: number, position: number, length: number): Buffer {
  const buffer = Buffer.alloc(length);
  let read = 0;
  while (read < length) {
    const got = fs.readSync(fd, buffer, read, length - read, position + read);
    if (got <= 0) break;
    read += got;
  }
  // A copy when the file ended early: a view would keep the whole allocation.
  return read === length ? buffer : Buffer.from(buffer.subarray(0, read));
}

/**
 * The whole of the regular file at `path` (see `openRegularFile`), at most
 * `maxBytes` of it.
 * @param maxBytes the largest file accepted. Default: no limit.
 * @throws RegularFileError `ERR_TENDRIL_NOT_A_FILE`, or `ERR_TENDRIL_FILE_TOO_LARGE` past `maxBytes`.
 * @throws Node's error from open(2) or read(2).
 */
export function readRegularFile(path: string, options: RegularFileOptions & { maxBytes?: number } = {}): Buffer {
  const { fd, stats } = openRegularFile(path, { follow: options.follow });
  try {
    const limit = options.maxBytes ?? Number.MAX_SAFE_INTEGER;
    if (stats.size > limit) {
      throw new RegularFileError(path, 'file', `${stats.size} bytes, more than the ${limit} accepted`, FILE_TOO_LARGE);
    }
    // As large as fstat said: what is appended meanwhile is the next reader's.
    return readRange(fd, 0, stats.size);
  } finally {
    fs.closeSync(fd);
  }
}
