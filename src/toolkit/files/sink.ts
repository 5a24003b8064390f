/**
 * The receiving side of a transfer (see ./protocol.ts), which trusts
 * nothing it is sent: see `receiveInto`.
 */
import { createHash } from 'node:crypto';
import { promises as fs } from 'node:fs';
import { join } from 'node:path';
import { type Holding, ITEM_OVERHEAD } from '../../core/holdings.js';
import { ownHead } from '../../core/own-copy.js';
import { currentUmask } from '../../core/process-state.js';
import { FileTransferError, fileError } from './errors.js';
import { hashInSlices } from './hashing.js';
import {
  type Begin,
  checkBegin,
  checkMeta,
  checkRelative,
  type DirEntry,
  type FileEnd,
  type FileEntry,
  type Input,
  isEntry,
  isId,
  type LinkEntry,
  MAX_PATH,
  type Owner,
  type TransferCounts,
} from './protocol.js';
import { forgetTemporaryFile, tempName, writeAll, writingTemporaryFile } from './temporary-files.js';

/** Options of the receiving side. */
export interface SinkOptions {
  /** Apply owner and group from the entries (only when this process is root). */
  owner?: boolean;
  /** Permission bits for a single file, instead of the source's. */
  mode?: number;
  /** Called with each chunk's size once written. */
  onBytes?: (bytes: number) => void;
  /** Called with the (checked) description the sending side sent first. */
  onBegin?: (begin: Begin) => void;
  /**
   * The base name the transfer must carry (that of the path asked for):
   * the sending side cannot pick the name of a file written into a
   * directory, as a hostile scp server could (CVE-2019-6111).
   */
  name?: string;
  /**
   * The sending side is not trusted (the master fetching from a child):
   * modes lose their setuid, setgid and sticky bits and this process's
   * umask applies, unless `owner` (preserve) asks for them as sent; and
   * every file must announce its size (a write stream's unknown size, -1,
   * is refused).
   */
  untrusted?: boolean;
  /**
   * Whether a tree (or a symlink) is accepted. Default true. False: one
   * file was asked for, and anything but a regular file (a directory, a
   * symlink, which could lead anywhere on this side) is refused before
   * anything is written (`ERR_TENDRIL_BAD_ENTRY`).
   */
  recursive?: boolean;
  /**
   * Where a tree lands. Default false: its root is `target` itself. True:
   * as `cp -r` and `scp -r` place it, at `target` when nothing is there,
   * else (an existing directory, or `target` ending with `/`) in
   * `target/<name>`, the name checked against `name`.
   */
  treeInto?: boolean;
  /**
   * Whether a tree may be merged into a directory already there where it
   * lands (its files replaced, others kept). Default true. False: the
   * transfer fails with `EEXIST` before anything is written.
   */
  merge?: boolean;
  /**
   * Charged with what the sink remembers while it runs (the chain of open
   * directories: their paths, plus `ITEM_OVERHEAD` each), and given back
   * as it lets go of them; the caller closes it when the transfer ends.
   * Unset: nothing is charged (the sending side is trusted).
   */
  holding?: Pick<Holding, 'add' | 'remove'>;
}
/**
 * Bytes of file data being written at once, beyond the chunk just taken:
 * enough that a write waiting for a thread of the pool (on a busy machine,
 * milliseconds) rarely holds up the next. Counted in bytes, as the
 * sending side picks the size of its chunks.
 */
const WRITE_BEHIND = 4 * 1024 * 1024;

