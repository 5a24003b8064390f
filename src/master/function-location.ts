import { readFileSync, statSync } from 'node:fs';
import { createRequire } from 'node:module';
import { isAbsolute } from 'node:path';
import { fileURLToPath } from 'node:url';

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
      text = statSync(path).size <= MAX_SOURCE ? readFileSync(path, 'utf8') : null;
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

/** The path of the module that defines `fn`, as V8 knows it. */
function locate(fn: object): string | undefined {
  const inspectorSession = inspector();
  if (!inspectorSession) return undefined;
  let scriptId: string | undefined;
  try {
    (globalThis as Record<string, unknown>)[GLOBAL] = fn;
    const { result } = post<{ result: { objectId?: string } }>(inspectorSession, 'Runtime.evaluate', {
      expression: `globalThis.${GLOBAL}`,
      objectGroup: GLOBAL,
    });
    const { internalProperties } = post<{
      internalProperties?: { name: string; value?: { value?: { scriptId?: string } } }[];
    }>(inspectorSession, 'Runtime.getProperties', { objectId: result.objectId, ownProperties: true });
    scriptId = internalProperties?.find((property) => property.name === '[[FunctionLocation]]')?.value?.value?.scriptId;
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
  if (scriptId === undefined) return undefined;
  if (!scripts.has(scriptId)) {
    // Enabling the debugger reports every script parsed so far; it is disabled again at once.
    try {
      post(inspectorSession, 'Debugger.enable');
      post(inspectorSession, 'Debugger.disable');
    } catch {
      return undefined;
    }
  }
  const url = scripts.get(scriptId);
  if (url === undefined) return undefined;
  try {
    const path = url.startsWith('file:') ? fileURLToPath(url) : url;
    return isAbsolute(path) ? path : undefined;
  } catch {
    return undefined;
  }
}
