// The side-by-side table: one row per measurement, tendril's samples and
// each peer's median from the same run, printed, and kept as JSON for
// docs/performance.md and the plot.
import { median, quantile } from '../flow-shared.js';

/** What a row measures: `ms`, `bytes` and `fds` (open file descriptors) are better lower, `MB/s` higher. */
export type Unit = 'ms' | 'µs' | 'bytes' | 'MB/s' | 'ms CPU' | 'fds';

/** One measurement: tendril's samples, each peer's median. */
export interface Row {
  group: string;
  metric: string;
  unit: Unit;
  tendril: number[];
  peers: Record<string, number>;
  note?: string;
}

/** The medians and spread of a row, as printed and saved. */
export interface Summary {
  group: string;
  metric: string;
  unit: Unit;
  median: number;
  p10: number;
  p90: number;
  samples: number;
  peers: Record<string, { median: number; ratio: number }>;
  note?: string;
}

/**
 * How many times better tendril is than the peer: above 1 it is faster
 * (or smaller); below 1 the peer is.
 */
export function ratio(unit: Unit, tendril: number, peer: number): number {
  return unit === 'MB/s' ? tendril / peer : peer / tendril;
}

export function summarise(row: Row): Summary {
  const m = median(row.tendril);
  const peers: Summary['peers'] = {};
  for (const [name, value] of Object.entries(row.peers))
    peers[name] = { median: value, ratio: ratio(row.unit, m, value) };
  return {
    group: row.group,
    metric: row.metric,
    unit: row.unit,
    median: m,
    p10: quantile(row.tendril, 0.1),
    p90: quantile(row.tendril, 0.9),
    samples: row.tendril.length,
    peers,
    ...(row.note !== undefined && { note: row.note }),
  };
}

/** A value with its unit, rounded for reading. */
export function format(value: number, unit: Unit): string {
  if (!Number.isFinite(value)) return 'n/a';
  if (unit === 'bytes') {
    if (Math.abs(value) >= 10 * 1024 * 1024) return `${(value / 1024 / 1024).toFixed(1)} MiB`;
    return Math.abs(value) >= 10_240 ? `${(value / 1024).toFixed(0)} KiB` : `${value.toFixed(0)} B`;
  }
  if (unit === 'fds') return `${Math.round(value)} fds`;
  const digits = value >= 100 ? 0 : value >= 10 ? 1 : 2;
  return `${value.toFixed(digits)} ${unit}`;
}

/** `peer median (ratio)` for each peer. */
export function peerCells(summary: Summary): string[] {
  return Object.entries(summary.peers).map(
    ([name, { median: value, ratio: r }]) => `${name} ${format(value, summary.unit)} (${r.toFixed(2)}x)`,
  );
}

/** Prints the table, grouped, one line per metric. */
export function printTable(summaries: Summary[]): void {
  let group = '';
  for (const s of summaries) {
    if (s.group !== group) {
      group = s.group;
      console.log(`\n${group}`);
    }
    const spread = s.samples > 1 ? ` [${format(s.p10, s.unit)} – ${format(s.p90, s.unit)}]` : '';
    const peers = peerCells(s).join('; ');
    console.log(
      `  ${s.metric.padEnd(46)} ${format(s.median, s.unit).padStart(11)}${spread}${peers ? `  | ${peers}` : ''}`,
    );
  }
  console.log('\nratio: how many times faster (or smaller) tendril is than the peer; below 1, the peer is better.');
}

/** The table as Markdown, for docs/performance.md. */
/** Text for a table cell: a `|` in it (`cat | cat`) would end the cell. */
function cell(text: string): string {
  return text.replace(/\|/g, '\\|');
}

export function markdownTable(summaries: Summary[]): string {
  const lines = ['| measurement | tendril median (p10–p90) | peers: median (ratio) |', '| --- | --- | --- |'];
  let group = '';
  for (const s of summaries) {
    if (s.group !== group) {
      group = s.group;
      lines.push(`| **${group}** | | |`);
    }
    const spread = s.samples > 1 ? ` (${format(s.p10, s.unit)} – ${format(s.p90, s.unit)})` : '';
    const peers = peerCells(s).join('<br>') || '—';
    lines.push(`| ${cell(s.metric)} | ${format(s.median, s.unit)}${spread} | ${cell(peers)} |`);
  }
  return lines.join('\n');
}