/**
 * Receives a transfer from `input` and writes it at `target`, checking
 * everything: the sending side may be an untrusted child.
 *
 * - A file or link goes to `target`, or into it under its own name when
 *   `target` is an existing directory or ends with `/`. A tree's root
 *   becomes `target` (created if missing, merged into if it exists), or
 *   with `treeInto` lands as `cp -r` puts it; `recursive: false` refuses
 *   anything but a regular file (a tree, a link) and `merge: false` an
 *   existing directory where a tree lands.
 * - Paths must be relative, without `.`, `..` or empty components, at most
 *   MAX_PATH bytes with names of at most MAX_NAME; entries come in the
 *   order `sendPath` lists them (pre-order, names sorted), so an entry's
 *   parent must be a directory of this transfer still open (created or
 *   merged into, checked with lstat to be a real directory: nothing is
 *   ever written through a symlink, whatever the sender says), and no
 *   entry can come twice. What is remembered is the chain of open
 *   directories, charged to `holding`.
 * - File data may not exceed what the file and the transfer announced,
 *   checked as it arrives; an untrusted sender must announce every size.
 * - Each file is written to a temporary name beside its real one, checked
 *   (size and SHA-256 of the bytes written, against what the sender read),
 *   given its mode and mtime, and renamed; on any failure the temporary
 *   file is removed and the real name is untouched.
 * @throws FileTransferError naming `contextName` and the path.
 * @throws HeldBytesError when `holding`'s account is full.
 */
export async function receiveInto(
  input: Input,
  target: string,
  contextName: string,
  options: SinkOptions = {},
): Promise<TransferCounts> {
  const sink = new Sink(input, target, contextName, options);
  return sink.run();
}

/** A directory of the transfer that entries may still go into. */
interface OpenDirectory {
  rel: string;
  path: string;
  /** Its mode and mtime, applied once it is closed; undefined for an existing root, which keeps its own. */
  entry: DirEntry | undefined;
  /** The relative path of the last entry it received: the next must sort after it. */
  last: string;
  /** Bytes charged to the holding for it. */
  held: number;
}

/** What remembering `text` costs, at most (two bytes a character). */
function textBytes(text: string): number {
  return 2 * text.length;
}

class Sink {
  private readonly counts: TransferCounts = { files: 0, directories: 0, links: 0, bytes: 0 };
  /**
   * The directories entries may go into: the root and the chain of
   * directories down to the last entry. In pre-order, one that is left is
   * finished: its mode and mtime are applied then (writing into it would
   * change its mtime).
   */
  private readonly open: OpenDirectory[] = [];
  private root = '';
  private begin: Begin | undefined;
  private entries = 0;
  private readonly isRoot = typeof process.getuid === 'function' && process.getuid() === 0;
  private umask: number | undefined;
  /** A file of unknown size (a write stream's) was announced. */
  private unsized = false;
  /** Bytes of file data received so far (`counts.bytes` counts them once written). */
  private received = 0;

  constructor(
    private readonly input: Input,
    private readonly target: string,
    private readonly contextName: string,
    private readonly options: SinkOptions,
  ) {}

  async run(): Promise<TransferCounts> {
    const begin = checkBegin(await this.next(), this.bad);
    if (this.options.name !== undefined && begin.name !== this.options.name) {
      throw this.bad(
        this.target,
        `it names the ${begin.kind} '${begin.name.slice(0, 200)}', not '${this.options.name}'`,
      );
    }
    if (begin.kind !== 'file' && this.options.recursive === false) {
      // A link is refused too: it could lead to any file of this side, which the program would then read as the one fetched.
      const sent = begin.kind === 'dir' ? 'a directory' : 'a symlink';
      const hint = begin.kind === 'dir' ? ' (fetch a tree with recursive: true)' : '';
      throw this.bad(this.target, `it sent ${sent} where a file was asked for${hint}`);
    }
    this.begin = begin;
    this.options.onBegin?.(begin);
    this.root = await this.destination(begin);
    for (;;) {
      const value = await this.next();
      if (isEntry(value, 'end')) break;
      if (++this.entries > begin.files + begin.directories + begin.links) {
        throw this.bad(this.target, 'more entries than announced');
      }
      if (isEntry(value, 'd')) await this.directory(value);
      else if (isEntry(value, 'f')) await this.file(value);
      else if (isEntry(value, 'l')) await this.link(value);
      else throw this.bad(this.target, 'expected an entry');
    }
    // A write stream's one file has no size in advance (-1), so neither has the transfer.
    if (!this.unsized && this.counts.bytes !== begin.bytes) {
      throw new FileTransferError(
        'ERR_TENDRIL_SIZE_MISMATCH',
        this.contextName,
        this.target,
        `received ${this.counts.bytes} bytes of file data where ${begin.bytes} were announced`,
      );
    }
    await this.closeDirectories(0);
    return this.counts;
  }

