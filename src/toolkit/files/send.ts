/**
 * The sending side of a transfer (see ./protocol.ts): reads a file, tree
 * or symlink and sends it, hashing file data as it is read.
 */
import { createHash } from 'node:crypto';
import { constants, promises as fs, type Stats } from 'node:fs';
import { basename, join } from 'node:path';
import { FileTransferError, fileError } from './errors.js';
import { hashInSlices } from './hashing.js';
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

const { O_RDONLY, O_NONBLOCK = 0, O_NOFOLLOW = 0 } = constants;

/**
 * Opens the file the walk found, without blocking and (but for a single
 * file named by a link, which is followed) without following a link: a
 * FIFO another process put at its path since would otherwise block the
 * open, and a link could lead elsewhere. What is opened must be the file
 * walked (same device and inode), a regular file.
 * @throws FileTransferError `ERR_TENDRIL_NOT_A_FILE` when something else is there now.
 */
async function openWalked(entry: Walked, follow: boolean, contextName: string): Promise<fs.FileHandle> {
  const handle = await fs.open(entry.path, O_RDONLY | O_NONBLOCK | (follow ? 0 : O_NOFOLLOW));
  try {
    const stats = await handle.stat();
    if (stats.isFile() && stats.ino === entry.stats.ino && stats.dev === entry.stats.dev) return handle;
  } catch (error) {
    await handle.close();
    throw error;
  }
  await handle.close();
  throw new FileTransferError(
    'ERR_TENDRIL_NOT_A_FILE',
    contextName,
    entry.path,
    'cannot read: something else was put at its path while the transfer ran',
  );
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
  const pool = new ChunkPool();
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
      await sendFile(entry, out, contextName, options, owner, pool);
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

/** Most free buffers a `ChunkPool` keeps: what a window and the reads ahead hold, with room to spare. */
const MAX_FREE = 16;

/**
 * Read buffers of `CHUNK_SIZE` bytes, each given back once every receiving
 * side has read it (see `Output`): a transfer reuses a few buffers instead
 * of leaving one per chunk to the garbage collector. Measured in the
 * master of a 256 MiB local copy: fresh buffers (1 MiB of external memory
 * each) set off major collections that cost about as much CPU as hashing.
 */
class ChunkPool {
  private readonly free: Buffer[] = [];

  take(): Buffer {
    return this.free.pop() ?? Buffer.allocUnsafe(CHUNK_SIZE);
  }

  give(buffer: Buffer): void {
    if (this.free.length < MAX_FREE) this.free.push(buffer);
  }
}

/**
 * Chunks read ahead of the one being sent: enough that a read waiting for
 * a thread of the pool (on a busy machine, milliseconds) is rarely waited for.
 */
const READ_AHEAD = 4;

/** Fills `chunk` from `position` in the file, as far as the file goes: the bytes read. */
async function fill(handle: fs.FileHandle, chunk: Buffer, position: number): Promise<number> {
  let filled = 0;
  while (filled < chunk.length) {
    const { bytesRead } = await handle.read(chunk, filled, chunk.length - filled, position + filled);
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
  pool: ChunkPool,
): Promise<void> {
  let handle: fs.FileHandle;
  try {
    handle = await openWalked(entry, options.recursive === false, contextName);
  } catch (error) {
    throw fileError(error, contextName, entry.path, 'cannot read');
  }
  /** Reads under way, in file order: each chunk and the promise of its bytes read. */
  const ahead: { buffer: Buffer; chunk: Buffer; read: Promise<number> }[] = [];
  try {
    const size = entry.stats.size;
    await out.send({ t: 'f', p: entry.rel, s: size, m: entry.stats.mode & 0o7777, mt: entry.stats.mtimeMs, ...owner });
    const hash = createHash('sha256');
    let sent = 0;
    /** Where the next read starts. */
    let position = 0;
    const readAhead = () => {
      while (ahead.length < READ_AHEAD && position < size) {
        const buffer = pool.take();
        const chunk = buffer.subarray(0, Math.min(CHUNK_SIZE, size - position));
        // Handled here: a read that fails while others are sent is reported when its turn comes.
        const read = fill(handle, chunk, position);
        read.catch(() => undefined);
        ahead.push({ buffer, chunk, read });
        position += chunk.length;
      }
    };
    readAhead();
    const shrank = () =>
      new FileTransferError(
        'ERR_TENDRIL_SIZE_MISMATCH',
        contextName,
        entry.path,
        `the file shrank while it was being sent (${sent} of ${size} bytes)`,
      );
    for (let next = ahead.shift(); next; next = ahead.shift()) {
      const { buffer, chunk } = next;
      let filled: number;
      try {
        filled = await next.read;
      } catch (error) {
        throw fileError(error, contextName, entry.path, 'cannot read');
      }
      if (filled === 0) throw shrank();
      // The file shrank (the next reads find nothing) or ends here.
      if (filled < chunk.length) position = size;
      const data = filled === chunk.length ? chunk : chunk.subarray(0, filled);
      readAhead();
      // Sent first, hashed while it is written out (the chunk is never changed).
      const sending = out.send(data, () => pool.give(buffer));
      sending.catch(() => undefined);
      await hashInSlices(hash, data);
      await sending;
      sent += filled;
      options.onBytes?.(filled);
    }
    if (sent < size) throw shrank();
    await out.send({ t: 'e', n: sent, h: hash.digest('hex') });
  } finally {
    // Reads still going (the send failed) finish before the handle closes.
    for (const { read } of ahead) await read.catch(() => undefined);
    await handle.close().catch(() => undefined);
  }
}
