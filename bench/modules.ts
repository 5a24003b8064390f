// Module forwarding: the first and second call that import a real package
// graph in a fresh context, on a target that has none of it (empty working
// directory, no NODE_PATH), and the cost of a second context under the same
// intermediate. Mitogen's ~9 ms for its first call into a new local child
// is the figure quoted in issue 3, printed for reference only.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { type Context, Router } from 'tendril';
import { ROUTER_SWITCH } from '#dist/internal.js';
import { row } from './report.js';

async function timed<T>(work: () => Promise<T>): Promise<[T, number]> {
  const started = performance.now();
  const result = await work();
  return [result, performance.now() - started];
}

export async function benchModules(): Promise<void> {
  const cwd = mkdtempSync(join(tmpdir(), 'tendril-bench-'));
  const env = { PATH: process.env.PATH, HOME: cwd };
  const router = new Router();
  try {
    const graphs: [string, (c: Context) => Promise<unknown>][] = [
      ['chalk@4 (CommonJS)', (c) => c.call(() => typeof (require('chalk') as { red: unknown }).red)],
      [
        'p-queue (ESM only)',
        (c) => c.call(async () => typeof ((await import('p-queue')) as { default: unknown }).default),
      ],
    ];
    for (const [label, load] of graphs) {
      const child = await router.local({ name: 'bench-modules', cwd, env });
      for (const attempt of ['first', 'second']) {
        const before = await child.moduleStats();
        const [, ms] = await timed(() => load(child));
        const after = await child.moduleStats();
        row(
          `${label}: ${attempt} call`,
          `${ms.toFixed(1)} ms`,
          `${after.requestsSent - before.requestsSent} round trip(s), ${after.filesReceived - before.filesReceived} files, ${after.bytesReceived - before.bytesReceived} B`,
        );
      }
      await child.shutdown();
    }
    const middle = await router.local({ name: 'bench-middle', cwd, env });
    const leaves: Context[] = [];
    for (let i = 0; i < 2; i++) leaves.push(await router.local({ name: `bench-leaf${i}`, via: middle, cwd, env }));
    for (const [i, leaf] of leaves.entries()) {
      const master = router.moduleStats();
      const onStream = router[ROUTER_SWITCH].routeOf(middle.id)?.stats.bytesOut ?? 0;
      const [, ms] = await timed(() => leaf.call(() => typeof (require('chalk') as { red: unknown }).red));
      row(
        `chalk@4 in grandchild ${i + 1} via one child`,
        `${ms.toFixed(1)} ms`,
        `${router.moduleStats().bytesSent - master.bytesSent} module B from the master; ${(router[ROUTER_SWITCH].routeOf(middle.id)?.stats.bytesOut ?? 0) - onStream} B on its stream in all`,
      );
    }
    row('Mitogen: first call into a new local child', '~9 ms', 'quoted in issue 3, not measured here');
  } finally {
    await router.shutdown();
    rmSync(cwd, { recursive: true, force: true });
  }
}
