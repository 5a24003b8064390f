// `npm run bench:scale`: the scale row of `npm run bench` alone (issue 26).
// 8 local contexts, each starting 50 local contexts via itself, one call
// each, then one call to all 400 at once, beside Mitogen's same shape
// (router.local(via=...)), each round in a fresh master; and a smaller run
// of the same shape (8 x 5), so the master's RSS per context is a slope.
// Local only: it needs no test bed, only python3-mitogen.
//
//   node build/bench/scale.js [--smoke] [--json FILE]
import { writeFileSync } from 'node:fs';
import { commandLine } from './cli.js';
import { ensurePackages } from './compare/processes.js';
import { format, printTable, summarise } from './compare/results.js';
import { SCALE_SHAPES, type ScaleRun, scale } from './compare/scale.js';
import { projectionTable } from './compare/scale-projection.js';
import { median } from './flow-shared.js';

const { values: flags } = commandLine({
  script: 'node build/bench/scale.js',
  description: `The scale row of npm run bench alone: 400 local contexts started through 8
intermediates, one call each, then one call to all, tendril beside Mitogen, each
round in a fresh master; prints the table and the figures the projection in
docs/performance.md uses. Needs python3-mitogen and about 10 GB of free memory.`,
  options: {
    smoke: { type: 'boolean', description: '4 contexts through 2 intermediates, once (what the suite runs)' },
    json: { type: 'string', value: 'FILE', description: 'also write the rows and every raw report as JSON to FILE' },
  },
  environment: { SCALE_ROUNDS: `rounds of each size (default ${SCALE_SHAPES.full.rounds}; the smoke run does 1)` },
});

ensurePackages({ 'python3-mitogen': '/usr/lib/python3/dist-packages/mitogen/__init__.py' });
// As npm run bench does: it costs every Node process tens of ms, and measures the machine, not tendril.
delete process.env.NODE_EXTRA_CA_CERTS;
const base = flags.smoke ? SCALE_SHAPES.smoke : SCALE_SHAPES.full;
const rounds = flags.smoke ? 1 : Number(process.env.SCALE_ROUNDS ?? base.rounds);
const env = { ...process.env, ...(flags.smoke && { BENCH_SMOKE: '1' }) };
const { rows, raw } = await scale({ ...base, rounds }, env);
const summaries = rows.map(summarise);
printTable(summaries);

const { mids, per } = raw.shape;
console.log(`\nper round (${mids} x ${per}):`);
for (const [side, runs] of [
  ['tendril', raw.tendril.large],
  ['Mitogen', raw.mitogen.large],
] as const) {
  const m = (f: (r: ScaleRun) => number) => median(runs.map(f));
  const bytes = (f: (r: ScaleRun) => number) => format(m(f), 'bytes');
  const sockets = (kinds: Record<string, number>) => kinds.socket ?? 0;
  console.log(
    `  ${side}: RSS ${bytes((r) => r.baseRss)} before the first start, ${bytes((r) => r.rss)} held at the end; ` +
      `(peak - that baseline) / ${mids * per} = ${bytes((r) => (r.peakRss - r.baseRss) / (mids * per))}; ` +
      `fds ${m((r) => r.baseFds)} before, ${m((r) => r.fds)} at the end, ` +
      `${m((r) => (sockets(r.fdKinds) - sockets(r.baseFdKinds)) / mids)} sockets per intermediate; ` +
      `master CPU ${m((r) => r.startCpuMs).toFixed(0)} ms to start, ${m((r) => r.fleetCpuMs).toFixed(1)} ms for the call to all; ` +
      `PSS ${bytes((r) => r.childrenPss / r.children)} per child`,
  );
}
const again = (key: 'allMs' | 'fleetAgainMs' | 'allCpuMs' | 'fleetAgainCpuMs') =>
  median(raw.tendril.large.map((r) => r[key] ?? Number.NaN)).toFixed(0);
console.log(
  `  tendril, after those were read: the same calls to all by Promise.all ${again('allMs')} ms ` +
    `(master CPU ${again('allCpuMs')} ms), a second fleet ${again('fleetAgainMs')} ms (${again('fleetAgainCpuMs')} ms)`,
);
console.log(
  "\nprojection (d, each intermediate's own cost, is the fan-out's, which npm run bench measures):\n" +
    projectionTable(raw),
);
const heldPerLeaf =
  (median(raw.tendril.large.map((r) => r.heap ?? Number.NaN)) -
    median(raw.tendril.small.map((r) => r.heap ?? Number.NaN))) /
  (mids * (per - raw.shape.smallPer));
console.log(
  `  tendril: the heap a context behind an intermediate leaves in the master (after a full collection, ` +
    `${mids * raw.shape.smallPer} to ${mids * per}): ${format(heldPerLeaf, 'bytes')}`,
);
if (flags.json) writeFileSync(flags.json, `${JSON.stringify({ summaries, raw }, null, 2)}\n`);
