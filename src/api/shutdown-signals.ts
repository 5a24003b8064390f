import { constants } from 'node:os';

/**
 * The Router option `shutdownOnSignal`: routers shut down when the process
 * receives a signal. One process listener per signal serves every router
 * that asked for it, so a program with many routers never passes
 * `process.getMaxListeners()`, and a signal nobody asks for any more is
 * left to its default action (or the program's own handlers).
 */

/** What shuts one router down; its promise settles when the shutdown has finished. */
type Shutdown = () => Promise<void>;

/** The routers' shutdowns waiting for each signal. */
const waiting = new Map<NodeJS.Signals, Set<Shutdown>>();

/** Set by the first signal handled: the next one ends the process at once. */
let interrupted = false;

/**
 * Shuts a router down (`shutdown`) on the first of `signals` the process
 * receives; see `RouterOptions.shutdownOnSignal`.
 * @returns what removes its handlers: call it once the router has shut down.
 */
export function shutDownOnSignals(signals: readonly NodeJS.Signals[], shutdown: Shutdown): () => void {
  for (const signal of signals) {
    let shutdowns = waiting.get(signal);
    if (!shutdowns) {
      shutdowns = new Set();
      waiting.set(signal, shutdowns);
      process.on(signal, onSignal);
    }
    shutdowns.add(shutdown);
  }
  return () => {
    for (const signal of signals) {
      const shutdowns = waiting.get(signal);
      if (!shutdowns?.delete(shutdown) || shutdowns.size > 0) continue;
      waiting.delete(signal);
      process.off(signal, onSignal);
    }
    // A later router's first signal is a first signal again.
    if (waiting.size === 0) interrupted = false;
  };
}

function onSignal(signal: NodeJS.Signals): void {
  // As a shell reports a program a signal ended: 130 for SIGINT, 143 for SIGTERM.
  const status = 128 + (constants.signals[signal] ?? 0);
  if (interrupted) process.exit(status);
  interrupted = true;
  process.exitCode = status;
  for (const shutdown of [...(waiting.get(signal) ?? [])]) {
    // A failed shutdown also fails the program's own `router.shutdown()`, which waits for the same one: that reports it.
    shutdown().catch(() => {});
  }
}
