import { constants } from 'node:os';
import { InvalidOptionError } from '../../core/errors.js';
import { abortSignal, integer, knownOptions, milliseconds, optionsObject, text } from '../../core/options.js';

/** Which output a line came from. */
export type OutputStream = 'stdout' | 'stderr';

/** A line of a command's output, as `onOutput` receives it. */
export interface OutputLine {
  /** Name of the context the command ran in. */
  context: string;
  /** The stream it was written to. */
  stream: OutputStream;
  /** The line, decoded as UTF-8, without its newline. */
  line: string;
}

/**
 * Input for a command's stdin: given whole, or a stream (any async iterable
 * of chunks, such as a Node `Readable`) read in the master as the command
 * takes it.
 */
export type CommandInput = string | Uint8Array | AsyncIterable<Uint8Array | string>;

/**
 * Options of `context.exec()` and `context.$`, after execa's where they
 * fit. Every option is checked before anything is sent: a bad one rejects
 * with `InvalidOptionError` naming it.
 */
export interface ExecOptions {
  /**
   * Run `file` and `args` in a shell: `true` for `/bin/sh`, or a shell's
   * path. They are joined with spaces, so quoting is then yours. Default
   * false: `file` is run directly with `args` as its argument vector, and
   * nothing needs quoting.
   */
  shell?: boolean | string;
  /** Working directory, in the context. Default: the context's own. */
  cwd?: string;
  /** Environment variables, added to the context's (see `extendEnv`). */
  env?: Record<string, string>;
  /** With false, `env` replaces the context's environment instead of adding to it. Default true. */
  extendEnv?: boolean;
  /**
   * What the command reads on stdin. A stream is read in the master as the
   * command consumes it (under flow control), and ended (its iterator's
   * `return()`) once the command has ended, whether or not it was read to
   * its end. Default: none (stdin is `/dev/null`).
   */
  input?: CommandInput;
  /**
   * Kill the command's process group after this many ms (with
   * `killSignal`, then SIGKILL after `forceKillAfterDelay`); it then fails
   * with `timedOut` set. Default: no limit. The kill runs in the context;
   * if the command has not ended `forceKillAfterDelay` plus 5 s later, the
   * master gives up on it and rejects all the same.
   */
  timeout?: number;
  /**
   * An AbortSignal that kills the command's process group; it then fails
   * with `isCanceled` set, at the latest `forceKillAfterDelay` plus 5 s
   * after the abort, whatever the context does.
   */
  signal?: AbortSignal;
  /** Signal used to kill on `timeout`, abort, `maxBuffer` and `maxHeldBytes`. Default `'SIGTERM'`. */
  killSignal?: string;
  /** After a kill, send SIGKILL this many ms later if the group is still there; false never. Default 5000. */
  forceKillAfterDelay?: number | false;
  /**
   * Reject with `CommandError` when the command fails: a non-zero exit,
   * killed by a signal, timed out, aborted, over `maxBuffer` or the
   * context's `maxHeldBytes`, or not started. With false the command
   * resolves with the result anyway (`failed` says which). Default true.
   */
  reject?: boolean;
  /**
   * Most bytes kept of each of stdout and stderr. Past it the command is
   * killed and fails with `isMaxBuffer` set; what comes after is let go of.
   * Default 100 MB. What is kept is also charged to the account of the
   * child the context is reached through (the Router's `maxHeldBytes`,
   * default 256 MiB, shared with everything that child makes the master
   * hold): past it the command is killed and fails the same way, its
   * `CommandError`'s `cause` a `HeldBytesError`.
   */
  maxBuffer?: number;
  /**
   * Keep the output for the result. With false, `result.stdout` and
   * `stderr` are empty and the output is only what the iterators and
   * `onOutput` see. Default true.
   */
  buffer?: boolean;
  /** `'utf8'` for strings (default), `'buffer'` for Buffers. */
  encoding?: 'utf8' | 'buffer';
  /** Strip one final newline from `stdout` and `stderr` of the result. Default true. */
  stripFinalNewline?: boolean;
  /** Called with each line of output as it arrives, tagged with the context's name: for live logs. */
  onOutput?: (line: OutputLine) => void;
}

/** `ExecOptions` with defaults filled in. */
export interface CheckedOptions {
  /** `true` for `/bin/sh`, a shell's path, or false (default) to run `file` directly. */
  shell: boolean | string;
  /** Working directory in the context (at most 4096 characters); undefined: the context's own. */
  cwd: string | undefined;
  /** The variables given, each name non-empty without `=` or NUL, at most 4096 of them; undefined when none. */
  env: Record<string, string> | undefined;
  /** Whether `env` adds to the context's environment (default) rather than replacing it. */
  extendEnv: boolean;
  /** What stdin reads; undefined: `/dev/null`. */
  input: CommandInput | undefined;
  /** Ms before the process group is killed, at least 1; undefined: no limit. */
  timeout: number | undefined;
  /** Kills the process group when it aborts. */
  signal: AbortSignal | undefined;
  /** A signal name this system knows; default `'SIGTERM'`. */
  killSignal: string;
  /** Ms after a kill before SIGKILL, default 5000; undefined: never (`false` was given). */
  forceKillAfterDelay: number | undefined;
  /** Whether a failed command rejects (default) rather than resolving with `failed` set. */
  reject: boolean;
  /** Most bytes kept of each of stdout and stderr, at least 1; default 100 MB. */
  maxBuffer: number;
  /** Whether output is kept for the result (default). */
  buffer: boolean;
  /** How the result carries output: strings (default) or Buffers. */
  encoding: 'utf8' | 'buffer';
  /** Whether one final newline is stripped from the result's output (default). */
  stripFinalNewline: boolean;
  /** Called with each line of output as it arrives. */
  onOutput: ((line: OutputLine) => void) | undefined;
}

