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

import { commandLine } from './cli.js';
import { benchLatency } from './flow-compare.js';
import { benchFairness } from './flow-fairness.js';
import { benchMemory } from './flow-memory.js';
import { partArgument, runParts, type Table } from './flow-shared.js';
import { benchThroughput } from './flow-throughput.js';

const PARTS: Record<string, (table: Table) => Promise<void>> = {
  memory: benchMemory,
  throughput: benchThroughput,
  latency: benchLatency,
  fairness: benchFairness,
};

const { positionals: picked } = commandLine({
  script: 'node build/bench/flow.js',
  description: `Flow control (npm run bench:flow): memory under a slow consumer, Sender-stream throughput
beside cat | cat and cat | ssh cat, call latency against an earlier commit (built
once in /tmp), and fairness between contexts. Needs root (the suite's loopback sshd).`,
  environment: {
    FLOW_SECONDS: 'the memory run, in seconds (default 30)',
    FLOW_ROUNDS: 'rounds of throughput and fairness (default 5)',
    FLOW_LATENCY_ROUNDS: 'rounds of latency (default 10)',
    FLOW_MIB: 'MiB per throughput run (default 256)',
    BASE: 'the commit latency is compared with (default HEAD~1)',
  },
  arguments: [partArgument(PARTS)],
});
await runParts('flow-control', PARTS, picked);
