// One function across 50 local contexts (local-1 ... local-50) with
// router.fleet(), a progress bar (cli-progress) fed by its progress events,
// and the summary at the end; then the same fleet again, which finds the
// 50 contexts in the pool instead of starting them.
// Run after `npm run build`: node build/examples/fleet-local.js [count]
import cliProgress from 'cli-progress';
import { type FleetProgress, Router } from 'tendril';

const count = Number(process.argv[2] ?? 50);
const targets = Array.from({ length: count }, (_, i) => ({ method: 'local' as const, name: `local-${i + 1}` }));

/** Runs in each context: a little work, and who did it. */
function work(rounds: number) {
  const { createHash } = require('node:crypto') as typeof import('node:crypto');
  let digest = 'tendril';
  for (let i = 0; i < rounds; i++) digest = createHash('sha256').update(digest).digest('hex');
  return { pid: process.pid, digest: digest.slice(0, 12) };
}

const router = new Router();
const bar = new cliProgress.SingleBar(
  {
    format: '{title} [{bar}] {value}/{total} | {succeeded} ok, {failed} failed, {running} running',
    noTTYOutput: true,
    notTTYSchedule: 250,
  },
  cliProgress.Presets.shades_classic,
);

async function runFleet(title: string) {
  const fleet = router.fleet(targets, (context) => context.call(work, 2_000), { concurrency: 16, timeout: 60_000 });
  const show = ({ done, succeeded, failed, running }: FleetProgress) =>
    bar.update(done, { title, succeeded, failed, running });
  bar.start(count, 0, { title, succeeded: 0, failed: 0, running: 0 });
  fleet.on('progress', show);
  const pids = new Set<number>();
  for await (const outcome of fleet) if (outcome.ok) pids.add(outcome.value.pid);
  show(fleet.progress);
  bar.stop();
  console.log((await fleet.summary()).format());
  return pids;
}

try {
  const first = await runFleet('first ');
  const again = await runFleet('again ');
  const same = [...again].filter((pid) => first.has(pid)).length;
  console.log(`${first.size} processes answered the first fleet; ${same} of them answered the second again`);
  const { contexts, hits, misses } = router.pool.stats();
  console.log(`pool: ${contexts} contexts, ${misses} started, ${hits} reused by the second fleet`);
} finally {
  bar.stop();
  await router.shutdown();
}
