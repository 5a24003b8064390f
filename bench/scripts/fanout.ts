// argv[2] local contexts started at once, one call each; prints the wall
// time (ms) and this master's peak RSS (bytes) as JSON.
import { readFileSync } from 'node:fs';
import { Router } from 'tendril';
import { commandLine } from '../cli.js';

const count = Number(
  commandLine({
    script: 'node build/bench/scripts/fanout.js',
    description: `Starts COUNT local contexts at once, one call each, and prints the wall time (ms) and
this master's peak RSS (bytes) as JSON.`,
    arguments: [{ name: 'COUNT', description: 'contexts to start', count: true, required: true }],
  }).positionals[0],
);
const started = performance.now();
const router = new Router();
await Promise.all(
  Array.from({ length: count }, async (_, i) => (await router.local({ name: `fan-${i}` })).call(() => process.pid)),
);
const wall = performance.now() - started;
// Not resourceUsage().maxRSS: Linux carries it over an exec, so it would be the bench's own.
const hwm = /^VmHWM:\s+(\d+) kB/m.exec(readFileSync('/proc/self/status', 'utf8'))?.[1];
process.stdout.write(`${JSON.stringify({ wall, rss: Number(hwm) * 1024 })}\n`);
await router.shutdown();
