import { closeSync, readSync, realpathSync, statSync } from 'node:fs';
import { basename, dirname, extname, resolve as resolvePath, sep } from 'node:path';
import { openRegularFile, readRegularFile } from '../core/regular-file.js';

/**
 * Extensions of the files a module system loads: Node's own (`.js`,
 * `.mjs`, `.cjs`, `.json`) and those of TypeScript runners (`.ts`, `.mts`,
 * `.cts`, and `.tsx`, which tsx and ts-node load). `.node` addons are
 * never shipped, whatever serves them.
 */
export const MODULE_EXTENSIONS: readonly string[] = ['.js', '.mjs', '.cjs', '.ts', '.mts', '.cts', '.tsx', '.json'];

const EXTENSIONS = new Set(MODULE_EXTENSIONS);

/**
 * Programs that run a file as Node does, by the base name a `#!` line
 * gives them: Node itself (Debian's `nodejs` too) and the TypeScript
 * runners built on it. A script for any other interpreter (python3, bash,
 * deno) is not a module, even when it happens to parse as JavaScript.
 */
const NODE_INTERPRETERS = new Set(['node', 'nodejs', 'tsx', 'ts-node', 'ts-node-esm']);

/** Most bytes read of a file without an extension, to find its `#!` line; a longer line is not recognised. */
const SHEBANG_BYTES = 256;

/** `env` options that take the next word as their value (GNU and BSD env). */
const ENV_OPTIONS_WITH_VALUE = new Set(['-u', '--unset', '-C', '--chdir', '-P']);

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
 * would run it as a program: the `bin` of its package, or a file whose
 * first line is a `#!` line naming a Node interpreter (see
 * `runsOnNode`). At most the first 256 bytes of such a file are read, to
 * find that line; nothing of any file is ever put in the verdict.
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
  if (hasNodeShebang(real) || isPackageBin(real)) return { served: true };
  return {
    served: false,
    reason:
      'a file without an extension is served only as a Node program: a bin of its package.json, or a file whose first line is a #! line naming node, nodejs, tsx, ts-node or ts-node-esm (directly or through env)',
  };
}

/** True when `path` is `root` or lies below it (both absolute and normalized). */
export function within(path: string, root: string): boolean {
  return path === root || path.startsWith(root === sep ? sep : `${root}${sep}`);
}

/**
 * The first segment of `real` below `root` (which contains it) that starts
 * with `.` and has no `node_modules` segment before it in the whole path,
 * or undefined when there is none. A root's own path may have dot
 * segments: the program chose it.
 */
export function dotSegment(real: string, root: string): string | undefined {
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

/**
 * True when the regular file at `path` starts with a `#!` line naming a
 * Node interpreter, within its first SHEBANG_BYTES bytes. What is read is
 * only looked at, never kept nor quoted.
 */
function hasNodeShebang(path: string): boolean {
  let fd: number | undefined;
  let head: Buffer;
  try {
    fd = openRegularFile(path, { follow: true }).fd;
    const buffer = Buffer.alloc(SHEBANG_BYTES);
    head = buffer.subarray(0, readSync(fd, buffer, 0, SHEBANG_BYTES, 0));
  } catch {
    return false;
  } finally {
    if (fd !== undefined) closeSync(fd);
  }
  if (head.length < 2 || head[0] !== 0x23 || head[1] !== 0x21) return false;
  const end = head.indexOf(0x0a);
  // A line longer than what was read: its interpreter is not known.
  if (end < 0 && head.length === SHEBANG_BYTES) return false;
  return runsOnNode(head.subarray(2, end < 0 ? head.length : end).toString('utf8'));
}

/**
 * True when a `#!` line (what follows the `#!`) runs the file with a Node
 * interpreter: `/usr/bin/node`, `nodejs`, `tsx`, `ts-node`,
 * `ts-node-esm`, directly or through `env` with its options and variable
 * assignments (`env node`, `env -S node --flag`, `env -i TZ=UTC node`).
 */
function runsOnNode(line: string): boolean {
  const words = line.trim().split(/[ \t]+/);
  let interpreter = words[0] ?? '';
  if (basename(interpreter) === 'env') interpreter = envCommand(words.slice(1)) ?? '';
  return NODE_INTERPRETERS.has(basename(interpreter));
}

/** The command `env` runs, given its arguments: the first word that is neither an option (nor its value) nor an assignment. */
function envCommand(args: string[]): string | undefined {
  for (let i = 0; i < args.length; i++) {
    const arg = args[i] as string;
    // `-S` splits the rest of the line, already split here; its string may be glued to it.
    if (arg.startsWith('-S') && arg.length > 2) return arg.slice(2);
    if (arg.startsWith('--split-string=')) return arg.slice('--split-string='.length);
    if (ENV_OPTIONS_WITH_VALUE.has(arg)) i++;
    else if (!arg.startsWith('-') && !/^[^=]+=/.test(arg)) return arg;
  }
  return undefined;
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
    const manifest = JSON.parse(readRegularFile(path, { follow: true }).toString('utf8')) as unknown;
    return typeof manifest === 'object' && manifest !== null
      ? (manifest as { name?: unknown; bin?: unknown })
      : undefined;
  } catch {
    return undefined;
  }
}

/** The real path of `path` (symlinks resolved), or undefined when it does not exist. */
export function realpathOrUndefined(path: string): string | undefined {
  try {
    return realpathSync(path);
  } catch {
    return undefined;
  }
}
