import { inspect } from 'node:util';
import createDebug from 'debug';
import { escapeTerminalText } from './terminal-text.js';

/**
 * A `debug` logger, as tendril uses it. Declared here rather than taken
 * from `@types/debug`, so a program's type check never needs those types.
 */
export interface Logger {
  /** Writes a line when the namespace is enabled; printf-style `%s`, `%d`, `%o`, `%O`. */
  (format: string, ...args: unknown[]): void;
  /** True when the namespace is enabled. */
  readonly enabled: boolean;
}

/**
 * Diagnostics use the `debug` package under `tendril:*` namespaces
 * (`DEBUG=tendril:* node app.js`). Output of remote code arrives as
 * `LogRecord`s and is shown under `tendril:<context name>`.
 *
 * What a line quotes often came from another context (a module it asked
 * for, an error it sent, what ssh's server said), and `debug` writes it on
 * the terminal as it is: every argument, and the namespace, is escaped for
 * a terminal (`escapeTerminalText`), so it can neither drive the terminal
 * nor start a forged line. Strings are escaped on one line; objects are
 * shown as `util.inspect` shows them (on one line for `%o`), escaped too,
 * since inspect leaves bidi and invisible characters as they are. Only
 * when enabled: a disabled logger costs what `debug`'s does.
 */
export function logger(namespace: string): Logger {
  const log = createDebug(`tendril:${escapeTerminalText(namespace)}`);
  const escaped = (format: string, ...args: unknown[]): void => {
    if (!log.enabled) return;
    let next = 0;
    // The directives as `debug` reads them; each object argument becomes the escaped text of its inspection.
    const line = format.replace(/%([a-zA-Z%])/g, (directive, kind: string) => {
      if (kind === '%' || next >= args.length) return directive;
      const at = next++;
      const shown = escapedArgument(args[at], kind);
      if (shown === undefined) return directive;
      args[at] = shown;
      return '%s';
    });
    // Arguments past the directives, which util.format appends.
    for (let at = next; at < args.length; at++) args[at] = escapedArgument(args[at], 'O') ?? args[at];
    log(line, ...args);
  };
  Object.defineProperty(escaped, 'enabled', { get: () => log.enabled, enumerable: true });
  return escaped as Logger;
}

/** The `toString`s of built-in prototypes, which `%s` does not call (util.format inspects the object instead). */
const BUILT_IN_TO_STRING: ReadonlySet<unknown> = new Set([
  Object.prototype.toString,
  Error.prototype.toString,
  Array.prototype.toString,
  Function.prototype.toString,
  Date.prototype.toString,
  RegExp.prototype.toString,
]);

/**
 * A `debug` argument of directive `kind` (`s`, `o`, `O`...) as escaped
 * text, as util.format would show it: `%s` of an object with a
 * `toString` of its own (a Message) is that text, any other object is
 * inspected (on one line but for `%O`); undefined for a number, boolean
 * or other value that prints no text of its own.
 */
function escapedArgument(value: unknown, kind: string): string | undefined {
  if (typeof value === 'string') return escapeTerminalText(value);
  if (value === null || (typeof value !== 'object' && typeof value !== 'function')) return undefined;
  const lines = kind === 'O';
  let text: string;
  try {
    const own = (value as { toString?: unknown }).toString;
    text =
      kind === 's' && typeof own === 'function' && !BUILT_IN_TO_STRING.has(own)
        ? String(value)
        : inspect(value, lines ? {} : { breakLength: Number.POSITIVE_INFINITY });
  } catch {
    text = Object.prototype.toString.call(value);
  }
  return escapeTerminalText(text, { keepNewlines: lines });
}

/** One line of output written by a context (its stdout and stderr, and those of processes it spawned). */
export interface LogRecord {
  /** ID of the context that wrote it. */
  contextId: number;
  /** Name of the context that wrote it. */
  contextName: string;
  /** The line, without its trailing newline. Very long lines arrive in pieces of at most 64 KiB. */
  text: string;
}

/** Longest line kept before it is emitted in pieces, in bytes. */
export const MAX_LINE_BYTES = 64 * 1024;

/**
 * Splits a byte stream into lines. Bytes are kept until a newline arrives
 * or `MAX_LINE_BYTES` accumulate, so memory per stream stays bounded even
 * when a process writes megabytes without a newline.
 */
export class LineSplitter {
  private parts: Buffer[] = [];
  private size = 0;

  /** @param onLine called with each line, without its newline. */
  constructor(private readonly onLine: (line: string) => void) {}

  /** Feeds bytes; calls `onLine` for every complete line. */
  push(chunk: Buffer): void {
    let start = 0;
    for (;;) {
      const newline = chunk.indexOf(0x0a, start);
      const stop = newline === -1 ? chunk.length : newline;
      // Emit whole slices of the size limit if the pending line grows past it.
      while (this.size + (stop - start) > MAX_LINE_BYTES) {
        const take = MAX_LINE_BYTES - this.size;
        this.parts.push(chunk.subarray(start, start + take));
        this.size += take;
        this.emit();
        start += take;
      }
      if (newline === -1) {
        if (start < chunk.length) {
          this.parts.push(chunk.subarray(start));
          this.size += chunk.length - start;
        }
        return;
      }
      this.parts.push(chunk.subarray(start, newline));
      this.size += newline - start;
      this.emit();
      start = newline + 1;
    }
  }

  /** Emits what is left as a final line, if anything. */
  flush(): void {
    if (this.size > 0) this.emit();
  }

  private emit(): void {
    const line = Buffer.concat(this.parts, this.size).toString('utf8');
    this.parts = [];
    this.size = 0;
    this.onLine(line.endsWith('\r') ? line.slice(0, -1) : line);
  }
}
