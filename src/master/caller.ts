import { realpathSync, statSync } from 'node:fs';
import { dirname, isAbsolute, join, resolve, sep } from 'node:path';
import { fileURLToPath } from 'node:url';
import { callOrigin } from '../core/call-base.js';

/**
 * Where the `require()` and `import()` of a shipped function resolve from:
 * the program's own code, never the master's working directory (a script
 * started by cron or from `/` must behave as it does from its project).
 */

/** tendril's own installed folder: frames inside it are not the caller. */
let ownDir: string | undefined;

/**
 * The module that called into tendril: the first frame of the current
 * stack outside tendril itself. Must be called synchronously from the
 * public method the program called (before any `await`).
 */
export function callerModule(): string | undefined {
  return callerScript()?.path;
}

/**
 * As `callerModule`, with the name V8 gives the module's script too (a
 * `file:` URL for an ES module, the path for CommonJS).
 * @returns `{ url, path }`, or undefined when no frame outside tendril is a file.
 */
export function callerScript(): { url: string; path: string } | undefined {
  ownDir ??= join(fileURLToPath(new URL('./', import.meta.url)), sep);
  const prepare = Error.prepareStackTrace;
  const limit = Error.stackTraceLimit;
  const holder: { stack?: NodeJS.CallSite[] } = {};
  let sites: NodeJS.CallSite[];
  try {
    Error.stackTraceLimit = 20;
    Error.prepareStackTrace = (_error, callSites) => callSites;
    Error.captureStackTrace(holder);
    // The stack is formatted when first read: read it while the override is in place.
    sites = Array.isArray(holder.stack) ? holder.stack : [];
  } finally {
    Error.prepareStackTrace = prepare;
    Error.stackTraceLimit = limit;
  }
  for (const site of sites) {
    const file = site.getFileName();
    if (!file || file.startsWith('node:')) continue;
    let path: string;
    try {
      path = file.startsWith('file:') ? fileURLToPath(file) : file;
    } catch {
      continue;
    }
    if (!isAbsolute(path) || path.startsWith(ownDir)) continue;
    return { url: file, path };
  }
  return undefined;
}

/** The program's main module (`process.argv[1]`), if it is a file. */
export function mainModule(): string | undefined {
  const main = process.argv[1];
  if (!main) return undefined;
  try {
    const path = realpathSync(resolve(main));
    return statSync(path).isFile() ? path : undefined;
  } catch {
    return undefined;
  }
}

/** Files calls resolve from, by the base given. */
const baseFiles = new Map<string, string>();

/**
 * The file a call resolves from, given a base: a module file stands for
 * itself (so its package's `imports` map applies), a directory for a
 * file `[tendril call]` in it.
 * @param location a path, a `file:` URL (such as `import.meta.url`), or a URL object.
 */
export function baseFile(location: string | URL): string {
  const key = String(location);
  let file = baseFiles.get(key);
  if (file === undefined) {
    const path = location instanceof URL || key.startsWith('file:') ? fileURLToPath(location) : resolve(key);
    file = callOrigin(path);
    try {
      if (statSync(path).isFile()) file = path;
    } catch {
      // A base that does not exist is taken as a directory; resolution from it reports what is missing.
    }
    // Calls in a loop pass the same base: look at the file system once.
    if (baseFiles.size >= 1000) baseFiles.clear();
    baseFiles.set(key, file);
  }
  return file;
}

/** The directory calls resolve from when they name none: that of the base, or of the main module, or the working directory. */
export function baseDirectory(base: string | undefined): string {
  if (base !== undefined) return dirname(base);
  const main = mainModule();
  return main ? dirname(main) : process.cwd();
}
