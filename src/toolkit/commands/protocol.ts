/**
 * What the two halves of `context.exec()` exchange: the master's request,
 * the output and control values on the command's Channel, and the result.
 * Types and constants only, so the remote half (bundled for children) and
 * the master half share them without sharing code.
 */

/**
 * How the master asks a context to run a command (the remote `exec` export's
 * first argument). Options left unset are left out: each undefined field
 * still costs its encoding and decoding.
 */
export interface ExecRequest {
  /** The program, or with `shell` the command line. */
  file: string;
  /** The argument vector after `file`, passed as it is (joined by spaces under `shell`). */
  args: string[];
  /** A shell to run `file` and `args` in, joined by spaces: `true` for /bin/sh. */
  shell: boolean | string;
  /** Working directory of the command; undefined: the context's own. */
  cwd?: string;
  /** Variables set on top of the context's environment, or instead of it (`extendEnv: false`). */
  env?: Record<string, string>;
  /** Whether `env` is added to the context's `process.env` (true) or is the whole environment. */
  extendEnv: boolean;
  /** Input given whole; a streamed input arrives on its own Channel instead. */
  input?: Buffer;
  /** Whether input comes on a Channel (the request's third argument). */
  streamedInput: boolean;
  /** Kill after this many ms. */
  timeout?: number;
  /**
   * Signal for the timeout's kill, checked by the master; the remote half
   * sends no signal its system does not know.
   */
  killSignal: string;
  /** After killing with `killSignal`, SIGKILL the group this many ms later if it is still there. */
  forceKillAfterDelay?: number;
}

/** A chunk of output: which stream it came from, and its bytes. */
export type OutputChunk = [stream: typeof STDOUT | typeof STDERR, data: Uint8Array];

/** Tags an `OutputChunk` of the command's stdout. */
export const STDOUT = 1;
/** Tags an `OutputChunk` of the command's stderr. */
export const STDERR = 2;

/** What the master sends on a command's Channel: kill its process group with this signal. */
export type Control = [signal: string, forceKillAfterDelay: number | null];

/** How the command ended, as the remote half reports it. */
export interface RemoteOutcome {
  /** Its process ID (also its process group's), when it was started. */
  pid: number | undefined;
  /** Its exit code (0 to 255, checked by the master); null when killed by a signal or not started. */
  exitCode: number | null;
  /** The signal that killed it (`SIG` and up to 16 characters, checked by the master); else null. */
  signal: string | null;
  /** From just before the spawn to the command's end, in ms by the context's clock (finite, not negative: checked). */
  durationMs: number;
  /** Killed because `timeout` passed. */
  timedOut: boolean;
  /**
   * How many output chunks were sent before this outcome: they are ahead of
   * it on the way, so the master need not wait for the channel to close.
   */
  chunks: number;
  /** Output held when the command ended, sent in the outcome itself (at most about 128 KiB). */
  tail: OutputChunk[];
  /** Set when it could not be started (`ENOENT`, `EACCES`, a bad cwd...). */
  spawnError?: { code: string | undefined; message: string };
}

/** Largest input sent whole, inside the request; a larger one is streamed. */
export const WHOLE_INPUT_LIMIT = 256 * 1024;
/** Chunk size of a streamed input. */
export const INPUT_CHUNK = 64 * 1024;

/** Which output stream a chunk came from: `STDOUT` or `STDERR`. */
export type Fd = typeof STDOUT | typeof STDERR;
