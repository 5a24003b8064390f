import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';

/**
 * Files produced by `bootstrap/build.mjs` next to the compiled sources:
 * the deflated core, the first stage, and the connection bundle served to
 * children.
 */
const ROOT = new URL('../bootstrap/', import.meta.url);

let cache: { coreBundle: Uint8Array; firstStage: string } | undefined;

/** The deflated core and the first stage template, read once. */
export function bootstrapAssets(): { coreBundle: Uint8Array; firstStage: string } {
  if (!cache) {
    cache = {
      coreBundle: readAsset('core.deflate'),
      firstStage: readAsset('first-stage.js').toString('utf8').trim(),
    };
  }
  return cache;
}

/** Path of a file in the built bootstrap folder. */
export function assetPath(name: string): string {
  return fileURLToPath(new URL(name, ROOT));
}

/** A file from the built bootstrap folder. */
export function readAsset(name: string): Buffer {
  try {
    return readFileSync(new URL(name, ROOT));
  } catch (error) {
    throw new Error(
      `tendril's bootstrap file ${name} is missing from ${ROOT.pathname} (${(error as Error).message}); run \`npm run build\``,
    );
  }
}
