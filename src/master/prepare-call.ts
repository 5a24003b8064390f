import type { PreparedCall } from '../core/call-preparation.js';
import { functionSource } from '../core/function-source.js';
import { analyzeFunction } from './function-analysis.js';
import { sourceLocation } from './function-location.js';

/** Distinct function sources whose analysis is kept, oldest dropped first. */
const MAX_PREPARED = 1000;

/**
 * How a process with tendril installed (the master, or a worker joined
 * over a listener) ships functions: each distinct source is analysed once
 * (see `analyzeFunction`), then sent with every `import(...)` renamed
 * `__tendril_import(...)` (served by module forwarding) and its literal
 * `require('x')` specifiers listed, so the context fetches them in one
 * round trip before it runs, and with the variables it captures named so
 * the call can be refused before sending, and with where it was written
 * (see `sourceLocation`), so that its stack frames name that file and
 * line: all of it once per source text, so two functions of the same text
 * share the location of the first one shipped.
 * @returns a function from a function to how it is shipped.
 */
export function callPreparer(): (fn: Parameters<typeof functionSource>[0]) => PreparedCall {
  const prepared = new Map<string, PreparedCall>();
  return (fn) => {
    const source = functionSource(fn);
    let found = prepared.get(source);
    if (!found) {
      const analysis = analyzeFunction(source);
      let rewritten = source;
      for (const at of [...analysis.dynamicImports].reverse()) {
        rewritten = `${rewritten.slice(0, at)}__tendril_import${rewritten.slice(at + 'import'.length)}`;
      }
      found = {
        source: rewritten,
        preload: analysis.requires,
        imports: analysis.imports,
        captured: analysis.captured,
        usesModules: analysis.usesModules,
      };
      const location = sourceLocation(fn, source);
      if (location) found.location = location;
      if (prepared.size >= MAX_PREPARED) prepared.delete(prepared.keys().next().value as string);
      prepared.set(source, found);
    }
    return found;
  };
}
