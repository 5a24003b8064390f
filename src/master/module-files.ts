import { closeSync, openSync, readFileSync, readSync, realpathSync, statSync } from 'node:fs';
import { basename, dirname, extname, resolve as resolvePath, sep } from 'node:path';

/**
 * Extensions of the files a module system loads: Node's own (`.js`,
 * `.mjs`, `.cjs`, `.json`) and those of TypeScript runners (`.ts`, `.mts`,
 * `.cts`, and `.tsx`, which tsx and ts-node load). `.node` addons are
 * never shipped, whatever serves them.
 */
export const MODULE_EXTENSIONS: readonly string[] = ['.js', '.mjs', '.cjs', '.ts', '.mts', '.cts', '.tsx', '.json'];

const EXTENSIONS = new Set(MODULE_EXTENSIONS);

/** tendril's own judgement of a file inside the module roots, as a `moduleFilter` is given it. */
export interface ModuleVerdict {
  /** True when tendril serves the file by default. */
  served: boolean;
  /**
   * Present when `served` is false: the rule the file breaks, as a clause
   * fit for an error message (`'.pem' files are not modules...`).
   */
  reason?: string;
}

/**
 * The Router's `moduleFilter`: decides, for a file inside the module roots,
 * whether children may be sent it.
 * @param path the file's real path (symlinks resolved), absolute.
 * @param verdict tendril's own judgement; return `verdict.served` to keep it.
 * @returns true to serve the file, false to refuse it.
 */
export type ModuleFilter = (path: string, verdict: ModuleVerdict) => boolean;

/**
 * Whether tendril serves the file at `real` (a real path) by default,
 * given the module roots that contain it: a regular file, with no segment
 * below those roots starting with `.` outside `node_modules` (dotfiles,
 * `.git`, `.ssh`, `.aws`: `node_modules/.pnpm` and `.prisma` are
 * packages), with a module extension, or without an extension when Node
 * would run it as a program: the `bin` of its package, or a file starting
 * with `#!`. Only the first two bytes of such a file are read, to see the
 * `#!`; nothing of any file is ever put in the verdict.
 */
export function moduleVerdict(real: string, roots: readonly string[]): ModuleVerdict {
  const containing = roots.filter((root) => within(real, root));
  let hidden: string | undefined;
  for (const root of containing.length > 0 ? containing : [sep]) {
    hidden = dotSegment(real, root);
    if (hidden === undefined) break;
  }
  if (hidden !== undefined) {
    return {
      served: false,
      reason: `${hidden === basename(real) ? `'${hidden}' is a dotfile` : `it is in the dot-directory '${hidden}'`}: dotfiles and dot-directories (.git, .ssh, .aws...) are never served outside node_modules`,
    };
  }
  if (!isFile(real)) return { served: false, reason: 'it is not a regular file' };
  const extension = extname(real);
  if (EXTENSIONS.has(extension)) return { served: true };
  if (extension !== '') {
    return {
      served: false,
      reason: `'${extension}' files are not modules: only ${MODULE_EXTENSIONS.join(' ')} files, and programs without an extension, are served`,
    };
  }
  if (startsWithShebang(real) || isPackageBin(real)) return { served: true };
  return {
    served: false,
    reason:
      'a file without an extension is served only as a program: a bin of its package.json, or a file whose first line starts with #!',
  };
}

/** True when `path` is `root` or lies below it. */
function within(path: string, root: string): boolean {
  return path === root || path.startsWith(root === sep ? sep : `${root}${sep}`);
}

/**
 * The first segment of `real` below `root` (which contains it) that starts
 * with `.` and has no `node_modules` segment before it in the whole path,
 * or undefined when there is none. A root's own path may have dot
 * segments: the program chose it.
 */
function dotSegment(real: string, root: string): string | undefined {
  let packaged = root.split(sep).includes('node_modules');
  for (const segment of real.slice(root.length).split(sep)) {
    if (segment === 'node_modules') packaged = true;
    else if (!packaged && segment.startsWith('.')) return segment;
  }
  return undefined;
}

function isFile(path: string): boolean {
  try {
    return statSync(path).isFile();
  } catch {
    return false;
  }
}

/** True when the regular file at `path` starts with `#!`: Node runs it as a script. */
function startsWithShebang(path: string): boolean {
  let fd: number | undefined;
  try {
    fd = openSync(path, 'r');
    const head = Buffer.alloc(2);
    return readSync(fd, head, 0, 2, 0) === 2 && head[0] === 0x23 && head[1] === 0x21;
  } catch {
    return false;
  } finally {
    if (fd !== undefined) closeSync(fd);
  }
}

/**
 * True when `real` is a `bin` (a string, or a value of the object) of the
 * package it lies in: of a package.json between it and the first one
 * naming a package (nested package.json files marking `type` included).
 */
function isPackageBin(real: string): boolean {
  for (let dir = dirname(real); ; dir = dirname(dir)) {
    const manifest = readManifest(`${dir}${sep}package.json`);
    if (manifest !== undefined) {
      const bins = typeof manifest.bin === 'string' ? [manifest.bin] : Object.values(manifest.bin ?? {});
      for (const bin of bins) {
        if (typeof bin === 'string' && realpathOrUndefined(resolvePath(dir, bin)) === real) return true;
      }
      if (typeof manifest.name === 'string') return false;
    }
    if (basename(dir) === 'node_modules' || dirname(dir) === dir) return false;
  }
}

function readManifest(path: string): { name?: unknown; bin?: unknown } | undefined {
  try {
    const manifest = JSON.parse(readFileSync(path, 'utf8')) as unknown;
    return typeof manifest === 'object' && manifest !== null
      ? (manifest as { name?: unknown; bin?: unknown })
      : undefined;
  } catch {
    return undefined;
  }
}

function realpathOrUndefined(path: string): string | undefined {
  try {
    return realpathSync(path);
  } catch {
    return undefined;
  }
}
