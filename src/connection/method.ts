import type { Readable, Writable } from 'node:stream';
import type { ChildProcessHandle } from '../core/broker.js';

/**
 * A started target process. Its stdin and stdout carry the stream (the
 * first stage moves them off fds 0 and 1 before Node runs any user code);
 * everything the target writes to stderr, including output of user code,
 * is diagnostic and becomes log records.
 */
export interface Transport {
  /** Bytes to the target's stdin: the stream toward the child. */
  readonly stdin: Writable;
  /** Bytes from the target's stdout: the stream from the child. */
  readonly stdout: Readable;
  /** The target's stderr: its output, which becomes log records. */
  readonly stderr: Readable;
  /** The process, as the broker controls it. */
  readonly process: ChildProcessHandle;
  /** Where the process runs, for error messages, e.g. `'local'` or `'ssh web1:22'`. */
  readonly where: string;
}

/**
 * How a parent starts a child: runs `argv` on the target with stdin,
 * stdout and stderr connected. The bootstrap (first stage, core, BOOT) is
 * the same for every method and is done by the caller.
 */
export interface ConnectionMethod<Options> {
  /** Method name, e.g. `'local'`; also the default prefix of context names. */
  readonly name: string;
  /**
   * Starts `argv` (already complete: shell wrapper, Node, first stage).
   * @throws when the process cannot be started; the error is reported as a BootstrapError.
   */
  start(argv: string[], options: Options): Transport | Promise<Transport>;
  /** The interpreter command to run when the options do not name one. */
  defaultNode(options: Options): string[];
  /**
   * True when the target is this machine (and this user's view of it), so
   * that a child run with `[process.execPath]` is the very same Node binary
   * and can be sent a V8 code cache of the core.
   */
  readonly sameMachine?: boolean;
}
