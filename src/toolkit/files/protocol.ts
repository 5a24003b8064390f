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

/**
 * Bytes per data message. Measured with a 256 MiB local copy (master to
 * child): 256 KiB was clearly slower, 512 KiB to 2 MiB about alike within
 * the noise; 1 MiB keeps per-message costs low and what each hop holds
 * small (a window of 8 MiB).
 */
export const CHUNK_SIZE = 1024 * 1024;
/** Most entries (files, directories, links) one transfer may carry. */
export const MAX_ENTRIES = 1_000_000;
/** Longest relative path in a transfer, and longest name component (bytes). */
export const MAX_PATH = 4096;
export const MAX_NAME = 255;

/** What the receiving side learns first: the shape and size of what comes. */
export interface Begin {
  t: 'begin';
  /** What the source path is. */
  kind: 'file' | 'dir' | 'link';
  /** Its base name: where it goes when the target is an existing directory. */
  name: string;
  files: number;
  directories: number;
  links: number;
  /** Total bytes of file data. */
  bytes: number;
}
/** Owner and group, sent when `preserve` asks for them. */
export interface Owner {
  u?: number;
  g?: number;
}
/** A directory (`p` relative to the root; `''` is the root). */
export interface DirEntry extends Owner {
  t: 'd';
  p: string;
  m: number;
  mt: number;
}
/** A file; its data follows, then `e`. `s` is -1 when unknown in advance (a write stream). */
export interface FileEntry extends Owner {
  t: 'f';
  p: string;
  s: number;
  m: number;
  mt: number;
}
/** End of a file's data: its size and SHA-256 (hex) as the sender read it. */
export interface FileEnd {
  t: 'e';
  n: number;
  h: string;
}
export interface LinkEntry extends Owner {
  t: 'l';
  p: string;
  to: string;
  mt: number;
}
export interface End {
  t: 'end';
}
export type Entry = Begin | DirEntry | FileEntry | FileEnd | LinkEntry | End;
export type Value = Entry | Uint8Array;

/**
 * Where values go: a Channel end, or a tee of several. Once one send has
 * resolved, later sends must have taken (encoded) their value by the time
 * they return, as a Channel whose other end is known does: the sender
 * reuses its read buffer.
 */
export interface Output {
  send(value: Value): Promise<void>;
}

/** Counts of a finished transfer (`TransferResult` without its duration). */
export interface TransferCounts {
  files: number;
  directories: number;
  links: number;
  bytes: number;
  /** SHA-256 (hex) of the file, when one file was transferred. */
  sha256?: string;
}
/** A source of values: the next one, or done when the sending side closed. */
export type Input = AsyncIterator<unknown>;

export function isEntry<K extends Entry['t']>(value: unknown, t: K): value is Extract<Entry, { t: K }> {
  return typeof value === 'object' && value !== null && !(value instanceof Uint8Array) && (value as Entry).t === t;
}

export function isCount(value: unknown): value is number {
  return typeof value === 'number' && Number.isSafeInteger(value) && value >= 0;
}

export function isId(value: unknown): value is number {
  return isCount(value) && value < 2 ** 32;
}

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

export function checkMeta(entry: { m: unknown; mt: unknown }, bad: (path: string, why: string) => Error): void {
  if (!isCount(entry.m) || entry.m > 0o7777) throw bad('', 'a mode is not a mode');
  if (typeof entry.mt !== 'number' || !Number.isFinite(entry.mt)) throw bad('', 'an mtime is not a time');
}
