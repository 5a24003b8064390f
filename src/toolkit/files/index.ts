/**
 * File transfer: `context.copy()`, `context.fetch()`, file streams, and
 * `router.copy()` to many contexts at once. See docs/files.md.
 */
import type { Readable } from 'node:stream';
import { Context } from '../../core/context.js';
import { ROUTER_SWITCH } from '../../core/switch.js';
import { Router } from '../../master/router.js';
import { createReadStream, createWriteStream, type FileWriteStream, type WriteStreamOptions } from './streams.js';
import { type CopyOutcome, copy, copyToMany, fetch, type TransferOptions, type TransferResult } from './transfer.js';

export { FileTransferError } from './errors.js';
export type { TransferProgress } from './progress.js';
export type { FileWriteStream, WriteStreamOptions } from './streams.js';
export type { CopyOutcome, TransferOptions, TransferResult } from './transfer.js';

declare module '../../core/context.js' {
  interface Context {
    /**
     * Copies a file, a directory tree or a symlink from the master to this
     * context, streamed in chunks under flow control and verified (size and
     * SHA-256 of the bytes written against those read). Modes and mtimes
     * are kept; symlinks are copied as links, never followed. Each file is
     * written to a temporary name beside its real one and renamed, so a
     * failed or stopped transfer never leaves a half file under the real
     * name.
     *
     * Where it goes: a file (or link) is written at `remotePath`, or inside
     * it under its own name when `remotePath` is an existing directory or
     * ends with `/`. A directory's contents go into `remotePath`, created
     * if missing and merged into if it exists (files there are replaced,
     * others kept): copying `a/` to `b` twice gives the same `b`, unlike
     * `cp -r`.
     *
     * ```ts
     * const result = await context.copy('dist/app.tar.gz', '/srv/app/app.tar.gz', { onProgress: console.log });
     * console.log(result.sha256);
     * ```
     * @param localPath the file, directory or symlink on the master.
     * @param remotePath where it goes in this context (see above).
     * @param options `preserve` (owner and group, when writing as root), `mode`, `onProgress`, `signal`.
     * @throws FileTransferError naming the context and the path, with `code`
     *   `'ENOENT'`, `'EACCES'`, `'ENOSPC'`... or `'ERR_TENDRIL_HASH_MISMATCH'`.
     * @throws InvalidOptionError for a bad option; the signal's reason when
     *   it aborts (once the context has removed its temporary file, or
     *   `STOP_GRACE`, 2 s, later if it does not answer).
     */
    copy(localPath: string, remotePath: string, options?: TransferOptions): Promise<TransferResult>;
    /**
     * Copies a file (or, with `recursive`, a directory tree) from this
     * context to the master: `copy` the other way, with the same checks and
     * temporary names. The master decides what it takes. Without
     * `recursive`, one regular file: a symlink at `remotePath` is followed
     * in the context (as `cp` and `scp` do for a file), and a context that
     * sends a symlink or a tree anyway is refused before anything is
     * written, so it cannot leave a link to one of the master's own files
     * where the program reads its data; a directory fails with `EISDIR`.
     * With `recursive: true`, `remotePath` is taken as it is, and its
     * symlinks (the root too, when it is one) are written as links that
     * point wherever the context says (an absolute path, `..`), never
     * followed while writing: a program that reads the fetched tree reads
     * through them, so check them (`lstat`) if that matters. A tree lands
     * at `localPath` when nothing is there, else (an existing directory, or
     * a path ending with `/`) in `localPath/<base name of remotePath>`, and
     * merges into a directory already there only with `merge: true`
     * (otherwise `EEXIST`, before anything is written). What the context
     * sends is checked as untrusted: the name must be that of `remotePath`,
     * paths must be relative and stay in the tree (no `..`, no absolute
     * path, nothing written through a symlink), entries come once, in
     * order, counts are bounded, sizes must be announced and are never
     * exceeded, and what the master remembers is charged to the context's
     * account (`maxHeldBytes`).
     * @param remotePath the file in this context (a symlink to one is followed); with `recursive`, the directory, file or symlink.
     * @param localPath where it goes on the master.
     * @param options as `copy`'s, and `recursive`, `merge`.
     * @throws as `copy`; FileTransferError `'EISDIR'` (a directory without
     *   `recursive`), `'ERR_TENDRIL_NOT_A_FILE'` (neither a file, a
     *   directory nor a symlink: a FIFO, a device...), `'EEXIST'` (a tree
     *   onto a directory without `merge`), `'ERR_TENDRIL_BAD_ENTRY'` or
     *   `'ERR_TENDRIL_SIZE_MISMATCH'` (the context sent what it may not: a
     *   symlink or a tree where a file was asked for, among others);
     *   HeldBytesError past `maxHeldBytes`.
     */
    fetch(remotePath: string, localPath: string, options?: TransferOptions): Promise<TransferResult>;
    /**
     * A Node Readable of a file in this context, in chunks, under flow
     * control: a paused reader pauses the reading there. The context
     * cannot send more than the size it announced; size and SHA-256 are
     * checked at the end, and a `FileTransferError` is emitted when they
     * differ (or the file cannot be read), even if the context then keeps
     * its call open (`destroy()` waits for it `STOP_GRACE`, 2 s, at most).
     * @param path a regular file in this context (a symlink to one is followed there).
     */
    createReadStream(path: string): Readable;
    /**
     * A Node Writable to a file in this context. The file appears under
     * `path` only once `end()` has finished (written to a temporary name,
     * verified, renamed); `destroy()` or a failure leaves nothing, and
     * `destroy()` closes the stream once the context has removed its
     * temporary file, or `STOP_GRACE` (2 s) later if it does not answer.
     * Its `result` gives the bytes and SHA-256 written once it has finished.
     * @param path the file to write (replaced if it exists).
     * @param options `mode` (default `0o644`).
     */
    createWriteStream(path: string, options?: WriteStreamOptions): FileWriteStream;
  }
}

