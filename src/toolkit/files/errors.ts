/**
 * The error of a file transfer. Defined with the services, which load in
 * the master and (as `tendril:toolkit`) in every context that transfers
 * files, and registered there, so one raised in a child arrives in the
 * master as this class, with its code, path and context name.
 */
import { registerRemoteErrors, TendrilError } from '../../core/errors.js';
import { escapeTerminalText } from '../../core/terminal-text.js';

/**
 * A file transfer (`copy`, `fetch`, a file stream, `router.copy`) failed.
 * `code` is the system's error code where the system refused (`'ENOENT'`,
 * `'EACCES'`, `'ENOSPC'`, `'EISDIR'`...), or one of tendril's:
 * `'ERR_TENDRIL_HASH_MISMATCH'` (the bytes written are not the bytes
 * read), `'ERR_TENDRIL_SIZE_MISMATCH'` (sizes differ, or the sending side
 * sent more than it announced, or left a size unsaid to the master),
 * `'ERR_TENDRIL_TRANSFER_INTERRUPTED'`
 * (the sending side stopped before the end: an error there, an abort, or
 * its context went away), `'ERR_TENDRIL_BAD_ENTRY'` (the sending side sent
 * something a transfer may not contain: an absolute path, `..`, a path
 * through a symlink, an entry twice, too many entries, a tree where a
 * file was asked for), `'ERR_TENDRIL_STALLED'` (`router.copy`: the target
 * took no data, or gave no answer, for `stallTimeout` ms, and was given up
 * on so that the others could go on). Nothing is left under the real
 * name of a file that failed.
 */
export class FileTransferError extends TendrilError {
  /**
   * The path the failure concerns, as the context that failed saw it;
   * escaped for a terminal on one line (`escapeTerminalText`), as in the
   * message: it may be an entry name the sending side made up.
   */
  readonly path: string;
  /** Name of the context where it failed. */
  readonly contextName: string;

  /**
   * @param code the system's code (`'ENOENT'`...) or tendril's (`'ERR_TENDRIL_HASH_MISMATCH'`...).
   * @param contextName the context where it failed.
   * @param path the path concerned.
   * @param what what failed and why, e.g. `"cannot write: no space left on device"`.
   */
  constructor(code: string, contextName: string, path: string, what: string) {
    const shown = escapeTerminalText(path);
    super(`${what} (${code}; path '${shown}' in context '${contextName}')`, code);
    this.path = shown;
    this.contextName = contextName;
  }
}

registerRemoteErrors({ FileTransferError });

/** Plain-language causes of the system errors a transfer commonly meets. */
const CAUSES: Record<string, string> = {
  ENOENT: 'no such file or directory',
  EACCES: 'permission denied',
  EPERM: 'operation not permitted',
  ENOSPC: 'no space left on device',
  EDQUOT: 'disk quota exceeded',
  EISDIR: 'is a directory',
  ENOTDIR: 'not a directory',
  EEXIST: 'already exists',
  EROFS: 'read-only file system',
  ENAMETOOLONG: 'name too long',
  ENOTEMPTY: 'directory not empty',
  ELOOP: 'too many levels of symbolic links',
};

/**
 * `error` as a `FileTransferError` of `contextName` and `path`: a system
 * error keeps its code; one already of this class is returned as it is.
 * @param doing what was being done, e.g. `'cannot read'`.
 */
export function fileError(error: unknown, contextName: string, path: string, doing: string): FileTransferError {
  if (error instanceof FileTransferError) return error;
  const code = (error as { code?: unknown })?.code;
  if (typeof code === 'string' && /^E[A-Z0-9]+$/.test(code)) {
    return new FileTransferError(code, contextName, path, `${doing}: ${CAUSES[code] ?? (error as Error).message}`);
  }
  const message = error instanceof Error ? error.message : String(error);
  return new FileTransferError('ERR_TENDRIL_TRANSFER', contextName, path, `${doing}: ${message}`);
}
