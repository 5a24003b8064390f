/**
 * esbuild, loaded on first use. Module analysis needs it; importing tendril
 * or starting contexts does not, so a program pays for it (and its helper
 * process) only once a child asks for a module.
 */
import { importPackage } from '../connection/packages.js';

/** The esbuild API. */
export type Esbuild = typeof import('esbuild');

let loading: Promise<Esbuild> | undefined;
let loaded: Esbuild | undefined;

/**
 * The esbuild module.
 * @throws Error naming the package and the remedy when it cannot be loaded.
 */
export function loadEsbuild(): Promise<Esbuild> {
  loading ??= importPackage<Esbuild>('esbuild').then(
    (esbuild) => {
      loaded = esbuild;
      return esbuild;
    },
    (error: Error) => {
      loading = undefined;
      throw new Error(
        `tendril could not load the esbuild package, which module forwarding uses to analyse and convert modules: ${error.message}. Reinstall tendril's dependencies (npm install tendril)`,
      );
    },
  );
  return loading;
}

/** esbuild if it has been loaded already, else undefined (nothing to stop). */
export function esbuildIfLoaded(): Esbuild | undefined {
  return loaded;
}