declare module '../../master/router.js' {
  interface Router {
    /**
     * Copies one file (or tree) from the master to many contexts, reading
     * it once. Targets are grouped by the context that started them: the
     * master's own children each get a stream, and all the children of
     * another context get one stream to it, which it tees to them, so that
     * hop and those above it carry the data once. The slowest target paces
     * the others (flow control); one failing does not stop the rest, and
     * one that takes no data for `stallTimeout` ms (default 30000), or does
     * not answer that long once the data has ended, fails alone with
     * `ERR_TENDRIL_STALLED` while the others go on.
     * @param contexts the targets.
     * @param options as `copy`'s, and `stallTimeout`.
     * @returns one outcome per target, in order, like `Promise.allSettled`,
     *   each with its context; a failure is a `FileTransferError` naming
     *   its context (for a stalled intermediate, that context), or the
     *   signal's reason for every target when it aborts (within
     *   `STOP_GRACE`, 2 s, whatever the targets do).
     * @throws InvalidOptionError for a bad argument.
     */
    copy(localPath: string, remotePath: string, contexts: Context[], options?: TransferOptions): Promise<CopyOutcome[]>;
  }
}

Context.prototype.copy = function (this: Context, localPath, remotePath, options) {
  return copy(this, localPath, remotePath, options);
};
Context.prototype.fetch = function (this: Context, remotePath, localPath, options) {
  return fetch(this, remotePath, localPath, options);
};
Context.prototype.createReadStream = function (this: Context, path) {
  return createReadStream(this, path);
};
Context.prototype.createWriteStream = function (this: Context, path, options) {
  return createWriteStream(this, path, options);
};
Router.prototype.copy = function (this: Router, localPath, remotePath, contexts, options) {
  return copyToMany(this[ROUTER_SWITCH], localPath, remotePath, contexts, options);
};
