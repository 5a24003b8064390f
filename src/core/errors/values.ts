import { escapeTerminalText, KEEP_NEWLINES } from '../terminal-text.js';
import { brand, isBranded } from './base.js';

/**
 * A value cannot be sent: it is of a type the codec does not carry (a
 * function, a symbol, a class instance, a cyclic structure). Raised at the
 * sender, before anything is sent. See `docs/protocol.md` for the types that
 * are supported.
 */
export class UnsupportedValueError extends TypeError {
  /** Stable machine-readable code. */
  readonly code = 'ERR_TENDRIL_UNSUPPORTED_VALUE';
  /** Where in the value the problem is, e.g. `'args[1].handler'`. */
  readonly path: string;

  /**
   * @param path where in the value, e.g. `'args[1].handler'`.
   * @param what the offending value, described.
   */
  constructor(path: string, what: string) {
    // The path names keys of the value, which may be data another context sent: escaped, as TendrilError's messages are.
    super(
      escapeTerminalText(
        `cannot send ${what} at ${path}: only null, undefined, booleans, numbers, bigints, strings, Buffers and typed arrays, arrays, plain objects, Maps, Sets, Dates, RegExps and Errors can be sent`,
        KEEP_NEWLINES,
      ),
    );
    this.name = 'UnsupportedValueError';
    this.path = path;
    brand(this, new.target, ['TendrilError']);
  }

  /** True for this error from any copy of the package (it is also a `TendrilError`). */
  static override [Symbol.hasInstance](value: unknown): boolean {
    // biome-ignore lint/complexity/noThisInStatic: `this` is the class instanceof asked about, a subclass included.
    return isBranded(this, value);
  }
}

/**
 * A function given to `call()` reads variables of the scope it was
 * written in. Functions travel as source text and run in another process,
 * where those variables do not exist; nothing was sent.
 */
export class CapturedVariableError extends TypeError {
  /** Stable machine-readable code. */
  readonly code = 'ERR_TENDRIL_CAPTURED_VARIABLE';
  /** The identifiers the function reads from its enclosing scope. */
  readonly names: string[];

  /**
   * @param names the captured identifiers.
   * @param what the function, e.g. `"function 'deploy'"`.
   * @param contextName the context it was to run in.
   */
  constructor(names: string[], what: string, contextName: string) {
    const list = names.map((name) => `'${name}'`).join(', ');
    super(
      escapeTerminalText(
        `cannot run ${what} in context '${contextName}': it uses ${list} from the scope it was written in, which will not exist there. Functions travel as source text, so pass values as arguments (context.call((${names.join(', ')}) => ..., ${names.join(', ')})), load modules with require() or import() inside the function, and write globals of the target as globalThis.${names[0]}`,
        KEEP_NEWLINES,
      ),
    );
    this.name = 'CapturedVariableError';
    this.names = names;
    brand(this, new.target, ['TendrilError']);
  }

  /** True for this error from any copy of the package (it is also a `TendrilError`). */
  static override [Symbol.hasInstance](value: unknown): boolean {
    // biome-ignore lint/complexity/noThisInStatic: `this` is the class instanceof asked about, a subclass included.
    return isBranded(this, value);
  }
}
