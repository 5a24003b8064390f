import { existsSync } from 'node:fs';
import { dirname, extname, join } from 'node:path';
// The WebAssembly lexer compiles itself synchronously on first use.
import * as esModuleLexer from 'es-module-lexer';
import type { FileRecord } from '../core/module-protocol.js';
import { readRegularFile } from '../core/regular-file.js';
import { loadEsbuild } from './esbuild.js';

/** A file as it is shipped, before its dependencies are attached. */
export type ShippedSource = Pick<FileRecord, 'format' | 'source'>;

/**
 * Reads module files and turns them into what a child evaluates: CommonJS
 * as is, ES modules converted to CommonJS by esbuild, JSON as text. Every
 * `import(...)` call is renamed `__tendril_import(...)` in place (same
 * line), so a child serves dynamic imports from the master rather than
 * from its own disk. Results are cached per path for the master's life.
 */
export class ModuleSources {
  private readonly cache = new Map<string, Promise<ShippedSource>>();
  private readonly packageTypes = new Map<string, string | undefined>();

  /** The shipped form of the file at `path`. Never rejects: problems become `format: 'error'`. */
  get(path: string): Promise<ShippedSource> {
    let source = this.cache.get(path);
    if (!source) {
      source = this.load(path);
      this.cache.set(path, source);
    }
    return source;
  }

  /** Bytes read from disk so far, for stats. */
  filesRead = 0;

  private async load(path: string): Promise<ShippedSource> {
    let text: string;
    try {
      // A FIFO put where a module is would block the master for good: only a regular file is read.
      text = readRegularFile(path, { follow: true }).toString('utf8');
      this.filesRead++;
    } catch (error) {
      return { format: 'error', source: `cannot read ${path}: ${(error as Error).message}` };
    }
    if (path.endsWith('.json')) return { format: 'json', source: text };
    // A shebang is not JavaScript; keep the line, so line numbers still match the file.
    if (text.startsWith('#!')) text = `//${text.slice(2)}`;
    const extension = extname(path);
    const typescript = TYPESCRIPT.has(extension);
    if (typescript) {
      try {
        text = await stripTypes(text, path, extension);
      } catch (error) {
        return { format: 'error', source: describeBuildError(error, path) };
      }
    }
    let isModule =
      extension === '.mjs' ||
      extension === '.mts' ||
      ((extension === '.js' || extension === '.ts' || extension === '.tsx') && this.packageType(path) === 'module');
    try {
      const [imports, , , hasModuleSyntax] = esModuleLexer.parse(text, path);
      if (
        hasModuleSyntax &&
        !isModule &&
        extension !== '.cjs' &&
        extension !== '.cts' &&
        // Node's syntax detection for .js files in packages without a "type"; TypeScript
        // runners (tsx, ts-node) accept import syntax in any .ts file.
        (typescript || this.packageType(path) === undefined)
      ) {
        isModule = true;
      }
      text = renameDynamicImports(text, imports);
    } catch {
      // The lexer gave up (unusual CommonJS syntax); ship as is, and let the real parser judge.
    }
    if (!isModule) return { format: 'cjs', source: text };
    try {
      const result = await (await loadEsbuild()).transform(text, {
        format: 'cjs',
        platform: 'node',
        target: 'esnext',
        loader: 'js',
        sourcefile: path,
        define: { 'import.meta': '__tendril_meta' },
        logLevel: 'silent',
      });
      return { format: 'cjs', source: result.code };
    } catch (error) {
      return { format: 'error', source: describeBuildError(error, path) };
    }
  }

