// The measurements issue 9 asks for (`npm run bench:flow`): memory under a
// slow consumer, Sender-stream throughput beside cat | cat and
// cat | ssh cat, call latency against an earlier commit, and fairness
// between contexts. Every figure is measured in this run; ratios compare
// figures of the same run. Parts can be picked by name:
//   node build/bench/flow.js [memory] [throughput] [latency] [fairness]
// Knobs (environment): FLOW_SECONDS (memory run, default 30), FLOW_ROUNDS
// (throughput and fairness, default 5), FLOW_LATENCY_ROUNDS (default 10),
// FLOW_MIB (MiB per throughput run, default 256), BASE (the commit the
// latency is compared with, default HEAD~1).
import { benchLatency } from './flow-compare.js';
import { benchFairness } from './flow-fairness.js';
import { benchMemory } from './flow-memory.js';
import { abort, Table } from './flow-shared.js';
import { benchThroughput } from './flow-throughput.js';

const PARTS: Record<string, (table: Table) => Promise<void>> = {
  memory: benchMemory,
  throughput: benchThroughput,
  latency: benchLatency,
  fairness: benchFairness,
};

const picked = process.argv.slice(2);
for (const name of picked) {
  if (!(name in PARTS)) {
    console.error(`unknown part ${name}; the parts are: ${Object.keys(PARTS).join(', ')}`);
    process.exit(2);
  }
}
for (const signal of ['SIGINT', 'SIGTERM'] as const) {
  process.once(signal, () => {
    console.error(`flow: ${signal}: shutting down contexts and the test bed`);
    void abort().finally(() => process.exit(130));
  });
}
const table = new Table();
const failures: string[] = [];
for (const [name, part] of Object.entries(PARTS)) {
  if (picked.length > 0 && !picked.includes(name)) continue;
  try {
    await part(table);
  } catch (error) {
    failures.push(name);
    table.heading(`${name}: FAILED`);
    table.add(name, 'failed', (error as Error).stack ?? String(error));
  }
}
console.log(`tendril flow-control bench on node ${process.version}, ${new Date().toISOString()}`);
table.print();
if (failures.length > 0) process.exitCode = 1;
