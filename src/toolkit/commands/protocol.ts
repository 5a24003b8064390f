/**
 * What the two halves of `context.exec()` exchange: the master's request,
 * the output and control values on the command's Channel, and the result.
 * Types and constants only, so the remote half (bundled for children) and
 * the master half share them without sharing code.
 */

/** How the master asks a context to run a command (the remote `exec` export's first argument). */
export interface ExecRequest {
  /** The program, or with `shell` the command line. */
  file: string;
  args: string[];
  /** A shell to run `file` and `args` in, joined by spaces: `true` for /bin/sh. */
  shell: boolean | string;
  cwd: string | undefined;
  /** Variables set on top of the context's environment, or instead of it (`extendEnv: false`). */
  env: Record<string, string> | undefined;
  extendEnv: boolean;
  /** Input given whole; a streamed input arrives on its own Channel instead. */
  input: Buffer | undefined;
  /** Whether input comes on a Channel (the request's third argument). */
  streamedInput: boolean;
  /** Kill after this many ms. */
  timeout: number | undefined;
  killSignal: string;
  /** After killing with `killSignal`, SIGKILL the group this many ms later if it is still there. */
  forceKillAfterDelay: number | undefined;
}

/** A chunk of output: which stream it came from, and its bytes. */
export type OutputChunk = [stream: typeof STDOUT | typeof STDERR, data: Uint8Array];

export const STDOUT = 1;
export const STDERR = 2;

/** What the master sends on a command's Channel: kill its process group with this signal. */
export type Control = [signal: string, forceKillAfterDelay: number | null];

/** How the command ended, as the remote half reports it. */
export interface RemoteOutcome {
  /** Its process ID (also its process group's), when it was started. */
  pid: number | undefined;
  exitCode: number | null;
  signal: string | null;
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
