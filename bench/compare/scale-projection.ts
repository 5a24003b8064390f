// docs/performance.md's projection of the scale row: what M targets through
// N intermediates would cost the master, from this run's per-context
// figures (written between <!-- scale:begin --> and <!-- scale:end --> by
// --write-docs, so the figures are always the table's).
import { median } from '../flow-shared.js';
import { format } from './results.js';
import type { ScaleRaw, ScaleRun } from './scale.js';

/** The projected shape: targets, and intermediates each starting targets / intermediates of them. */
export const PROJECTED = { targets: 10_000, mids: 100 } as const;

/** One side's measured figures the projection is made of. */
interface Figures {
  /** Peak RSS of the small run (mids intermediates, mids x smallPer leaves). */
  smallPeak: number;
  /** RSS per leaf behind an intermediate: the scale row's slope. */
  perLeaf: number;
  /** RSS per context the master started itself: the fan-out's slope (undefined when not measured). */
  perDirect: number | undefined;
  /** fds open with all alive, and the sockets each direct child holds. */
  fds: number;
  fdsPerDirect: number;
  /** Master CPU per context started, and per context in the call to all, ms. */
  startCpu: number;
  callCpu: number;
}

function figures(side: { large: ScaleRun[]; small: ScaleRun[] }, raw: ScaleRaw, perDirect?: number): Figures {
  const { mids, per, smallPer } = raw.shape;
  const m = (runs: ScaleRun[], f: (r: ScaleRun) => number) => median(runs.map(f));
  const sockets = (kinds: Record<string, number>) => kinds.socket ?? 0;
  return {
    smallPeak: m(side.small, (r) => r.peakRss),
    perLeaf: (m(side.large, (r) => r.peakRss) - m(side.small, (r) => r.peakRss)) / (mids * (per - smallPer)),
    perDirect,
    fds: m(side.large, (r) => r.fds),
    fdsPerDirect: m(side.large, (r) => (sockets(r.fdKinds) - sockets(r.baseFdKinds)) / mids),
    startCpu: m(side.large, (r) => r.startCpuMs / (mids + mids * per)),
    callCpu: m(side.large, (r) => r.fleetCpuMs / (mids * per)),
  };
}

/**
 * The projection as a Markdown table, one column per side. `perDirect` is
 * the fan-out's RSS per context (the Memory group's row), per side.
 */
export function projectionTable(raw: ScaleRaw, perDirect: { tendril?: number; Mitogen?: number } = {}): string {
  const { mids, smallPer } = raw.shape;
  const { targets, mids: projectedMids } = PROJECTED;
  const sides = [figures(raw.tendril, raw, perDirect.tendril), figures(raw.mitogen, raw, perDirect.Mitogen)];
  const moreMids = projectedMids - mids;
  const moreLeaves = targets - mids * smallPer;
  const rss = (f: Figures) => f.smallPeak + moreMids * (f.perDirect ?? Number.NaN) + moreLeaves * f.perLeaf;
  const fds = (f: Figures) => f.fds + moreMids * f.fdsPerDirect;
  const seconds = (ms: number) => `${(ms / 1000).toFixed(1)} s`;
  const cells = (f: (figures: Figures) => string) => sides.map(f).join(' | ');
  const lines = [
    `| ${targets.toLocaleString('en')} targets through ${projectedMids} intermediates | formula | tendril | Mitogen |`,
    '| --- | --- | --- | --- |',
    `| master peak RSS | P + ${moreMids}·d + ${moreLeaves.toLocaleString('en')}·l | ${cells((f) => format(rss(f), 'bytes'))} |`,
    `| of which per leaf (l) | | ${cells((f) => format(f.perLeaf, 'bytes'))} |`,
    `| of which per intermediate (d) | | ${cells((f) => format(f.perDirect ?? Number.NaN, 'bytes'))} |`,
    `| fds open in the master | F + ${moreMids}·f | ${cells((f) => `${Math.round(fds(f))} (f = ${f.fdsPerDirect})`)} |`,
    `| master CPU to start them all | ${(targets + projectedMids).toLocaleString('en')}·c | ${cells((f) => seconds((targets + projectedMids) * f.startCpu))} |`,
    `| master CPU for one call to all | ${targets.toLocaleString('en')}·k | ${cells((f) => seconds(targets * f.callCpu))} |`,
  ];
  return lines.join('\n');
}
