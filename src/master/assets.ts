import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { CoreSource } from '../core/core-source.js';

/**
 * Files produced by `bootstrap/build.mjs` next to the compiled sources:
 * the deflated core, the first stage, the connection bundle served to
 * children, and the askpass helper.
 */

let root: string | undefined;
let cache: { coreSource: CoreSource; firstStage: string; firstStageCodeCache: string } | undefined;

/**
 * The built bootstrap folder, `dist/bootstrap/` of the installed package.
 * @throws Error saying what to do when it is not there: tendril was bundled
 *   into an application, or a checkout of it was not built.
 */
export function bootstrapDir(): string {
  if (root) return root;
  let here: string | undefined;
  try {
    here = fileURLToPath(new URL('.', import.meta.url));
  } catch {
    // A CommonJS bundle has no import.meta.url.
  }
  const dir = here === undefined ? undefined : join(here, 'bootstrap');
  if (dir === undefined || !existsSync(join(dir, 'core.deflate'))) {
    throw new Error(
      `tendril's bootstrap files are not where its code is (${dir ?? 'no module URL'}). ` +
        'If you bundled your application (esbuild, webpack, rollup...), keep tendril external and install it next to the bundle: ' +
        "esbuild --external:tendril, webpack externals: { tendril: 'module tendril' }; tendril ships its own files to the contexts it starts, so it cannot live inside a bundle. " +
        'In a checkout of tendril itself, run `npm run build`.',
    );
  }
  root = dir;
  return dir;
}

/** The core and the first stage templates (without and with the code cache part), read once. */
export function bootstrapAssets(): { coreSource: CoreSource; firstStage: string; firstStageCodeCache: string } {
  if (!cache) {
    cache = {
      coreSource: CoreSource.fromDeflated(readAsset('core.deflate')),
      firstStage: readAsset('first-stage.js').toString('utf8').trim(),
      firstStageCodeCache: readAsset('first-stage-cache.js').toString('utf8').trim(),
    };
  }
  return cache;
}

/** Path of a file in the built bootstrap folder. */
export function assetPath(name: string): string {
  return join(bootstrapDir(), name);
}

/** A file from the built bootstrap folder. */
export function readAsset(name: string): Buffer {
  const path = assetPath(name);
  try {
    return readFileSync(path);
  } catch (error) {
    throw new Error(
      `tendril's bootstrap file ${path} cannot be read (${(error as Error).message}); run \`npm run build\``,
    );
  }
}
