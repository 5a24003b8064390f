/**
 * How a file or a tree travels: the values, their bounds and their checks.
 * Both ends use it: `sendPath` (./send.ts) reads and sends, `receiveInto`
 * (./sink.ts) receives and writes. The same code runs in the master (copy
 * sends, fetch receives) and in children (the reverse), so it uses only
 * Node builtins that Node 12 has, and src/core.
 *
 * A transfer is a sequence of values on a Channel (flow-controlled):
 *   begin, then entries in pre-order (a directory before what it holds):
 *   dir | link | file followed by its data chunks (Buffers) and `e` (its
 *   size and SHA-256, as the sender read it), then `end`.
 * The sink trusts nothing in it: see `receiveInto`.
 */
import type { Channel } from '../../core/channel.js';
import { SEND_BYTES } from '../../core/symbols.js';

/**
 * Bytes per data message. Measured with a 256 MiB local copy (master to
 * child): 256 KiB was clearly slower, 512 KiB to 2 MiB about alike within
 * the noise; 1 MiB keeps per-message costs low and what each hop holds
 * small (a window of 8 MiB).
 */
export const CHUNK_SIZE = 1024 * 1024;
/** Most entries (files, directories, links) one transfer may carry. */
export const MAX_ENTRIES = 1_000_000;
/** Longest relative path in a transfer, in bytes (UTF-8). */
export const MAX_PATH = 4096;
/** Longest name (one path component) in a transfer, in bytes: what most file systems allow. */
export const MAX_NAME = 255;

/** What the receiving side learns first: the shape and size of what comes. */
export interface Begin {
  /** Tags the value (see `isEntry`). */
  t: 'begin';
  /** What the source path is. */
  kind: 'file' | 'dir' | 'link';
  /**
   * Its base name: where it goes when the target is an existing directory.
   * Checked as one path component; with `SinkOptions.name`, it must be that name.
   */
  name: string;
  /**
   * Regular files that follow. With `directories` and `links`, at most
   * `MAX_ENTRIES`; the receiver refuses entries past the three together.
   */
  files: number;
  /** Directories that follow, the root included when it is one. */
  directories: number;
  /** Symlinks that follow. */
  links: number;
  /**
   * Total bytes of file data. The receiver refuses data past it, and a
   * different total at the end, unless a file's size was unknown (-1).
   */
  bytes: number;
}
/**
 * Owner and group, sent when `preserve` asks for them. The receiver
 * applies them only when asked (`SinkOptions.owner`), when it runs as
 * root, and when both are IDs below 2^32; else it ignores them.
 */
export interface Owner {
  /** User ID of the owner. */
  u?: number;
  /** Group ID. */
  g?: number;
}
/** A directory (`p` relative to the root; `''` is the root). */
export interface DirEntry extends Owner {
  /** Tags the value (see `isEntry`). */
  t: 'd';
  /**
   * Its path relative to the transfer's root, `''` for the root. Checked
   * by `checkRelative`; its parent must be a directory of this transfer
   * still open, and it must sort after the entry before it there.
   */
  p: string;
  /**
   * Permission bits (`mode & 0o7777`), at most 0o7777. From an untrusted
   * sender they lose setuid, setgid and sticky and get the receiver's
   * umask, unless `owner` is asked for.
   */
  m: number;
  /** Modification time, in ms since the epoch (`mtimeMs`): any finite number. Applied once the directory is done. */
  mt: number;
}
/** A file; its data follows, then `e`. `s` is -1 when unknown in advance (a write stream). */
export interface FileEntry extends Owner {
  /** Tags the value (see `isEntry`). */
  t: 'f';
  /** Its path relative to the root, `''` when the transfer is this one file; checked as a directory's `p`. */
  p: string;
  /**
   * Its size in bytes, or -1 when unknown (refused from an untrusted
   * sender). Data past it, or past the transfer's `bytes`, is refused as it comes.
   */
  s: number;
  /** Permission bits, checked and applied as a directory's `m` (`SinkOptions.mode` replaces them). */
  m: number;
  /** Modification time, in ms since the epoch: any finite number. */
  mt: number;
}
/** End of a file's data: its size and SHA-256 (hex) as the sender read it. */
export interface FileEnd {
  /** Tags the value (see `isEntry`). */
  t: 'e';
  /** Bytes the sender read: must equal the bytes written and, when known, the file's `s`. */
  n: number;
  /** SHA-256 (lowercase hex) of the bytes read: must equal that of the bytes written, else the file is not kept. */
  h: string;
}
/** A symlink: created as sent under a temporary name and renamed, never followed. */
export interface LinkEntry extends Owner {
  /** Tags the value (see `isEntry`). */
  t: 'l';
  /** Its path relative to the root, `''` when the transfer is this link; checked as a directory's `p`. */
  p: string;
  /** What it points to, as `readlink` gave it: 1 to `MAX_PATH` characters, no NUL; relative or absolute. */
  to: string;
  /** Modification time of the link itself, in ms since the epoch (applied where `lutimes` exists). */
  mt: number;
}
/**
 * The last value of a transfer. A channel that closes without it tells
 * the receiver the transfer failed: it keeps no partial file.
 */