  /** The `type` of the nearest package.json above `path`. */
  private packageType(path: string): string | undefined {
    let dir = dirname(path);
    const visited: string[] = [];
    for (;;) {
      if (this.packageTypes.has(dir)) break;
      visited.push(dir);
      const manifest = join(dir, 'package.json');
      if (existsSync(manifest)) {
        let type: string | undefined;
        try {
          type = (JSON.parse(readRegularFile(manifest, { follow: true }).toString('utf8')) as { type?: string }).type;
        } catch {
          type = undefined;
        }
        this.packageTypes.set(dir, type);
        break;
      }
      const parent = dirname(dir);
      if (parent === dir) {
        this.packageTypes.set(dir, undefined);
        break;
      }
      dir = parent;
    }
    const type = this.packageTypes.get(dir);
    for (const seen of visited) this.packageTypes.set(seen, type);
    return type;
  }
}

const TYPESCRIPT = new Set(['.ts', '.mts', '.cts', '.tsx']);

/** TypeScript as JavaScript, module syntax kept (the shipped form is decided afterwards). */
async function stripTypes(text: string, path: string, extension: string): Promise<string> {
  const result = await (await loadEsbuild()).transform(text, {
    loader: extension === '.tsx' ? 'tsx' : 'ts',
    sourcefile: path,
    target: 'esnext',
    logLevel: 'silent',
  });
  return result.code;
}

/** Renames the `import` keyword of every dynamic `import(...)` to `__tendril_import`. */
export function renameDynamicImports(text: string, imports: readonly esModuleLexer.Import[]): string {
  let out = '';
  let last = 0;
  for (const entry of imports) {
    if (entry.type !== 'dynamic') continue;
    out += `${text.slice(last, entry.importStart)}__tendril_import`;
    last = entry.importStart + 'import'.length;
  }
  return last === 0 ? text : out + text.slice(last);
}

/** Where an esbuild error is, as esbuild reports it (a 0-based column). */
interface ErrorLocation {
  file: string;
  line: number;
  column: number;
}

/**
 * `file:line:column: message` for the first esbuild error, or the error's
 * message, never quoting the file (see `withoutFileText`).
 */
export function describeBuildError(error: unknown, fallbackFile: string): string {
  const first = (error as { errors?: { text: string; location?: ErrorLocation | null }[] }).errors?.[0];
  if (!first) return `${fallbackFile}: ${withoutFileText((error as Error).message)}`;
  return first.location
    ? describeLocatedError(first.location.file, first.location, first.text)
    : `${fallbackFile}: ${withoutFileText(first.text)}`;
}

/** `file:line:column: message` (a 1-based column) for an esbuild error at `location` in `file`. */
export function describeLocatedError(file: string, location: ErrorLocation, text: string): string {
  return `${file}:${location.line}:${location.column + 1}: ${withoutFileText(text)}`;
}

/** Words esbuild names as what it expected: JavaScript's own, so never a file's secret. */
const KEYWORDS = new Set(
  (
    'as async await break case catch class const continue debugger default delete do else enum export extends ' +
    'false finally for from function get if import in instanceof let new null of return set static super switch ' +
    'this throw true try typeof var void while with yield'
  ).split(' '),
);

/**
 * esbuild's message with every quoted fragment that could be the file's
 * text replaced by `"…"`: `Expected ";" but found "AKIA…"` becomes
 * `Expected ";" but found "…"`. A fragment is kept only when it is a
 * keyword or up to three punctuation characters (what esbuild expected),
 * so an unparsable file's error says where and what kind, never what the
 * file holds (a key in a file that is not JavaScript, say).
 */
export function withoutFileText(text: string): string {
  // An unclosed quote runs to the end: nothing after it is kept. Every quote that starts a fragment
  // ends one (a lone backslash at the end too), so no run is scanned again from a quote inside it.
  return text.replace(/"(?:[^"\\]|\\[\s\S])*(?:"|\\?$)/g, (quoted) => {
    const inner = quoted.length > 1 && quoted.endsWith('"') ? quoted.slice(1, -1) : quoted;
    return /^[^\w\s"'`\\]{1,3}$/.test(inner) || KEYWORDS.has(inner) ? quoted : '"…"';
  });
}
