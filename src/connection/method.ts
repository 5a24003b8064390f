import type { Readable, Writable } from 'node:stream';
import type { ChildProcessHandle } from '../core/broker.js';
import type { Refable } from '../core/stream.js';
import type { BootstrapError } from './errors.js';

/**
 * A started target process. Its stdin and stdout carry the stream (the
 * shell wrapper moves them off fds 0 and 1 before Node runs any user code);
 * everything the target writes to stderr, including output of user code,
 * is diagnostic and becomes log records.
 */
export interface Transport {
  /** Bytes to the target's stdin: the stream toward the child. */
  readonly stdin: Writable;
  /** Bytes from the target's stdout: the stream from the child. */
  readonly stdout: Readable;
  /** The target's stderr: its output, which becomes log records, and where prompts appear. */
  readonly stderr: Readable;
  /** The process, as the broker controls it. */
  readonly process: ChildProcessHandle;
  /** Where the process runs, for error messages, e.g. `'local'` or `'ssh web1:22'`. */
  readonly where: string;
  /**
   * The connection under the stream, when stdin and stdout are not sockets
   * or pipes themselves (an SSH channel: its TCP socket). It is kept
   * referenced while calls are pending, so a waiting program does not exit.
   */
  readonly socket?: Refable;
  /** Where prompts are answered when not on stdin (a terminal the method set up). */
  readonly promptInput?: Writable;
  /** Translates a failure of the transport itself (refused, unknown host, ...) into a precise error. */
  explain?(lastOutput: string, status: string): BootstrapError | undefined;
}

/** Facts about one connection attempt that a method and its conversation share. */
export interface Session {
  /**
   * Name of the new context: the `name` option, else a description of the
   * target that the method sets as soon as it knows it (`describe`), so
   * that errors and debug output before the context is ready say where.
   */
  readonly name: string;
  /** Random token unique to this attempt, for prompt markers. */
  readonly token: string;
  /** When the whole connection must be done (ms since the epoch): `connectTimeout` across every hop. */
  readonly deadline: number;
  /**
   * What the attempt is doing now, e.g. `'authenticating as deploy to
   * web1:22'`; a `ConnectTimeoutError` quotes it. Methods update it as they go.
   */
  step: string;
  /**
   * Names the target, e.g. `'ssh:deploy@web1:22'` or `'sudo:root@web1'`:
   * becomes the context's name unless the `name` option gave one.
   */
  describe(target: string): void;
}

/** What to do about output seen while the target starts. */
export type Reply = { answer: string } | { error: BootstrapError };

/**
 * Answers the prompts of a method that may ask for a password before the
 * interpreter runs (sudo, su, doas, ssh through OpenSSH). Output is fed in
 * as it arrives, a bounded tail of it (conversation.ts); after an answer,
 * the text seen so far is dropped.
 */
export interface Conversation {
  /**
   * Looks at the output since the last answer (at most the last 8 KiB
   * kept, and the latest chunk); returns what to do, or undefined to keep waiting.
   */
  respond(output: string): Reply | undefined;
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
   * @throws when the target cannot be reached or started; a BootstrapError is passed on as is.
   */
  start(argv: string[], options: Options, session: Session): Transport | Promise<Transport>;
  /**
   * The interpreter command to run when the options do not name one, or
   * undefined to look for Node on the target (PATH, nvm, usual prefixes).
   */
  defaultNode(options: Options): string[] | undefined;
  /**
   * True when the target is this machine (and this user's view of it), so
   * that a child run with `[process.execPath]` is the very same Node binary
   * and can be sent a V8 code cache of the core.
   */
  readonly sameMachine?: boolean;
  /**
   * True when the stream to the child stays on this machine (a pipe, a
   * local daemon's socket), so the core is sent as it is (about 145 KB)
   * instead of deflated (about 50 KB): the child then skips loading zlib
   * and inflating, about 3 ms of its start. Unset or false: deflated, as a
   * stream that may cross a network needs.
   */
  localStream?(options: Options): boolean;
  /**
   * How the start command names the POSIX shell it runs in. Default
   * `'/bin/sh'`, by its path: the environment a command such as `su`
   * gives it may be another account's, whose PATH (or an exported bash
   * function named `sh`) would otherwise choose the shell. `'sh'` looks it
   * up on the target's own PATH, for methods whose target has an
   * environment of its own that no other account sets (a container's
   * image, which may keep its shell elsewhere: `/busybox/sh`).
   */
  readonly shell?: string;
  /**
   * The prompts this attempt may have to answer. When defined, the core is
   * sent only once the interpreter has announced itself, so a password
   * prompt can never read it.
   */
  conversation?(options: Options, session: Session): Conversation | undefined;
  /**
   * The names of every option it takes (the common ones included). Any
   * other is refused before anything starts (`checkMethodOptions`), in the
   * master and again in a `via` context. Unset: the names are not checked.
   */
  readonly optionNames?: ReadonlySet<string>;
  /**
   * Checks the values of its own options before anything starts: required
   * ones are there, and each is of its type.
   * @param where how the caller named it, e.g. `'router.ssh()'`.
   * @throws InvalidOptionError naming the first bad option.
   */
  checkOptions?(options: Options, where: string): void;
}
