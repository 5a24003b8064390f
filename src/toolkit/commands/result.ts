/** What a finished command gives: `await context.exec(...)`. */
export interface CommandResult<T extends string | Buffer = string> {
  /** The command as run, its arguments quoted where a shell would need it (for messages and logs). */
  command: string;
  /** Its standard output: a string, or a Buffer with `encoding: 'buffer'`; one final newline stripped. Empty with `buffer: false`. */
  stdout: T;
  /** Its standard error, as `stdout`. */
  stderr: T;
  /** Exit code; undefined when it was killed by a signal or never started. */
  exitCode: number | undefined;
  /** Signal that killed it, e.g. `'SIGTERM'`; undefined when it exited. */
  signal: string | undefined;
  /** How long the process ran, in ms, measured where it ran. */
  durationMs: number;
  /** True when it did not succeed: a non-zero exit, a signal, a timeout, an abort, over `maxBuffer`, or not started. */
  failed: boolean;
  /** Killed because `timeout` passed. */
  timedOut: boolean;
  /** Killed because `signal` aborted. */
  isCanceled: boolean;
  /** Killed because its output passed `maxBuffer`. */
  isMaxBuffer: boolean;
}
