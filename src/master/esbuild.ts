/**
 * esbuild, loaded on first use. Module analysis needs it; importing tendril
 * or starting contexts does not, so a program pays for it (and its helper
 * process) only once a child asks for a module.
 */
import { existsSync, readdirSync, readFileSync } from 'node:fs';
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

/** How long `stopEsbuild` waits for the helper to be gone, in ms. */
const REAP_WAIT = 2000;

/**
 * Stops esbuild's helper process, if it runs, and waits (up to 2 s) until
 * this process has reaped it. esbuild's own `stop()` only signals it: a
 * program that exits right after `router.shutdown()` would leave it to
 * PID 1, which in a container may never reap it.
 */
export async function stopEsbuild(): Promise<void> {
  if (!loaded) return;
  const helpers = helperPids();
  await loaded.stop();
  const deadline = Date.now() + REAP_WAIT;
  while (helpers.some((pid) => existsSync(`/proc/${pid}`)) && Date.now() < deadline) {
    await new Promise((resolve) => setTimeout(resolve, 5));
  }
}

/** This process's children running esbuild, from Linux's /proc (none found elsewhere). */
function helperPids(): number[] {
  const pids: number[] = [];
  try {
    for (const task of readdirSync('/proc/self/task')) {
      for (const pid of readFileSync(`/proc/self/task/${task}/children`, 'utf8').split(' ').filter(Boolean)) {
        if (readFileSync(`/proc/${pid}/comm`, 'utf8').trim() === 'esbuild') pids.push(Number(pid));
      }
    }
  } catch {
    // No /proc (or a child gone meanwhile): nothing more to wait for.
  }
  return pids;
}
