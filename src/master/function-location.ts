import { createRequire, SourceMap } from 'node:module';
import { isAbsolute } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { CallLocation } from '../core/protocol/call-function.js';
import { readRegularFile } from '../core/regular-file.js';
import { callerScript } from './caller.js';

/**
 * The module whose source defines a function, so that a shipped function's
 * `require()` resolves where it was written even when another module
 * passes it to `context.call()`.
 *
 * Usually the function is written inline in the module that makes the
 * call; that module's text containing the function's text settles it at
 * the cost of one string search (the file is read once). Otherwise V8 is
 * asked where the function is, through an in-process inspector session:
 * `[[FunctionLocation]]` gives its script, and the script's URL comes
 * from the debugger's list of scripts (fetched only when a script is not
 * known yet). Results are cached per function and per source text.
 */

/** Sources of calling modules, read once; null for a file that could not be read. */
const sources = new Map<string, string | null>();
const byFunction = new WeakMap<object, string | null>();
const byText = new Map<string, string | null>();
/** Largest file read to look for a function's text, in bytes. */
const MAX_SOURCE = 4 * 1024 * 1024;
const MAX_CACHED = 1000;

/**
 * Where `fn` was written, or undefined when that cannot be told (no
 * inspector in this Node, a function made by `eval` or `new Function`).
 * @param caller the module that passed it to tendril, if known.
 */
export function definingModule(fn: object, caller: string | undefined): string | undefined {
  const known = byFunction.get(fn);
  if (known !== undefined) return known ?? undefined;
  const text = Function.prototype.toString.call(fn);
  const key = `${caller ?? ''}\0${text}`;
  let found = byText.get(key);
  if (found === undefined) {
    found = caller !== undefined && sourceOf(caller)?.includes(text) ? caller : (locate(fn) ?? null);
    if (byText.size >= MAX_CACHED) byText.delete(byText.keys().next().value as string);
    byText.set(key, found);
  }
  byFunction.set(fn, found);
  return found ?? undefined;
}

/** Results of `scriptOf`, per function. */
const located = new WeakMap<object, string | null>();

/**
 * The file V8 says `fn` was compiled from, or undefined when it cannot
 * tell (no inspector, a function made by `eval` or `new Function`, a
 * bound or native function). Unlike `definingModule`, never a guess from
 * source text: two functions of the same text in different modules are
 * told apart. For what will be loaded and run elsewhere (a connection
 * method's module), where the wrong module would be the wrong code.
 */
export function scriptOf(fn: object): string | undefined {
  let found = located.get(fn);
  if (found === undefined) {
    found = locate(fn) ?? null;
    located.set(fn, found);
  }
  return found ?? undefined;
}

function sourceOf(path: string): string | null {
  let text = sources.get(path);
  if (text === undefined) {
    try {
      text = readRegularFile(path, { follow: true, maxBytes: MAX_SOURCE }).toString('utf8');
    } catch {
      text = null;
    }
    if (sources.size >= 100) sources.delete(sources.keys().next().value as string);
    sources.set(path, text);
  }
  return text;
}

interface InspectorSession {
  post(method: string, params: object | undefined, callback: (error: Error | null, result: unknown) => void): void;
  on(event: string, listener: (message: { params: { scriptId: string; url: string } }) => void): void;
  connect(): void;
}

let session: InspectorSession | null | undefined;
const scripts = new Map<string, string>();
const GLOBAL = '__tendril_function_location';

/** The in-process inspector session, or null where Node was built without an inspector. */
function inspector(): InspectorSession | null {
  if (session === undefined) {
    try {
      const { Session } = createRequire(import.meta.url)('node:inspector') as { Session: new () => InspectorSession };
      session = new Session();
      session.connect();
      session.on('Debugger.scriptParsed', ({ params }) => {
        if (params.url) scripts.set(params.scriptId, params.url);
      });
    } catch {
      session = null;
    }
  }
  return session;
}

/** A synchronous inspector call: the in-process session answers before `post` returns. */
function post<T>(inspectorSession: InspectorSession, method: string, params?: object): T {
  let failure: Error | null = null;
  let answer: unknown;
  inspectorSession.post(method, params, (error, result) => {
    failure = error;
    answer = result;
  });
  if (failure) throw failure;
  return answer as T;
}

