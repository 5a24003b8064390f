// The scale row (issue 26): local contexts started through intermediates,
// one call each, then one call to all of them at once, each round in a fresh
// master (bench/scripts/scale.ts, and Mitogen's driver in its `scale` mode),
// tendril and Mitogen alternating. Also a smaller run of the same shape, so
// the master's RSS per context is a slope between two sizes rather than
// the whole peak (the master's fixed costs, the intermediates' included,
// cancel out).
import { median, progress } from '../flow-shared.js';
import { mitogen, tendrilScript } from './processes.js';
import type { Row } from './results.js';

/** What one master reports (both sides print the same fields). */
export interface ScaleRun {
  /** Every context started and answering one call, ms. */
  startMs: number;
  /** One call to every leaf at once, ms. */
  fleetMs: number;
  /** The master's own CPU (user + system) during the starts, ms. */
  startCpuMs: number;
  /** The same during the call to all. */
  fleetCpuMs: number;
  /** VmRSS before the first start. */
  baseRss: number;
  /** VmRSS at the end, every context alive. */
  rss: number;
  /** VmHWM at the end: the master's peak. */
  peakRss: number;
  /** fds open before the first start, and at the end. */
  baseFds: number;
  fds: number;
  /** Every process under the master: count, summed RSS, summed PSS. */
  children: number;
  childrenRss: number;
  childrenPss: number;
  /** The master's fds before the first start and at the end, by kind (socket, pipe...). */
  baseFdKinds: Record<string, number>;
  fdKinds: Record<string, number>;
  /** tendril only, after the figures above were read: the same calls by Promise.all, then a second fleet. */
  allMs?: number;
  fleetAgainMs?: number;
  allCpuMs?: number;
  fleetAgainCpuMs?: number;
  /** tendril only: the JavaScript heap in use after a full collection, before the first start and at the end. */
  baseHeap?: number;
  heap?: number;
}

/** The shape of the row: `mids` intermediates each starting `per` contexts, and the smaller run's `per`. */
export interface ScaleShape {
  mids: number;
  per: number;
  smallPer: number;
  rounds: number;
}

/** The full row (400 through 8, against 40 through 8) and the smoke one. */
export const SCALE_SHAPES = {
  full: { mids: 8, per: 50, smallPer: 5, rounds: 2 },
  smoke: { mids: 2, per: 2, smallPer: 1, rounds: 1 },
} as const satisfies Record<string, ScaleShape>;

/** The rows' group in the table, naming the shape. */
export function scaleGroup({ mids, per }: ScaleShape): string {
  return `Scale: ${mids * per} local contexts through ${mids} intermediates, one call each, then one call to all (fresh master)`;
}

/** Every run's raw reports, kept for the JSON output and the projection in docs/performance.md. */
export interface ScaleRaw {
  shape: ScaleShape;
  tendril: { large: ScaleRun[]; small: ScaleRun[] };
  mitogen: { large: ScaleRun[]; small: ScaleRun[] };
}

/** Runs the rounds and returns the rows (group `Scale: ...`) and the raw reports. */
export async function scale(shape: ScaleShape, env: NodeJS.ProcessEnv): Promise<{ rows: Row[]; raw: ScaleRaw }> {
  const { mids, per, smallPer, rounds } = shape;
  const leaves = mids * per;
  const raw: ScaleRaw = { shape, tendril: { large: [], small: [] }, mitogen: { large: [], small: [] } };
  // Every context is a process under the master: one missing (or one left from elsewhere) would skew every figure.
  const checked = (side: string, n: number, stdout: string) => {
    const run = JSON.parse(stdout) as ScaleRun;
    if (run.children !== mids + mids * n) throw new Error(`${side}: ${run.children} processes under the master`);
    return run;
  };
  const ours = async (n: number) =>
    checked('tendril', n, (await tendrilScript('scale', [String(mids), String(n)], env)).stdout);
  const theirs = async (n: number) =>
    checked('Mitogen', n, (await mitogen(['scale', String(mids), String(n)], env)).stdout);
  for (let round = 0; round < rounds; round++) {
    progress(`scale: ${leaves} contexts through ${mids} intermediates, round ${round + 1} of ${rounds}`);
    raw.tendril.large.push(await ours(per));
    raw.mitogen.large.push(await theirs(per));
    raw.tendril.small.push(await ours(smallPer));
    raw.mitogen.small.push(await theirs(smallPer));
  }
  const group = scaleGroup(shape);
  const mine = (key: keyof ScaleRun) => raw.tendril.large.map((r) => r[key] as number);
  const peer = (key: keyof ScaleRun) => ({ Mitogen: median(raw.mitogen.large.map((r) => r[key] as number)) });
  const slope = (side: ScaleRaw['tendril']) =>
    (median(side.large.map((r) => r.peakRss)) - median(side.small.map((r) => r.peakRss))) / (mids * (per - smallPer));
  const rows: Row[] = [
    {
      group,
      metric: `start ${mids} + ${leaves} contexts, one call each, wall time`,
      unit: 'ms',
      tendril: mine('startMs'),
      peers: peer('startMs'),
    },
    {
      group,
      metric: `one call to all ${leaves} at once (fleet; Mitogen call_async + select), wall time`,
      unit: 'ms',
      tendril: mine('fleetMs'),
      peers: peer('fleetMs'),
    },
    { group, metric: 'master peak RSS (VmHWM)', unit: 'bytes', tendril: mine('peakRss'), peers: peer('peakRss') },
    {
      group,
      metric: `master RSS per context (peak, ${mids * smallPer} to ${leaves} contexts)`,
      unit: 'bytes',
      tendril: [slope(raw.tendril)],
      peers: { Mitogen: slope(raw.mitogen) },
    },
    {
      group,
      metric: `master CPU per context started (user + system)`,
      unit: 'ms CPU',
      tendril: raw.tendril.large.map((r) => r.startCpuMs / (leaves + mids)),
      peers: { Mitogen: median(raw.mitogen.large.map((r) => r.startCpuMs / (leaves + mids))) },
    },
    {
      group,
      metric: `master CPU per context in the call to all`,
      unit: 'ms CPU',
      tendril: raw.tendril.large.map((r) => r.fleetCpuMs / leaves),
      peers: { Mitogen: median(raw.mitogen.large.map((r) => r.fleetCpuMs / leaves)) },
    },
    { group, metric: 'fds open in the master, all alive', unit: 'fds', tendril: mine('fds'), peers: peer('fds') },
    {
      group,
      metric: `the ${leaves + mids} children's memory (sum of PSS)`,
      unit: 'bytes',
      tendril: mine('childrenPss'),
      peers: peer('childrenPss'),
    },
    {
      group,
      metric: `the ${leaves + mids} children's memory (sum of RSS, shared pages in each)`,
      unit: 'bytes',
      tendril: mine('childrenRss'),
      peers: peer('childrenRss'),
    },
  ];
  return { rows, raw };
}
