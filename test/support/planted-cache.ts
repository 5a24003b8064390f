/**
 * A V8 code cache of other code than the core, that V8 takes for the core
 * (it compares only the source's length): what another account could
 * leave where a context looks for the core's cache on its target
 * (src/core/target-code-cache.ts). When it runs, it writes a marker file.
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import * as vm from 'node:vm';
import { inflateRawSync } from 'node:zlib';
import { ROOT } from './procs.js';

/** The planted cache's bytes, which write `marker` when they run, and the file name the first stage looks for. */
export function plantedCoreCache(marker: string): { data: Buffer; name: string } {
  const core = inflateRawSync(readFileSync(join(ROOT, 'dist', 'bootstrap', 'core.deflate'))).toString();
  const payload = `require('fs').writeFileSync(${JSON.stringify(marker)}, 'ran');`;
  const data = new vm.Script(`${payload}/*${'x'.repeat(core.length - payload.length - 4)}*/`, {
    filename: 'tendril:core',
  }).createCachedData();
  const key = /core-([0-9a-f]{16})-/.exec(
    readFileSync(join(ROOT, 'dist', 'bootstrap', 'first-stage-cache.js'), 'utf8'),
  )?.[1];
  let hash = 0;
  for (const ch of process.execPath) hash = (hash * 31 + ch.charCodeAt(0)) | 0;
  return { data, name: `core-${key}-${process.version}-${process.arch}-${(hash >>> 0).toString(36)}.v8` };
}
