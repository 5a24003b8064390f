import { TendrilError } from '../../core/errors.js';
import type { CommandResult } from './result.js';

/** Most characters of a command's output quoted in a `CommandError`'s message. */
const QUOTED_OUTPUT = 2000;

/**
 * A command failed: it exited with a non-zero code, was killed by a
 * signal, timed out, was aborted, wrote more than `maxBuffer`, kept more
 * output for its result than its child's `maxHeldBytes` account allows
 * (`cause` is then the `HeldBytesError`), or could not be started. Carries the whole result (its output included); the
 * message names the context and the command, says how it ended and quotes
 * the end of its stderr (else stdout), escaped for a terminal as every
 * tendril error's message is (`\x1b`, `\r`, `\u202e`: a command can write
 * anything there). `result.stdout` and `result.stderr` are the output as
 * the command wrote it, unescaped.
 */
export class CommandError<T extends string | Buffer = string | Buffer> extends TendrilError {
  /**
   * Everything known about the run: output, exit code, signal, duration,
   * flags. Its output is raw, as the command wrote it (control characters
   * included): escape it before printing it yourself (`escapeTerminalText`).
   */
  readonly result: CommandResult<T>;
  /** The command, as `result.command`. */
  readonly command: string;
  /** Name of the context it ran in. */
  readonly contextName: string;
  /** Its exit code; undefined when it was killed or never started. */
  readonly exitCode: number | undefined;
  /** The signal that killed it, e.g. `'SIGTERM'`; undefined when it exited. */
  readonly signal: string | undefined;

  /**
   * @param result the run's result.
   * @param contextName the context it ran in.
   * @param how how it ended, e.g. `'exit code 2'` or `'timed out after 100 ms and was killed with SIGTERM'`.
   * @param advice what to do, when there is something to say.
   * @param options `cause`: the error behind the failure, if any (a
   *   `HeldBytesError` when the output kept for the result passed
   *   `maxHeldBytes`).
   */
  constructor(
    result: CommandResult<T>,
    contextName: string,
    how: string,
    advice = '',
    options: { cause?: unknown } = {},
  ) {
    const output = tail(result.stderr) || tail(result.stdout);
    super(
      `command failed in context '${contextName}': ${shorten(result.command, 500)}: ${how}${advice ? `; ${advice}` : ''}${output ? `\n${output}` : ''}`,
      'ERR_TENDRIL_COMMAND',
      options.cause === undefined ? undefined : { cause: options.cause },
    );
    this.result = result;
    this.command = result.command;
    this.contextName = contextName;
    this.exitCode = result.exitCode;
    this.signal = result.signal;
  }
}

function shorten(text: string, length: number): string {
  return text.length > length ? `${text.slice(0, length)}...` : text;
}

/** The last `QUOTED_OUTPUT` characters of some output, as text. */
function tail(output: string | Buffer): string {
  const text = typeof output === 'string' ? output : output.subarray(-QUOTED_OUTPUT * 4).toString('utf8');
  const trimmed = text.trim();
  return trimmed.length > QUOTED_OUTPUT ? `...${trimmed.slice(-QUOTED_OUTPUT)}` : trimmed;
}
