// argv[2] local contexts started at once, one call each; prints the wall
// time (ms) and this master's peak RSS (bytes) as JSON.
import { Router } from 'tendril';

const count = Number(process.argv[2]);
const started = performance.now();
const router = new Router();
await Promise.all(
  Array.from({ length: count }, async (_, i) => (await router.local({ name: `fan-${i}` })).call(() => process.pid)),
);
const wall = performance.now() - started;
process.stdout.write(`${JSON.stringify({ wall, rss: process.resourceUsage().maxRSS * 1024 })}\n`);
await router.shutdown();
