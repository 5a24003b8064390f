// The scale row's master (bench/compare/scale.ts runs it, fresh each round):
// MIDS local contexts, each starting PER local contexts via itself, one call
// each, then one fleet call across all the leaves. Prints one JSON line:
// the wall times, this master's RSS and open fds before and at the peak,
// and its descendants' memory (bench/peers/mitogen_bench.py's `scale`
// mode prints the same for Mitogen).
import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import { type Context, Router } from 'tendril';
import { commandLine } from '../cli.js';
import { descendantsMemory, fdTargets, openFds, statusBytes } from '../compare/proc.js';

const [mids, per] = commandLine({
  script: 'node build/bench/scripts/scale.js',
  description: `Starts MIDS local contexts, then PER local contexts via each of them, one call each,
then one fleet call across all MIDS x PER; prints wall times, this master's RSS and
open fds, and its descendants' memory, as JSON.`,
  arguments: [
    { name: 'MIDS', description: 'intermediate contexts the master starts', count: true, required: true },
    { name: 'PER', description: 'contexts each intermediate starts', count: true, required: true },
  ],
}).positionals.map(Number) as [number, number];

const pid = () => process.pid;
// A full collection on demand, for the heap a context leaves behind (not the garbage its start made).
setFlagsFromString('--expose-gc');
const gc = runInNewContext('gc') as () => void;
/** The JavaScript heap in use after a full collection, in bytes. */
const heldHeap = () => {
  gc();
  return process.memoryUsage().heapUsed;
};
const range = (n: number) => Array.from({ length: n }, (_, i) => i);

const router = new Router();
try {
  // Before the first start: what the master holds with tendril loaded and a Router.
  const baseRss = statusBytes('VmRSS');
  const baseFds = openFds();
  const baseFdKinds = fdKinds();
  const baseHeap = heldHeap();
  const cpuBefore = process.cpuUsage();
  const started = performance.now();
  const leaves = (
    await Promise.all(
      range(mids).map(async (i) => {
        const mid = await router.local({ name: `mid-${i}` });
        return Promise.all(
          range(per).map(async (j) => {
            const leaf: Context = await router.local({ name: `leaf-${i}-${j}`, via: mid });
            await leaf.call(pid);
            return leaf;
          }),
        );
      }),
    )
  ).flat();
  const startMs = performance.now() - started;
  const startCpu = process.cpuUsage(cpuBefore);

  const cpuAfterStart = process.cpuUsage();
  const fleetStarted = performance.now();
  // Every leaf at once, as Mitogen's side sends every call before it waits for one.
  const summary = await router.fleet(leaves, (context) => context.call(pid), { concurrency: leaves.length }).summary();
  const fleetMs = performance.now() - fleetStarted;
  const fleetCpu = process.cpuUsage(cpuAfterStart);
  if (!summary.ok) throw new Error(`the fleet did not succeed everywhere:\n${summary.format()}`);
  const pids = new Set(summary.succeeded.map((s) => s.value));
  if (pids.size !== mids * per) throw new Error(`${pids.size} distinct processes answered, not ${mids * per}`);

  // The peak, all alive, before anything else runs.
  const children = descendantsMemory(process.pid);
  const peak = {
    // Held at the end, garbage not collected included.
    rss: statusBytes('VmRSS'),
    // Not resourceUsage().maxRSS: Linux carries it over an exec, so it would be the bench's own.
    peakRss: statusBytes('VmHWM'),
    fds: openFds(),
    fdKinds: fdKinds(),
  };

  // After the figures above were read: collecting changes RSS.
  const heap = heldHeap();

  // The same calls without the fleet, warm (after the peak was read): what the fleet's own work costs beside them.
  const cpuBeforeAll = process.cpuUsage();
  const allStarted = performance.now();
  await Promise.all(leaves.map((leaf) => leaf.call(pid)));
  const allMs = performance.now() - allStarted;
  const allCpu = process.cpuUsage(cpuBeforeAll);
  const cpuBeforeAgain = process.cpuUsage();
  const againStarted = performance.now();
  await router.fleet(leaves, (context) => context.call(pid), { concurrency: leaves.length }).summary();
  const fleetAgainMs = performance.now() - againStarted;
  const againCpu = process.cpuUsage(cpuBeforeAgain);
  const cpuMs = (usage: NodeJS.CpuUsage) => (usage.user + usage.system) / 1000;

  process.stdout.write(
    `${JSON.stringify({
      startMs,
      fleetMs,
      allMs,
      fleetAgainMs,
      // This master's own CPU (user + system, ms) in each part: what it spends per context.
      startCpuMs: cpuMs(startCpu),
      fleetCpuMs: cpuMs(fleetCpu),
      allCpuMs: cpuMs(allCpu),
      fleetAgainCpuMs: cpuMs(againCpu),
      baseRss,
      baseFds,
      baseFdKinds,
      ...peak,
      baseHeap,
      heap,
      children: children.count,
      childrenRss: children.rss,
      childrenPss: children.pss,
    })}\n`,
  );
} finally {
  await router.shutdown();
}

/** How many of this process's fds are pipes, sockets and others. */
function fdKinds(): Record<string, number> {
  const kinds: Record<string, number> = {};
  for (const target of fdTargets()) {
    const kind = /^(\w+):/.exec(target)?.[1] ?? (target.startsWith('/') ? 'file' : 'other');
    kinds[kind] = (kinds[kind] ?? 0) + 1;
  }
  return kinds;
}
