import { callOrigin, toPathOrSpecifier } from './call-base.js';
import { functionSource } from './function-source.js';
import type { CallLocation } from './protocol/call-function.js';

/** A function as it is shipped. */
export interface PreparedCall {
  /** Source text of a function expression. */
  source: string;
  /** Specifiers it requires literally, resolved from the call's base before it runs. */
  preload: string[];
  /** Specifiers of its literal `import('x')` calls, when known: a job loads them before it detaches. */
  imports?: string[];
  /** Variables it reads from the scope it was written in (see `CapturedVariableError`). */
  captured: string[];
  /** True when it may `require()` or `import()`: the call then carries the file it resolves from. */
  usesModules: boolean;
  /** Where it was written, when that is known: its stack frames then name that file and line. */
  location?: CallLocation;
}

/**
 * How a context ships the calls it makes: the master (and a process joined
 * to it) analyses sources and serves the modules calls resolve, a child
 * ships them as they are. Set per switch with `setCallPreparation`.
 */
export interface CallPreparation {
  /**
   * How a function is shipped: its source, with `import()` calls rewritten
   * for the receiving context, and the specifiers it requires literally
   * (fetched before it runs).
   * @throws TypeError as `functionSource`.
   */
  prepare(fn: Parameters<typeof functionSource>[0]): PreparedCall;
  /**
   * The file a call's `require()` and `import()` resolve from, given the
   * call's `base` option (undefined: the default) and the function shipped,
   * if any; undefined for the receiving context's default. Must be called
   * synchronously from the method the program called.
   */
  resolveBase(location: string | URL | undefined, fn?: object): string | undefined;
  /**
   * Records that calls may load modules from `location` (a module path the
   * program named) and returns it.
   */
  trustModuleOrigin(location: string): string;
}

/**
 * A child's: the source as it is, the base as a path (a module by its
 * extension, else a directory: paths name the master's files, so they
 * cannot be looked at here), origins as they are.
 */
export const SHIP_AS_IS: CallPreparation = {
  prepare: (fn) => ({ source: functionSource(fn), preload: [], captured: [], usesModules: true }),
  resolveBase(location) {
    if (location === undefined) return undefined;
    const path = toPathOrSpecifier(location);
    return /\.(?:[cm]?[jt]sx?|json)$/.test(path) ? path : callOrigin(path);
  },
  trustModuleOrigin: (location) => location,
};

const preparations = new WeakMap<object, CallPreparation>();

/** Makes `preparation` how calls made through `router` (a message switch) are shipped. */
export function setCallPreparation(router: object, preparation: CallPreparation): void {
  preparations.set(router, preparation);
}

/** How calls made through `router` are shipped: what `setCallPreparation` set, else `SHIP_AS_IS`. */
export function callPreparationOf(router: object): CallPreparation {
  return preparations.get(router) ?? SHIP_AS_IS;
}
