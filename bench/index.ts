// tendril's local benchmarks (`npm run bench`). Every figure is measured in
// this run; `node -e 0` is timed here too, as the floor for starting a
// context. Mitogen's figures are the ones quoted in issue 2 for this
// machine, printed for reference only: the side-by-side harness that runs
// Mitogen in the same run comes with the benchmark issue.
import { spawn } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { Router } from 'tendril';
import { benchModules } from './modules.js';
import { median, row } from './report.js';
import { benchSsh } from './ssh.js';

function spawnNodeE0(): Promise<number> {
  return new Promise((resolve, reject) => {
    const started = performance.now();
    spawn(process.execPath, ['-e', '0'], { stdio: 'ignore' })
      .on('exit', () => resolve(performance.now() - started))
      .on('error', reject);
  });
}

async function timeToReady(router: Router): Promise<number> {
  const started = performance.now();
  const child = await router.local({ name: 'bench-ready' });
  const took = performance.now() - started;
  await child.shutdown();
  return took;
}

const RUNS = 20;
const router = new Router();
// Warm both paths once so neither pays for loading files from disk.
await spawnNodeE0();
await timeToReady(router);
const nodeE0: number[] = [];
const ready: number[] = [];
for (let i = 0; i < RUNS; i++) {
  // Interleaved, so both see the same machine load.
  nodeE0.push(await spawnNodeE0());
  ready.push(await timeToReady(router));
}

const child = await router.local({ name: 'bench' });
for (let i = 0; i < 2000; i++) await child.call(() => null);
const rtt: number[] = [];
for (let i = 0; i < 10_000; i++) {
  const t = performance.now();
  await child.call(() => null);
  rtt.push(performance.now() - t);
}
const mib = Buffer.alloc(1024 * 1024, 1);
for (let i = 0; i < 5; i++) await child.call((b: Buffer) => b.length, mib);
const big: number[] = [];
for (let i = 0; i < 50; i++) {
  const t = performance.now();
  await child.call((b: Buffer) => b.length, mib);
  big.push(performance.now() - t);
}
await router.shutdown();

const sizes = JSON.parse(readFileSync(new URL('../../dist/bootstrap/sizes.json', import.meta.url), 'utf8'));
const mitogen = { ready: 157, rtt: 0.37, mib: 22 };
console.log(`tendril bench on node ${process.version} (${RUNS} starts, 10000 calls, 50 x 1 MiB)\n`);
row('first stage', `${sizes.firstStage} B`, 'goal: under 1024 B');
row('core, deflated', `${sizes.coreDeflated} B`, `${sizes.core} B before deflate`);
row('node -e 0 (median)', `${median(nodeE0).toFixed(1)} ms`, 'measured in this run');
row(
  'ready local context (median)',
  `${median(ready).toFixed(1)} ms`,
  `${(median(ready) / median(nodeE0)).toFixed(2)}x node -e 0 (target <= 1.15x); Mitogen ${mitogen.ready} ms quoted`,
);
row(
  'empty call round trip (median)',
  `${(median(rtt) * 1000).toFixed(1)} µs`,
  `Mitogen ${mitogen.rtt} ms quoted: ${(mitogen.rtt / median(rtt)).toFixed(1)}x faster (target >= 5x)`,
);
row(
  'call with 1 MiB argument (median)',
  `${median(big).toFixed(2)} ms`,
  `Mitogen ${mitogen.mib} ms quoted: ${(mitogen.mib / median(big)).toFixed(1)}x faster (target >= 10x)`,
);

console.log('\nmodule forwarding, on a target with none of the packages');
await benchModules();

console.log('\nssh and sudo, against a loopback sshd');
await benchSsh();