/** execa's default `maxBuffer`. */
export const DEFAULT_MAX_BUFFER = 100_000_000;
/** execa's default `forceKillAfterDelay`, in ms. */
export const DEFAULT_FORCE_KILL_AFTER = 5000;
const MAX_ENV_VARIABLES = 4096;
/** Longest path (cwd, shell) taken. */
export const MAX_PATH = 4096;

const KNOWN = new Set([
  'shell',
  'cwd',
  'env',
  'extendEnv',
  'input',
  'timeout',
  'signal',
  'killSignal',
  'forceKillAfterDelay',
  'reject',
  'maxBuffer',
  'buffer',
  'encoding',
  'stripFinalNewline',
  'onOutput',
]);

function boolean(value: unknown, option: string, where: string, fallback: boolean): boolean {
  if (value === undefined) return fallback;
  if (typeof value !== 'boolean') throw new InvalidOptionError(option, where, 'true or false', value);
  return value;
}

/** A signal name this system knows, such as `'SIGTERM'`. */
export function signalName(value: unknown, option: string, where: string): string {
  if (typeof value === 'string' && Object.hasOwn(constants.signals, value)) return value;
  throw new InvalidOptionError(option, where, "a signal name such as 'SIGTERM' or 'SIGKILL'", value);
}

/** Checks an `env` option: an object of string values, with sane names. */
export function environment(value: unknown, where: string): Record<string, string> | undefined {
  if (value === undefined) return undefined;
  if (typeof value !== 'object' || value === null || Array.isArray(value)) {
    throw new InvalidOptionError('env', where, 'an object of string values', value);
  }
  const entries = Object.entries(value);
  if (entries.length > MAX_ENV_VARIABLES) {
    throw new InvalidOptionError('env', where, `at most ${MAX_ENV_VARIABLES} variables`, `${entries.length} variables`);
  }
  const env: Record<string, string> = {};
  for (const [name, setting] of entries) {
    if (typeof setting !== 'string' || name === '' || name.includes('=') || name.includes('\0')) {
      throw new InvalidOptionError(
        `env.${name}`,
        where,
        'a string (and its name non-empty, without = or NUL)',
        setting,
      );
    }
    env[name] = setting;
  }
  return env;
}

function commandInput(value: unknown, where: string): CommandInput | undefined {
  if (value === undefined || typeof value === 'string' || value instanceof Uint8Array) return value;
  if (typeof value === 'object' && value !== null && Symbol.asyncIterator in value) {
    return value as AsyncIterable<Uint8Array>;
  }
  throw new InvalidOptionError('input', where, 'a string, a Buffer, or a stream (an async iterable of chunks)', value);
}

/**
 * Checks `options` and fills in the defaults.
 * @throws InvalidOptionError naming the first bad or unknown option.
 */
export function checkOptions(options: ExecOptions | undefined, where: string): CheckedOptions {
  const given = optionsObject(options, where);
  knownOptions(given, KNOWN, where);
  const shell = given.shell;
  if (shell !== undefined && typeof shell !== 'boolean') text(shell, 'shell', where, undefined, MAX_PATH);
  const force = given.forceKillAfterDelay;
  if (given.encoding !== undefined && given.encoding !== 'utf8' && given.encoding !== 'buffer') {
    throw new InvalidOptionError('encoding', where, "'utf8' or 'buffer'", given.encoding);
  }
  if (given.onOutput !== undefined && typeof given.onOutput !== 'function') {
    throw new InvalidOptionError('onOutput', where, 'a function', given.onOutput);
  }
  return {
    shell: shell ?? false,
    cwd: text(given.cwd, 'cwd', where, undefined, MAX_PATH),
    env: environment(given.env, where),
    extendEnv: boolean(given.extendEnv, 'extendEnv', where, true),
    input: commandInput(given.input, where),
    timeout: milliseconds(given.timeout, 'timeout', where, undefined, 1),
    signal: abortSignal(given.signal, 'signal', where),
    killSignal: given.killSignal === undefined ? 'SIGTERM' : signalName(given.killSignal, 'killSignal', where),
    forceKillAfterDelay:
      force === false ? undefined : milliseconds(force, 'forceKillAfterDelay', where, DEFAULT_FORCE_KILL_AFTER),
    reject: boolean(given.reject, 'reject', where, true),
    maxBuffer: integer(given.maxBuffer, 'maxBuffer', where, DEFAULT_MAX_BUFFER, 1, Number.MAX_SAFE_INTEGER),
    buffer: boolean(given.buffer, 'buffer', where, true),
    encoding: given.encoding ?? 'utf8',
    stripFinalNewline: boolean(given.stripFinalNewline, 'stripFinalNewline', where, true),
    onOutput: given.onOutput,
  };
}