  /** Where the transfer's root goes (see `receiveInto`). */
  private async destination(begin: Begin): Promise<string> {
    if (begin.kind === 'dir' && !this.options.treeInto) return this.target;
    let into = /\/$/.test(this.target);
    if (!into) {
      try {
        into = (await fs.stat(this.target)).isDirectory();
      } catch {
        into = false;
      }
    }
    return into ? join(this.target, begin.name) : this.target;
  }

  private async next(): Promise<unknown> {
    const { done, value } = await this.input.next();
    if (done) {
      throw new FileTransferError(
        'ERR_TENDRIL_TRANSFER_INTERRUPTED',
        this.contextName,
        this.target,
        'the transfer stopped before its end (the sending side failed, was aborted, or went away); nothing partial was kept',
      );
    }
    return value;
  }

  private readonly bad = (path: string, why: string): FileTransferError =>
    new FileTransferError('ERR_TENDRIL_BAD_ENTRY', this.contextName, path, `refused the transfer: ${why}`);

  /** The absolute path of an entry, after checking its relative path, its parent and its order. */
  private async place(rel: unknown, expectRoot: boolean): Promise<string> {
    if (typeof rel !== 'string') throw this.bad(this.target, 'an entry has no path');
    if (rel === '') {
      if (this.entries !== 1) throw this.bad(this.target, 'the root entry is not first');
      return this.root;
    }
    if (expectRoot) throw this.bad(this.target, 'a single file transfer carries one entry');
    checkRelative(rel, (why) => this.bad(this.target, why));
    const slash = rel.lastIndexOf('/');
    const parent = slash < 0 ? '' : rel.slice(0, slash);
    let depth = this.open.length - 1;
    while (depth >= 0 && (this.open[depth] as OpenDirectory).rel !== parent) depth--;
    if (depth < 0) {
      throw this.bad(join(this.root, rel), 'its parent is not a directory of this transfer still being written');
    }
    // Pre-order: an entry in `parent` means the directories below it are finished.
    await this.closeDirectories(depth + 1);
    const directory = this.open[depth] as OpenDirectory;
    // Names sorted, as sendPath lists them: no entry comes twice.
    if (!(rel > directory.last)) throw this.bad(join(this.root, rel), 'an entry sent twice or out of order');
    this.charge(directory, textBytes(rel) - textBytes(directory.last));
    directory.last = rel;
    return join(this.root, rel);
  }

  /** Charges `bytes` more (or gives back, when negative) for an open directory. */
  private charge(directory: OpenDirectory, bytes: number): void {
    if (bytes > 0) this.options.holding?.add(bytes);
    else this.options.holding?.remove(-bytes);
    directory.held += bytes;
  }

  /** Finishes the open directories from `depth` down, deepest first: their modes and mtimes. */
  private async closeDirectories(depth: number): Promise<void> {
    while (this.open.length > depth) {
      const { path, entry, held } = this.open.pop() as OpenDirectory;
      this.options.holding?.remove(held);
      if (!entry) continue;
      try {
        await fs.chmod(path, this.modeOf(entry.m));
        await fs.utimes(path, entry.mt / 1000, entry.mt / 1000);
        await this.chown(path, entry, false);
      } catch (error) {
        throw fileError(error, this.contextName, path, 'cannot set the mode and time of');
      }
    }
  }

