import { createRequire } from 'node:module';
import { TRANSPILER_HELPERS } from '../core/function-source.js';
import { logger } from '../core/log.js';

const debug = logger('calls');

/**
 * What the master learns from a function's source before shipping it,
 * with a real JavaScript parser (acorn) and scope analysis (eslint-scope),
 * both loaded on the first call that needs them.
 */
export interface FunctionAnalysis {
  /**
   * Free identifiers the function reads that no Node context defines as a
   * global: variables of the scope it was written in, which will not exist
   * where it runs. Empty when the source could not be parsed here.
   */
  captured: string[];
  /** True when it calls `require()` or `import()`, or could not be parsed: it needs a base to resolve from. */
  usesModules: boolean;
  /** Specifiers of its literal `require('x')` calls, fetched before it runs. */
  requires: string[];
  /** Start offsets of the `import` keyword of each dynamic `import(...)`, to rename for the receiving context. */
  dynamicImports: number[];
  /** Specifiers of its literal `import('x')` calls (a job loads them before it detaches). */
  imports: string[];
}

interface AstNode {
  type: string;
  start: number;
  end: number;
  [key: string]: unknown;
}

interface ScopeReference {
  identifier: AstNode & { name: string };
  isRead(): boolean;
}

interface Parsers {
  parse(source: string, options: object): AstNode;
  analyze(ast: AstNode, options: object): { globalScope: { through: ScopeReference[] } };
}

let parsers: Parsers | undefined;

function load(): Parsers {
  if (!parsers) {
    const require = createRequire(import.meta.url);
    const acorn = require('acorn') as { parse: Parsers['parse'] };
    const scope = require('eslint-scope') as { analyze: Parsers['analyze'] };
    parsers = { parse: acorn.parse, analyze: scope.analyze };
  }
  return parsers;
}

/**
 * Globals of some supported Node version that this one may lack, so that a
 * function written for a newer target is not refused by an older master.
 */
const NEWER_NODE_GLOBALS = [
  'navigator',
  'Navigator',
  'WebSocket',
  'CloseEvent',
  'ErrorEvent',
  'EventSource',
  'localStorage',
  'sessionStorage',
  'Storage',
  'Iterator',
  'Float16Array',
  'URLPattern',
  'CustomEvent',
  'File',
  'crypto',
  'Crypto',
  'CryptoKey',
  'SubtleCrypto',
  'fetch',
  'Response',
  'Request',
  'Headers',
  'FormData',
  'structuredClone',
  'BroadcastChannel',
  'DOMException',
  'Blob',
  'performance',
  'AsyncDisposableStack',
  'DisposableStack',
  'SuppressedError',
];

/** Identifiers a shipped function may use besides globals: what the receiving context binds for it. */
const BOUND = ['require', ...Object.keys(TRANSPILER_HELPERS)];

let known: Set<string> | undefined;

function isKnownGlobal(name: string): boolean {
  known ??= new Set([...Object.getOwnPropertyNames(globalThis), ...NEWER_NODE_GLOBALS, ...BOUND]);
  return known.has(name);
}

let warmed = false;

/**
 * Loads the parsers and runs them once, so that the first call does not
 * pay for it (about 30 ms). The master does this while its first child
 * starts, when it would otherwise be waiting.
 */
export function warmFunctionAnalysis(): void {
  if (warmed) return;
  warmed = true;
  analyzeFunction('async (a) => { const { b } = require("x"); return [a, b, typeof c, await import("y")]; }');
}

/**
 * Analyses the source of a function expression as it will be compiled in
 * the receiving context (a sloppy-mode script).
 * @param source a function expression, as `functionSource` returns it.
 * @returns what the function uses; a source acorn cannot parse (syntax
 *   newer than it knows) yields no captured names and `usesModules: true`,
 *   so it is shipped as is and judged by the receiving context.
 */
export function analyzeFunction(source: string): FunctionAnalysis {
  const { parse, analyze } = load();
  let ast: AstNode;
  try {
    // One character of prefix: positions in the AST are one more than in `source`.
    // eslint-scope needs `range` on every node.
    ast = parse(`(${source}\n)`, { ecmaVersion: 'latest', sourceType: 'script', ranges: true });
  } catch {
    return { captured: [], usesModules: true, requires: [], dynamicImports: [], imports: [] };
  }
  const typeofOperands = new Set<AstNode>();
  const probed = new Set<string>();
  const requireCalls: AstNode[] = [];
  const dynamicImports: number[] = [];
  const imports = new Set<string>();
  walk(ast, (node) => {
    if (node.type === 'UnaryExpression' && node.operator === 'typeof') {
      const operand = node.argument as AstNode;
      typeofOperands.add(operand);
      if (operand.type === 'Identifier') probed.add(operand.name as string);
    } else if (node.type === 'ImportExpression') {
      dynamicImports.push(node.start - 1);
      const source = node.source as AstNode;
      if (source.type === 'Literal' && typeof source.value === 'string') imports.add(source.value);
    } else if (node.type === 'CallExpression') {
      const callee = node.callee as AstNode;
      if (callee.type === 'Identifier' && callee.name === 'require') requireCalls.push(node);
    }
  });
  let free: ScopeReference[];
  try {
    free = analyze(ast, { ecmaVersion: 2025, sourceType: 'script', fallback: 'iteration' }).globalScope.through;
  } catch (error) {
    debug('cannot analyse the scopes of %s: %s', source.slice(0, 80), (error as Error).message);
    return { captured: [], usesModules: true, requires: [], dynamicImports, imports: [...imports] };
  }
  const captured = new Set<string>();
  let requiresFree = false;
  for (const reference of free) {
    const { name } = reference.identifier;
    if (name === 'require') requiresFree = true;
    // `typeof x` is how code asks whether a global exists (and then uses it
    // where the answer was yes); a write creates one.
    if (!reference.isRead() || typeofOperands.has(reference.identifier) || probed.has(name) || isKnownGlobal(name)) {
      continue;
    }
    captured.add(name);
  }
  const requires = new Set<string>();
  if (requiresFree) {
    for (const call of requireCalls) {
      const [argument] = call.arguments as AstNode[];
      if ((call.arguments as AstNode[]).length === 1 && argument?.type === 'Literal') {
        if (typeof argument.value === 'string') requires.add(argument.value);
      }
    }
  }
  return {
    captured: [...captured],
    usesModules: requiresFree || dynamicImports.length > 0,
    requires: [...requires],
    dynamicImports,
    imports: [...imports],
  };
}

/** Calls `visit` on every node of an ESTree tree. */
function walk(node: AstNode, visit: (node: AstNode) => void): void {
  visit(node);
  for (const key in node) {
    const value = node[key];
    if (Array.isArray(value)) {
      for (const item of value) if (isNode(item)) walk(item, visit);
    } else if (isNode(value)) {
      walk(value, visit);
    }
  }
}

function isNode(value: unknown): value is AstNode {
  return typeof value === 'object' && value !== null && typeof (value as AstNode).type === 'string';
}
