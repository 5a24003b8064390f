/**
 * Shapes exchanged by module forwarding (GET_MODULE) and the closure
 * computation every serving context shares. Paths are always paths on the
 * master's file system: a child's modules live in memory under the names
 * the master gave them.
 */

/** How a specifier is being loaded: Node resolves `require` and `import` with different conditions. */
export type ModuleKind = 'require' | 'import';

/** What a specifier resolved to, as decided by the master. */
export type Target =
  /** A file the master will ship. */
  | { path: string }
  /** A Node built-in; never shipped. */
  | { builtin: string }
  /** tendril's core, already running in every context. */
  | { core: true }
  /** A native addon (`.node`); never shipped. `native` is the package name. */
  | { native: string; path: string }
  /** Nothing matched; `missing` is the message to throw (code MODULE_NOT_FOUND). */
  | { missing: string }
  /** The master will not serve it; `refused` says why. */
  | { refused: string };

/** One shipped file. */
export interface FileRecord {
  /** Absolute path on the master; the module's `__filename` in the child. */
  path: string;
  /**
   * `cjs`: CommonJS source (ES modules arrive converted); `json`: JSON text;
   * `error`: the file cannot be loaded and `source` is the message to throw
   * (a syntax error with file and line, say).
   */
  format: 'cjs' | 'json' | 'error';
  /** The text to evaluate. */
  source: string;
  /** Static specifiers in this file and what each resolved to. */
  deps: Record<string, Target>;
}

/** A GET_MODULE request: resolve `specs` as written in file `from`. */
export interface ModuleRequest {
  /** The file the specifiers appear in (or a file name in the base directory of a call). */
  from: string;
  /** Specifiers to resolve, each with its static closure. */
  specs: string[];
  /** Whether they are being `require()`d or `import()`ed. */
  kind: ModuleKind;
}

/** The reply: what each specifier resolved to, and the files of their closure the requester lacks. */
export interface ModuleReply {
  /** Each requested specifier's target. */
  resolved: Record<string, Target>;
  /** Files of their static closures that the requester was not sent before. */
  files: FileRecord[];
}

/** The name a GET_MODULE request and the importer use for a resolution. */
export function resolutionKey(kind: ModuleKind, from: string, spec: string): string {
  return `${kind}\0${from}\0${spec}`;
}

/**
 * Paths of every file statically reachable from `targets`, following each
 * file's resolved dependencies as `depsOf` gives them. Files it knows
 * nothing of are not followed (the caller must hold every file it serves).
 */
export function closureOf(
  targets: Iterable<Target>,
  depsOf: (path: string) => Readonly<Record<string, Target>> | undefined,
): string[] {
  const seen = new Set<string>();
  const queue: string[] = [];
  const visit = (target: Target) => {
    if ('path' in target && !('native' in target) && !seen.has(target.path)) {
      seen.add(target.path);
      queue.push(target.path);
    }
  };
  for (const target of targets) visit(target);
  while (queue.length > 0) {
    const deps = depsOf(queue.shift() as string);
    if (deps) for (const dep of Object.values(deps)) visit(dep);
  }
  return [...seen];
}

/** Specifiers of Node built-ins, with or without `node:`. */
export function isBuiltinSpecifier(spec: string, builtins: readonly string[]): boolean {
  return spec.startsWith('node:') || builtins.includes(spec);
}

/** True for bare specifiers (`lodash`, `@scope/pkg/sub`), as opposed to relative or absolute ones. */
export function isBareSpecifier(spec: string): boolean {
  return !(spec.startsWith('.') || spec.startsWith('/') || spec.startsWith('file:') || spec.startsWith('#'));
}

/** The package a file belongs to, from its path: the part after the last `node_modules/`. */
export function packageNameOf(path: string): string | undefined {
  const index = path.lastIndexOf('/node_modules/');
  if (index === -1) return undefined;
  const parts = path.slice(index + '/node_modules/'.length).split('/');
  return parts[0]?.startsWith('@') ? `${parts[0]}/${parts[1]}` : parts[0];
}