  private async directory(entry: DirEntry): Promise<void> {
    if (this.begin?.kind !== 'dir') throw this.bad(this.target, 'a directory in a transfer of one file');
    const path = await this.place(entry.p, false);
    checkMeta(entry, this.bad);
    let created = true;
    try {
      await fs.mkdir(path, { mode: 0o700 });
    } catch (error) {
      created = false;
      if ((error as { code?: string }).code !== 'EEXIST')
        throw fileError(error, this.contextName, path, 'cannot create the directory');
      if (entry.p === '' && this.options.merge === false) {
        throw new FileTransferError(
          'EEXIST',
          this.contextName,
          path,
          'cannot create the directory: it already exists (pass merge: true to merge the tree into it)',
        );
      }
      // The root may be a symlink the user named; below it nothing is followed.
      const stats = entry.p === '' ? await fs.stat(path) : await fs.lstat(path);
      if (!stats.isDirectory()) {
        throw new FileTransferError(
          'ENOTDIR',
          this.contextName,
          path,
          'cannot create the directory: something else is there',
        );
      }
    }
    const directory: OpenDirectory = {
      rel: entry.p,
      path,
      // A directory that was there keeps its mode and time when it is the root (the user's, merged into).
      entry: created || entry.p !== '' ? entry : undefined,
      last: '',
      held: 0,
    };
    this.charge(directory, textBytes(entry.p) + textBytes(path) + ITEM_OVERHEAD);
    this.open.push(directory);
    this.counts.directories++;
  }

  private async link(entry: LinkEntry): Promise<void> {
    const path = await this.place(entry.p, this.begin?.kind !== 'dir');
    if (this.begin?.kind !== (entry.p === '' ? 'link' : 'dir'))
      throw this.bad(path, 'a symlink where the transfer has none');
    if (
      typeof entry.to !== 'string' ||
      entry.to.length === 0 ||
      entry.to.length > MAX_PATH ||
      entry.to.indexOf('\0') >= 0
    ) {
      throw this.bad(path, 'a symlink target is not a path');
    }
    checkMeta({ ...entry, m: 0 }, this.bad);
    const temp = tempName(path);
    try {
      await fs.symlink(entry.to, temp);
      const lutimes = (fs as { lutimes?: (p: string, a: number, m: number) => Promise<void> }).lutimes;
      if (lutimes) await lutimes(temp, entry.mt / 1000, entry.mt / 1000);
      await this.chown(temp, entry, true);
      await fs.rename(temp, path);
    } catch (error) {
      await fs.unlink(temp).catch(() => undefined);
      throw fileError(error, this.contextName, path, 'cannot create the symlink');
    }
    this.counts.links++;
  }

  /** Checks a file's announced size against what the transfer announced (see `SinkOptions.untrusted`). */
  private checkSize(entry: FileEntry, path: string): void {
    if (!Number.isSafeInteger(entry.s) || entry.s < -1) throw this.bad(path, 'a file size is not a size');
    if (entry.s === -1) {
      if (this.options.untrusted) {
        throw new FileTransferError(
          'ERR_TENDRIL_SIZE_MISMATCH',
          this.contextName,
          path,
          'refused the transfer: a file of unknown size, from a context that must announce what it sends',
        );
      }
      this.unsized = true;
    } else if (!this.unsized && this.received + entry.s > (this.begin as Begin).bytes) {
      throw this.overAnnounced(path);
    }
  }

  private overAnnounced(path: string): FileTransferError {
    return new FileTransferError(
      'ERR_TENDRIL_SIZE_MISMATCH',
      this.contextName,
      path,
      `refused the transfer: more file data than the ${(this.begin as Begin).bytes} bytes announced`,
    );
  }

