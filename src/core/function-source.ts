import * as vm from 'node:vm';
import type { CallLocation } from './protocol/call-function.js';

/**
 * Shipping functions by source. The caller's function is turned into an
 * expression once (cached per function object); the receiving context
 * compiles each distinct source once (cached per source text).
 */

const sources = new WeakMap<(...args: never[]) => unknown, string>();
const byText = new Map<string, string>();
const MAX_CACHED = 1000;

// biome-ignore lint/complexity/noBannedTypes: any callable is accepted and checked at run time.
type AnyFunction = Function;

/**
 * Returns `fn`'s source as a standalone function expression.
 * @throws TypeError when `fn` is not a function, is native or bound (its
 *   source is not available), is a class, or does not compile on its own.
 */
export function functionSource(fn: AnyFunction): string {
  if (typeof fn !== 'function') throw new TypeError(`expected a function to call, got ${typeof fn}`);
  const cached = sources.get(fn as (...args: never[]) => unknown);
  if (cached !== undefined) return cached;
  const text = Function.prototype.toString.call(fn);
  // A function literal written inside a loop is a new object each time but the same text.
  let source = byText.get(text);
  if (source === undefined) {
    source = checkedExpression(text, fn.name);
    if (byText.size >= MAX_CACHED) byText.delete(byText.keys().next().value as string);
    byText.set(text, source);
  }
  sources.set(fn as (...args: never[]) => unknown, source);
  return source;
}

function checkedExpression(text: string, fnName: string): string {
  const label = fnName ? `function '${fnName}'` : 'an anonymous function';
  if (/\{\s*\[native code\]\s*\}\s*$/.test(text)) {
    throw new TypeError(
      `cannot ship ${label}: it is native or bound, so its source is not available; pass a plain function`,
    );
  }
  if (/^class\b/.test(text)) throw new TypeError(`cannot ship ${label}: it is a class; pass a function`);
  const source = asExpression(text);
  if (source === undefined) {
    throw new TypeError(`cannot ship ${label}: its source does not compile as a standalone function expression`);
  }
  return source;
}

/** Turns function text (including method shorthand) into an expression, or undefined. */
function asExpression(text: string): string | undefined {
  const candidates = [text];
  // Method shorthand (`name() {}`, `async name() {}`, `*gen() {}`) is not an expression on its own.
  const method = /^(async\s+)?(\*?)\s*/.exec(text);
  if (method) {
    const rest = text.slice(method[0].length);
    candidates.push(`${method[1] ?? ''}function${method[2] ? '*' : ''} ${rest}`);
  }
  for (const candidate of candidates) {
    try {
      new vm.Script(`(${candidate}\n)`);
      return candidate;
    } catch {
      // Try the next form.
    }
  }
  return undefined;
}

/**
 * Helpers that compilers put at the top of a module and call from inside
 * its functions, so a function compiled by them refers to names that do
 * not travel with its source: esbuild's `keepNames` (tsx, and anything
 * else built on esbuild) wraps named functions and classes in `__name`,
 * esbuild and swc define class fields through `__publicField` and
 * `_define_property`. The receiving context defines the ones a source
 * mentions, with the same behaviour.
 */
export const TRANSPILER_HELPERS: Readonly<Record<string, string>> = {
  __name: '(target, value) => Object.defineProperty(target, "name", { value: value, configurable: true })',
  __defProp: 'Object.defineProperty',
  __defNormalProp:
    '(obj, key, value) => key in obj ? Object.defineProperty(obj, key, { enumerable: true, configurable: true, writable: true, value: value }) : (obj[key] = value)',
  __publicField:
    '(obj, key, value) => { var k = typeof key !== "symbol" ? key + "" : key; if (k in obj) Object.defineProperty(obj, k, { enumerable: true, configurable: true, writable: true, value: value }); else obj[k] = value; return value; }',
  _define_property:
    '(obj, key, value) => { if (key in obj) Object.defineProperty(obj, key, { value: value, enumerable: true, configurable: true, writable: true }); else obj[key] = value; return obj; }',
};

/** Declarations of the transpiler helpers `source` mentions. */
function helpersFor(source: string): string {
  let declarations = '';
  for (const name in TRANSPILER_HELPERS) {
    if (source.includes(name)) declarations += `var ${name} = ${TRANSPILER_HELPERS[name]};`;
  }
  return declarations;
}

/**
 * Compiled functions in the receiving context, by source text, then by
 * location (`''` for none): the same source shipped from two places
 * compiles twice, so that each one's frames name its own place.
 */
const compiled = new Map<string, Map<string, FunctionFactory>>();
/** Most locations one source text is compiled for; past it they start again. */
const MAX_LOCATIONS = 16;
/** Files functions were compiled as (see `isShippedFrame`), oldest first. */
const shippedFiles = new Set<string>();

/** Binds a compiled function to the `require` and `import()` its code sees. */
export type FunctionFactory = (
  requireFn: (id: string) => unknown,
  importFn: (id: string) => Promise<unknown>,
) => AnyFunction;

/**
 * Compiles shipped source. The result binds the function's free `require`
 * and its `import()` calls (which the master rewrote to
 * `__tendril_import(...)`) per call, so one compilation serves every base
 * directory. The code is compiled as if at `location`, so its stack frames
 * and compilation errors name the file and line the function was written
 * at (`at deploy (/home/me/deploy.js:12:5)`); without one, they name the
 * function (`tendril-call:deploy`). Each source is compiled once per
 * location.
 * @param source a function expression (see `functionSource`).
 * @param location where it was written (see `CallLocation`), if known.
 * @throws SyntaxError when the source does not compile.
 */
export function compileFunction(source: string, location?: CallLocation): FunctionFactory {
  const where = location ? `${location[1]}:${location[2]}:${location[0]}` : '';
  let forSource = compiled.get(source);
  const hit = forSource?.get(where);
  if (hit) return hit;
  const prefix = `(function (require, __tendril_import) { ${helpersFor(source)}return (`;
  let options: vm.RunningScriptOptions;
  if (location) {
    // The source starts after the prefix on the first line: a column offset that may be negative makes up for it.
    options = { filename: location[0], lineOffset: location[1], columnOffset: location[2] - prefix.length };
    if (shippedFiles.size >= MAX_CACHED) shippedFiles.delete(shippedFiles.values().next().value as string);
    shippedFiles.add(location[0]);
  } else {
    const name = /^(?:async\s+)?function\s*\*?\s*([\w$]+)/.exec(source)?.[1] ?? 'anonymous';
    options = { filename: `tendril-call:${name}` };
  }
  const factory = vm.runInThisContext(`${prefix}${source}\n); })`, options) as FunctionFactory;
  if (!forSource) {
    if (compiled.size >= MAX_CACHED) compiled.delete(compiled.keys().next().value as string);
    forSource = new Map();
    compiled.set(source, forSource);
  } else if (forSource.size >= MAX_LOCATIONS) forSource.clear();
  forSource.set(where, factory);
  return factory;
}

/**
 * Whether a line of a stack trace is a frame of a shipped function: one
 * compiled here without a location (`tendril-call:`), or in a file one was
 * compiled as.
 */
export function isShippedFrame(frame: string): boolean {
  if (frame.indexOf('tendril-call:') !== -1) return true;
  for (const file of shippedFiles) {
    if (frame.indexOf(`(${file}:`) !== -1 || frame.indexOf(`at ${file}:`) !== -1) return true;
  }
  return false;
}
