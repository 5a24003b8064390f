// The plot in docs/performance.md: round trips and throughput against the
// peers, from one run's summaries, drawn by vega-lite as SVG.
import type { Summary } from './results.js';

interface Point {
  metric: string;
  who: string;
  value: number;
}

/** tendril's median and each peer's, for the rows of `group` in `unit`. */
function points(summaries: Summary[], group: string): Point[] {
  const out: Point[] = [];
  for (const s of summaries.filter((row) => row.group === group)) {
    out.push({ metric: s.metric, who: 'tendril', value: s.median });
    for (const [who, peer] of Object.entries(s.peers)) out.push({ metric: s.metric, who, value: peer.median });
  }
  return out.filter((p) => Number.isFinite(p.value) && p.value > 0);
}

/** One grouped bar chart. */
function chart(title: string, axis: string, values: Point[], log: boolean): object {
  return {
    title,
    data: { values },
    mark: 'bar',
    height: { step: 9 },
    width: 520,
    encoding: {
      row: {
        field: 'metric',
        type: 'nominal',
        title: null,
        header: { labelAngle: 0, labelAlign: 'left', labelLimit: 220 },
      },
      y: { field: 'who', type: 'nominal', axis: null },
      x: { field: 'value', type: 'quantitative', title: axis, scale: log ? { type: 'log' } : {} },
      color: { field: 'who', type: 'nominal', title: null },
    },
  };
}

/** The SVG of the round-trip and throughput charts. */
export async function plot(summaries: Summary[], rttGroup: string, bulkGroup: string): Promise<string> {
  const vega = await import('vega');
  const vegaLite = await import('vega-lite');
  const spec = vegaLite.compile({
    $schema: 'https://vega.github.io/schema/vega-lite/v6.json',
    vconcat: [
      chart('Call round trip (lower is better)', 'ms (log scale)', points(summaries, rttGroup), true),
      chart('Bulk throughput (higher is better)', 'MB/s', points(summaries, bulkGroup), false),
    ],
    config: { font: 'sans-serif' },
    // biome-ignore lint/suspicious/noExplicitAny: vega-lite's spec type is a union the literal above satisfies.
  } as any).spec;
  const view = new vega.View(vega.parse(spec), { renderer: 'none' });
  return view.toSVG();
}
