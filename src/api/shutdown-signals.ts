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

/**
 * The shutdowns a signal has started: a signal for one of them again ends
 * the process at once. Per router, so a router waiting only for SIGTERM
 * still shuts down gracefully after another router's SIGINT.
 */
const interrupted = new Set<Shutdown>();

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
      interrupted.delete(shutdown);
      if (!shutdowns?.delete(shutdown) || shutdowns.size > 0) continue;
      waiting.delete(signal);
      process.off(signal, onSignal);
    }
  };
}

function onSignal(signal: NodeJS.Signals): void {
  // As a shell reports a program a signal ended: 130 for SIGINT, 143 for SIGTERM.
  const status = 128 + (constants.signals[signal] ?? 0);
  const shutdowns = [...(waiting.get(signal) ?? [])];
  if (shutdowns.some((shutdown) => interrupted.has(shutdown))) process.exit(status);
  process.exitCode = status;
  for (const shutdown of shutdowns) {
    interrupted.add(shutdown);
    // A failed shutdown also fails the program's own `router.shutdown()`, which waits for the same one: that reports it.
    shutdown().catch(() => {});
  }
}
