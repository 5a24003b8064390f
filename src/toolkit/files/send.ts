/**
 * The sending side of a transfer (see ./protocol.ts): reads a file, tree
 * or symlink and sends it, hashing file data as it is read.
 */
import { createHash } from 'node:crypto';
import { promises as fs, type Stats } from 'node:fs';
import { basename, join } from 'node:path';
import { FileTransferError, fileError } from './errors.js';
import { type Begin, CHUNK_SIZE, MAX_ENTRIES, type Output, type Owner } from './protocol.js';

/** Options of the sending side. */
export interface SourceOptions {
  /** Send owner and group. */
  owner?: boolean;
  /**
   * Whether a directory is sent (as a tree). Default true: `source` is
   * sent as it is, a symlink as a link. False: the receiving side asked
   * for one file, so a symlink at `source` is followed (as `cp` and `scp`
   * do for a file) and what it leads to must be a regular file; a
   * directory fails with `EISDIR`.
   */
  recursive?: boolean;
  /** Called with each chunk's size once it has left. */
  onBytes?: (bytes: number) => void;
  /** Called with the description before anything else is sent. */
  onBegin?: (begin: Begin) => void;
}
interface Walked {
  path: string;
  rel: string;
  stats: Stats;
}

/**
 * Sends the file, directory tree or symlink at `source` to `out`: symlinks
 * as links (never followed, but for `source` itself when `recursive` is
 * false), files in chunks, hashed as they are read. Other kinds of file
 * (sockets, FIFOs, devices) in a tree are skipped.
 * @throws FileTransferError naming `contextName` and the path that failed.
 */
export async function sendPath(
  source: string,
  out: Output,
  contextName: string,
  options: SourceOptions = {},
): Promise<void> {
  let root: Stats;
  try {
    // One file asked for: the receiving side takes only a file, so a link is sent as what it leads to.
    root = options.recursive === false ? await fs.stat(source) : await fs.lstat(source);
  } catch (error) {
    throw fileError(error, contextName, source, 'cannot read');
  }
  if (root.isDirectory() && options.recursive === false) {
    throw new FileTransferError(
      'EISDIR',
      contextName,
      source,
      'cannot send it as a file: it is a directory (a tree is sent only when asked for: recursive)',
    );
  }
  const entries: Walked[] = [{ path: source, rel: '', stats: root }];
  if (root.isDirectory()) await walk(source, '', entries, contextName);
  else if (!root.isFile() && !root.isSymbolicLink()) {
    throw new FileTransferError(
      'ERR_TENDRIL_NOT_A_FILE',
      contextName,
      source,
      'cannot send: not a file, directory or symlink',
    );
  }
  const begin: Begin = {
    t: 'begin',
    kind: root.isDirectory() ? 'dir' : root.isFile() ? 'file' : 'link',
    name: basename(source),
    files: 0,
    directories: 0,
    links: 0,
    bytes: 0,
  };
  for (const { stats } of entries) {
    if (stats.isDirectory()) begin.directories++;
    else if (stats.isFile()) {
      begin.files++;
      begin.bytes += stats.size;
    } else begin.links++;
  }
  options.onBegin?.(begin);
  await out.send(begin);
  for (const entry of entries) {
    const owner = options.owner ? { u: entry.stats.uid, g: entry.stats.gid } : {};
    const mt = entry.stats.mtimeMs;
    if (entry.stats.isDirectory()) {
      await out.send({ t: 'd', p: entry.rel, m: entry.stats.mode & 0o7777, mt, ...owner });
    } else if (entry.stats.isSymbolicLink()) {
      let to: string;
      try {
        to = await fs.readlink(entry.path);
      } catch (error) {
        throw fileError(error, contextName, entry.path, 'cannot read the symlink');
      }
      await out.send({ t: 'l', p: entry.rel, to, mt, ...owner });
    } else {
      await sendFile(entry, out, contextName, options, owner);
    }
  }
  await out.send({ t: 'end' });
}

/** Lists the tree under `dir` in pre-order, bounded by MAX_ENTRIES. */
async function walk(dir: string, rel: string, into: Walked[], contextName: string): Promise<void> {
  let names: string[];
  try {
    names = (await fs.readdir(dir)).sort();
  } catch (error) {
    throw fileError(error, contextName, dir, 'cannot list the directory');
  }
  for (const name of names) {
    const path = join(dir, name);
    let stats: Stats;
    try {
      stats = await fs.lstat(path);
    } catch (error) {
      throw fileError(error, contextName, path, 'cannot read');
    }
    if (!stats.isDirectory() && !stats.isFile() && !stats.isSymbolicLink()) continue;
    if (into.length >= MAX_ENTRIES) {
      throw new FileTransferError('ERR_TENDRIL_TOO_MANY_ENTRIES', contextName, dir, `more than ${MAX_ENTRIES} entries`);
    }
    const child = rel ? `${rel}/${name}` : name;
    into.push({ path, rel: child, stats });
    if (stats.isDirectory()) await walk(path, child, into, contextName);
  }
}

/** Fills `chunk` from the handle's position, as far as the file goes: the bytes read. */
async function fill(handle: fs.FileHandle, chunk: Buffer): Promise<number> {
  let filled = 0;
  while (filled < chunk.length) {
    const { bytesRead } = await handle.read(chunk, filled, chunk.length - filled, null);
    if (bytesRead === 0) break;
    filled += bytesRead;
  }
  return filled;
}

/**
 * Sends one file's entry, its data in chunks, and its size and hash as
 * read. The next chunk is read (in the thread pool) while this one is
 * hashed and sent; each is read into a buffer of its own, handed over to
 * `out` (sent without a copy, see `Output`).
 */
async function sendFile(
  entry: Walked,
  out: Output,
  contextName: string,
  options: SourceOptions,
  owner: Owner,
): Promise<void> {
  let handle: fs.FileHandle;
  try {
    handle = await fs.open(entry.path, 'r');
  } catch (error) {
    throw fileError(error, contextName, entry.path, 'cannot read');
  }
  let reading: Promise<number> | undefined;
  try {
    const size = entry.stats.size;
    await out.send({ t: 'f', p: entry.rel, s: size, m: entry.stats.mode & 0o7777, mt: entry.stats.mtimeMs, ...owner });
    const hash = createHash('sha256');
    let chunk = Buffer.alloc(0);
    const readFrom = (from: number) => {
      chunk = Buffer.allocUnsafe(Math.min(CHUNK_SIZE, size - from));
      // Handled here: a read that fails while the one before is sent is reported when awaited.
      const read = fill(handle, chunk);
      read.catch(() => undefined);
      return read;
    };
    let sent = 0;
    if (size > 0) reading = readFrom(0);
    while (reading) {
      let filled: number;
      try {
        filled = await reading;
      } catch (error) {
        reading = undefined;
        throw fileError(error, contextName, entry.path, 'cannot read');
      }
      reading = undefined;
      if (filled === 0) {
        throw new FileTransferError(
          'ERR_TENDRIL_SIZE_MISMATCH',
          contextName,
          entry.path,
          `the file shrank while it was being sent (${sent} of ${size} bytes)`,
        );
      }
      const data = filled === chunk.length ? chunk : chunk.subarray(0, filled);
      if (sent + filled < size) reading = readFrom(sent + filled);
      hash.update(data);
      await out.send(data);
      sent += filled;
      options.onBytes?.(filled);
    }
    await out.send({ t: 'e', n: sent, h: hash.digest('hex') });
  } finally {
    // A read still going (the send failed) finishes before the handle closes.
    if (reading) await reading.catch(() => undefined);
    await handle.close().catch(() => undefined);
  }
}