  private async file(entry: FileEntry): Promise<void> {
    const path = await this.place(entry.p, this.begin?.kind !== 'dir');
    if (this.begin?.kind !== (entry.p === '' ? 'file' : 'dir'))
      throw this.bad(path, 'a file where the transfer has none');
    checkMeta(entry, this.bad);
    this.checkSize(entry, path);
    const temp = tempName(path);
    let handle: fs.FileHandle;
    try {
      handle = await fs.open(temp, 'wx', 0o600);
    } catch (error) {
      throw fileError(error, this.contextName, path, 'cannot write');
    }
    writingTemporaryFile(temp);
    let closed = false;
    try {
      const hash = createHash('sha256');
      let written = 0;
      let end: FileEnd;
      // Chunks are written (in the thread pool, each at its place) while the next are received and hashed.
      const writing: { done: Promise<void>; bytes: number }[] = [];
      let writingBytes = 0;
      const oldestWritten = async () => {
        const { done, bytes } = writing.shift() as { done: Promise<void>; bytes: number };
        writingBytes -= bytes;
        await done;
      };
      try {
        for (;;) {
          const value = await this.next();
          if (value instanceof Uint8Array) {
            written += value.length;
            if (entry.s >= 0 && written > entry.s)
              throw this.bad(path, `more data than the ${entry.s} bytes announced`);
            // Checked before it is written: a sender cannot extend what it announced.
            this.received += value.length;
            if (!this.unsized && this.received > (this.begin as Begin).bytes) throw this.overAnnounced(path);
            while (writing.length > 0 && writingBytes + value.length > WRITE_BEHIND) await oldestWritten();
            // Written while it is hashed: the chunk is never changed.
            writing.push({ done: this.write(handle, value, written - value.length, path), bytes: value.length });
            writingBytes += value.length;
            await hashInSlices(hash, value);
          } else if (isEntry(value, 'e')) {
            end = value;
            break;
          } else throw this.bad(path, 'expected file data');
        }
        while (writing.length > 0) await oldestWritten();
      } finally {
        // Failed elsewhere: the writes under way end before the file is closed and removed.
        for (const { done } of writing) await done.catch(() => undefined);
      }
      const sha256 = hash.digest('hex');
      if (end.n !== written || (entry.s >= 0 && entry.s !== written)) {
        throw new FileTransferError(
          'ERR_TENDRIL_SIZE_MISMATCH',
          this.contextName,
          path,
          `wrote ${written} bytes but the sender read ${end.n}${entry.s >= 0 ? ` of ${entry.s} announced` : ''}`,
        );
      }
      if (end.h !== sha256) {
        throw new FileTransferError(
          'ERR_TENDRIL_HASH_MISMATCH',
          this.contextName,
          path,
          `the SHA-256 of the bytes written (${sha256}) is not that of the bytes read (${ownHead(String(end.h), 64)}); the file was not kept`,
        );
      }
      try {
        await handle.chmod(this.options.mode ?? this.modeOf(entry.m));
        await handle.utimes(entry.mt / 1000, entry.mt / 1000);
        await this.chown(handle, entry, false);
        closed = true;
        await handle.close();
        await fs.rename(temp, path);
        forgetTemporaryFile(temp);
      } catch (error) {
        throw fileError(error, this.contextName, path, 'cannot write');
      }
      this.counts.files++;
      if (this.begin?.kind === 'file') this.counts.sha256 = sha256;
    } catch (error) {
      if (!closed) await handle.close().catch(() => undefined);
      await fs.unlink(temp).catch(() => undefined);
      forgetTemporaryFile(temp);
      throw error;
    }
  }

  /** Writes one chunk at `position` in the file and counts it; handled, so it may be awaited later. */
  private write(handle: fs.FileHandle, value: Uint8Array, position: number, path: string): Promise<void> {
    const writing = writeAll(handle, value, position).then(
      () => {
        this.counts.bytes += value.length;
        this.options.onBytes?.(value.length);
      },
      (error: unknown) => {
        throw fileError(error, this.contextName, path, 'cannot write');
      },
    );
    writing.catch(() => undefined);
    return writing;
  }

  /** The mode to give what an entry describes (see `SinkOptions.untrusted`). */
  private modeOf(sent: number): number {
    if (!this.options.untrusted || this.options.owner) return sent;
    // Without /proc (not Linux): the usual one assumed.
    this.umask ??= currentUmask() ?? 0o022;
    return sent & 0o777 & ~this.umask;
  }

  /** Applies owner and group when asked and this process is root. */
  private async chown(target: string | fs.FileHandle, entry: Owner, link: boolean): Promise<void> {
    if (!this.options.owner || !this.isRoot) return;
    const { u, g } = entry;
    if (!isId(u) || !isId(g)) return;
    if (typeof target !== 'string') await target.chown(u, g);
    else if (link) await fs.lchown(target, u, g);
    else await fs.chown(target, u, g);
  }
}