/** Where V8 says a function is: its script, and the 0-based line and column of its parameter list (of an arrow function, its start). */
interface FunctionPosition {
  scriptId: string;
  line: number;
  column: number;
}

/** `fn`'s position as V8 knows it (`[[FunctionLocation]]`), or undefined when it cannot tell. */
function positionOf(fn: object): FunctionPosition | undefined {
  const inspectorSession = inspector();
  if (!inspectorSession) return undefined;
  let location: { scriptId?: string; lineNumber?: number; columnNumber?: number } | undefined;
  try {
    (globalThis as Record<string, unknown>)[GLOBAL] = fn;
    const { result } = post<{ result: { objectId?: string } }>(inspectorSession, 'Runtime.evaluate', {
      expression: `globalThis.${GLOBAL}`,
      objectGroup: GLOBAL,
    });
    const { internalProperties } = post<{
      internalProperties?: { name: string; value?: { value?: typeof location } }[];
    }>(inspectorSession, 'Runtime.getProperties', { objectId: result.objectId, ownProperties: true });
    location = internalProperties?.find((property) => property.name === '[[FunctionLocation]]')?.value?.value;
  } catch {
    return undefined;
  } finally {
    delete (globalThis as Record<string, unknown>)[GLOBAL];
    try {
      post(inspectorSession, 'Runtime.releaseObjectGroup', { objectGroup: GLOBAL });
    } catch {
      // Nothing was held.
    }
  }
  const { scriptId, lineNumber, columnNumber } = location ?? {};
  if (scriptId === undefined || typeof lineNumber !== 'number' || typeof columnNumber !== 'number') return undefined;
  return { scriptId, line: lineNumber, column: columnNumber };
}

/** The URL of script `scriptId` as V8 names it, or undefined (a script made by `eval`, say). */
function scriptUrl(scriptId: string): string | undefined {
  const inspectorSession = inspector();
  if (!inspectorSession) return undefined;
  if (!scripts.has(scriptId)) {
    // Enabling the debugger reports every script parsed so far (milliseconds in a large program); it is disabled again at once.
    try {
      post(inspectorSession, 'Debugger.enable');
      post(inspectorSession, 'Debugger.disable');
    } catch {
      return undefined;
    }
  }
  return scripts.get(scriptId);
}

/** The absolute path a script URL names (a path, or a `file:` URL), else undefined. */
function pathOf(url: string): string | undefined {
  try {
    const path = url.startsWith('file:') ? fileURLToPath(url) : url;
    return isAbsolute(path) ? path : undefined;
  } catch {
    return undefined;
  }
}

/** The path of the module that defines `fn`, as V8 knows it. */
function locate(fn: object): string | undefined {
  const position = positionOf(fn);
  const url = position && scriptUrl(position.scriptId);
  return url && pathOf(url);
}

/**
 * Where `fn`'s source text starts, as the child compiles it so that its
 * stack frames name the file and line it was written at: the script's
 * URL as V8 names it (a path for CommonJS, a `file:` URL for an ES
 * module, as local stack frames show them), and the 0-based line and
 * column there. Undefined when that cannot be told (a function made by
 * `eval` or `new Function`, or in the REPL).
 *
 * V8 gives the function's script and position through the inspector,
 * and the text is found there in the file as it is on disk. Where the
 * file is not what V8 ran (TypeScript), it is found in what V8 ran
 * instead: positions there are the file's when the code carries no source
 * map (Node's type stripping keeps them), and are mapped to the file's
 * through an inline source map otherwise (tsx, ts-node): only the start
 * of the function is mapped, so lines inside it count from there. Without
 * an inspector, the text is looked for in the module that called tendril.
 * A few inspector calls: cache the result per source text.
 * @param fn the function shipped.
 * @param shipped its source as shipped (see `functionSource`): where that
 *   adds to the text on its first line (`function` before method
 *   shorthand), the column makes up for it.
 * @returns `[file, line, column]`, or undefined.
 */
export function sourceLocation(fn: object, shipped: string): CallLocation | undefined {
  const text = Function.prototype.toString.call(fn);
  const found = findLocation(fn, text);
  if (found) found[2] = Math.max(0, found[2] - (shipped.length - text.length));
  return found;
}