export interface End {
  /** Tags the value (see `isEntry`). */
  t: 'end';
}
/** A value of a transfer other than file data. */
export type Entry = Begin | DirEntry | FileEntry | FileEnd | LinkEntry | End;
/** What a transfer's channel carries: an entry, or a chunk of file data (at most `CHUNK_SIZE` bytes from `sendPath`). */
export type Value = Entry | Uint8Array;

/**
 * Where values go: a Channel end (`channelOutput`), or a tee of several.
 * File data (a `Uint8Array`) is handed over, sent as it is without a copy
 * (`SEND_BYTES`): the sender does not change a chunk once sent, until
 * `release` says every receiving side has read it.
 */
export interface Output {
  /**
   * Sends `value`; resolves when the receiving side can take more (flow
   * control). For file data, `release` is called once every receiving
   * side has read it (never if one fails first): the buffer may be reused.
   */
  send(value: Value, release?: () => void): Promise<void>;
}

/** Sends on `channel`, file data as it is (`SEND_BYTES`). */
export function sendValue(channel: Channel<Value, unknown>, value: Value, release?: () => void): Promise<void> {
  return value instanceof Uint8Array ? channel[SEND_BYTES](value, release) : channel.send(value);
}

/** An `Output` over one channel end. */
export function channelOutput(channel: Channel<Value, unknown>): Output {
  return { send: (value, release) => sendValue(channel, value, release) };
}

/** Counts of a finished transfer (`TransferResult` without its duration). */
export interface TransferCounts {
  /** Regular files written. */
  files: number;
  /** Directories created or merged into, the root included. */
  directories: number;
  /** Symlinks created. */
  links: number;
  /** Bytes of file data written. */
  bytes: number;
  /** SHA-256 (hex) of the file, when one file was transferred. */
  sha256?: string;
}
/** A source of values: the next one, or done when the sending side closed. */
export type Input = AsyncIterator<unknown>;

/** Whether `value` is an entry tagged `t`; only the tag is checked, the fields where they are used. */
export function isEntry<K extends Entry['t']>(value: unknown, t: K): value is Extract<Entry, { t: K }> {
  return typeof value === 'object' && value !== null && !(value instanceof Uint8Array) && (value as Entry).t === t;
}

/** Whether `value` is a safe integer of at least 0: a count, size or mode as sent. */
export function isCount(value: unknown): value is number {
  return typeof value === 'number' && Number.isSafeInteger(value) && value >= 0;
}

/** Whether `value` is a count below 2^32: a user or group ID. */
export function isId(value: unknown): value is number {
  return isCount(value) && value < 2 ** 32;
}

/**
 * Checks the first value of a transfer: a `begin` of a known kind, a
 * `name` that is one path component (`checkRelative`, no slash), counts
 * that are counts, and at most `MAX_ENTRIES` entries in all.
 * @returns `value`, as a `Begin`.
 * @throws what `bad(path, why)` returns, at the first thing wrong.
 */
export function checkBegin(value: unknown, bad: (path: string, why: string) => Error): Begin {
  if (!isEntry(value, 'begin')) throw bad('', 'it did not start with its description');
  const { kind, name, files, directories, links, bytes } = value;
  if (kind !== 'file' && kind !== 'dir' && kind !== 'link') throw bad('', 'unknown kind');
  if (typeof name !== 'string') throw bad('', 'no name');
  checkRelative(name, (why) => bad(name, why));
  if (name.indexOf('/') >= 0) throw bad(name, 'its name has a slash');
  if (!isCount(files) || !isCount(directories) || !isCount(links) || !isCount(bytes)) throw bad('', 'bad counts');
  if (files + directories + links > MAX_ENTRIES) throw bad('', `more than ${MAX_ENTRIES} entries`);
  return value;
}

/** Checks a relative path: no absolute, empty, `.` or `..` parts, no NUL, bounded lengths. */
export function checkRelative(rel: string, bad: (why: string) => Error): void {
  if (rel.length === 0 || Buffer.byteLength(rel) > MAX_PATH) throw bad('a path is empty or too long');
  if (rel.indexOf('\0') >= 0) throw bad('a path contains NUL');
  if (rel[0] === '/') throw bad(`an absolute path: ${rel.slice(0, 200)}`);
  for (const part of rel.split('/')) {
    if (part === '' || part === '.' || part === '..')
      throw bad(`a path with an empty, . or .. part: ${rel.slice(0, 200)}`);
    if (Buffer.byteLength(part) > MAX_NAME) throw bad('a name longer than 255 bytes');
  }
}

/**
 * Checks an entry's permission bits (`m`, an integer from 0 to 0o7777) and
 * modification time (`mt`, a finite number of ms).
 * @throws what `bad('', why)` returns.
 */
export function checkMeta(entry: { m: unknown; mt: unknown }, bad: (path: string, why: string) => Error): void {
  if (!isCount(entry.m) || entry.m > 0o7777) throw bad('', 'a mode is not a mode');
  if (typeof entry.mt !== 'number' || !Number.isFinite(entry.mt)) throw bad('', 'an mtime is not a time');
}
