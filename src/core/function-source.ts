import * as vm from 'node:vm';

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

/** Compiled functions by source text, in the receiving context. */
const compiled = new Map<string, FunctionFactory>();

/** Binds a compiled function to the `require` and `import()` its code sees. */
export type FunctionFactory = (
  requireFn: (id: string) => unknown,
  importFn: (id: string) => Promise<unknown>,
) => AnyFunction;

/**
 * Compiles shipped source. The result binds the function's free `require`
 * and its `import()` calls (which the master rewrote to
 * `__tendril_import(...)`) per call, so one compilation serves every base
 * directory. Compilation errors carry a filename naming the function.
 * @throws SyntaxError when the source does not compile.
 */
export function compileFunction(source: string): FunctionFactory {
  const hit = compiled.get(source);
  if (hit) return hit;
  const name = /^(?:async\s+)?function\s*\*?\s*([\w$]+)/.exec(source)?.[1] ?? 'anonymous';
  const factory = vm.runInThisContext(
    `(function (require, __tendril_import) { ${helpersFor(source)}return (${source}\n); })`,
    {
      filename: `tendril-call:${name}`,
    },
  ) as FunctionFactory;
  if (compiled.size >= MAX_CACHED) compiled.delete(compiled.keys().next().value as string);
  compiled.set(source, factory);
  return factory;
}