function findLocation(fn: object, text: string): CallLocation | undefined {
  const position = positionOf(fn);
  const caller = scripts.has(position?.scriptId ?? '') ? undefined : callerScript();
  const inCaller = caller && sourceOf(caller.path);
  if (!position) {
    // No inspector: the first place the text is in the module that called tendril.
    const start = inCaller ? inCaller.indexOf(text) : -1;
    return caller && inCaller && start !== -1 ? [caller.url, ...lineAndColumn(inCaller, start)] : undefined;
  }
  // Functions are mostly written where they are passed to tendril: there, the text at V8's position tells without
  // asking the debugger for the script's name.
  const inCallerAt = inCaller ? startOf(inCaller, text, position) : undefined;
  if (caller && inCallerAt) return [caller.url, ...inCallerAt];
  const url = scriptUrl(position.scriptId);
  const path = url && pathOf(url);
  if (!url || !path) return undefined;
  const onDisk = sourceOf(path);
  const start = onDisk === null ? undefined : startOf(onDisk, text, position);
  if (start !== undefined) return [url, ...start];
  const ran = scriptSource(position.scriptId);
  const inRan = ran === undefined ? undefined : startOf(ran, text, position);
  if (ran === undefined || inRan === undefined) return undefined;
  const map = INLINE_SOURCE_MAP.exec(ran.slice(-MAX_SOURCE_MAP));
  if (!map) return [url, ...inRan];
  try {
    const payload = JSON.parse(Buffer.from(map[1] as string, 'base64').toString('utf8')) as object;
    const entry = new SourceMap(payload as never).findEntry(inRan[0], inRan[1]) as {
      originalLine?: number;
      originalColumn?: number;
    };
    if (typeof entry.originalLine !== 'number' || typeof entry.originalColumn !== 'number') return undefined;
    return [url, entry.originalLine, entry.originalColumn];
  } catch {
    return undefined;
  }
}

/** A source map inlined at the end of a script, as tsx and ts-node write it: its base64 JSON. */
const INLINE_SOURCE_MAP = /\/\/[#@] sourceMappingURL=data:application\/json[^,]*;base64,([A-Za-z0-9+/=]+)\s*$/;
/** Longest tail of a script searched for an inline source map, in characters. */
const MAX_SOURCE_MAP = 16 * 1024 * 1024;

/**
 * The 0-based line and column in `source` where `text` starts, given
 * V8's position of the function (its parameter list, or the start of an
 * arrow function): the occurrence of `text` that spans that position.
 */
function startOf(
  source: string,
  text: string,
  position: { line: number; column: number },
): [number, number] | undefined {
  let offset = 0;
  for (let line = 0; line < position.line; line++) {
    offset = source.indexOf('\n', offset) + 1;
    if (offset === 0) return undefined;
  }
  offset += position.column;
  const start = source.lastIndexOf(text, offset);
  if (start === -1 || start + text.length <= offset) return undefined;
  return lineAndColumn(source, start);
}

/** The 0-based line and column of `offset` in `source`. */
function lineAndColumn(source: string, offset: number): [number, number] {
  let line = 0;
  for (let at = source.indexOf('\n'); at !== -1 && at < offset; at = source.indexOf('\n', at + 1)) line++;
  return [line, offset - (source.lastIndexOf('\n', offset - 1) + 1)];
}

/** Sources of scripts as V8 compiled them, by script ID: the last few asked for. */
const ranSources = new Map<string, string>();

/** The source V8 compiled for script `scriptId`, or undefined. */
function scriptSource(scriptId: string): string | undefined {
  let source = ranSources.get(scriptId);
  if (source !== undefined) return source;
  const inspectorSession = inspector();
  if (!inspectorSession) return undefined;
  try {
    post(inspectorSession, 'Debugger.enable');
    try {
      source = post<{ scriptSource: string }>(inspectorSession, 'Debugger.getScriptSource', { scriptId }).scriptSource;
    } finally {
      post(inspectorSession, 'Debugger.disable');
    }
  } catch {
    return undefined;
  }
  if (typeof source !== 'string') return undefined;
  if (ranSources.size >= 8) ranSources.delete(ranSources.keys().next().value as string);
  ranSources.set(scriptId, source);
  return source;
}
