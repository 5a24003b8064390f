// The tendril demo: start a local child and a grandchild through it, call
// functions in both, watch a remote exception arrive, and time it all.
// Run with `npm run demo`; set DEBUG=tendril:* to see the protocol at work.
import { CallError, Router } from 'tendril';

// Shipped by source to each context, so it may only use its own scope and require().
function about() {
  const os = require('node:os') as typeof import('node:os');
  return { pid: process.pid, parentPid: process.ppid, node: process.version, host: os.hostname() };
}

await using router = new Router();

const started = performance.now();
const child = await router.local({ name: 'child' });
const readyMs = performance.now() - started;
const grandchild = await router.local({ name: 'grandchild', via: child });

console.log(`master      pid ${process.pid}, node ${process.version}`);
for (const context of [child, grandchild]) {
  const info = await context.call(about);
  console.log(
    `${context.name.padEnd(11)} pid ${info.pid} (parent ${info.parentPid}), node ${info.node}, host ${info.host}`,
  );
}

// Printed on the master's stderr as `[grandchild] ...` (and emitted as the router's 'log' event).
await grandchild.call(() => console.log('console.log in the grandchild is printed here, after its name'));

try {
  await grandchild.call(function parseConfig(text: string) {
    return JSON.parse(text);
  }, '{not json');
} catch (error) {
  if (!(error instanceof CallError)) throw error;
  console.log(`remote exception: ${error.remoteName} from context '${error.contextName}': ${error.remoteMessage}`);
}

// Warm up first: the first calls also compile code on both sides.
for (let i = 0; i < 3000; i++) await child.call(() => null);
const samples: number[] = [];
for (let i = 0; i < 2000; i++) {
  const t = performance.now();
  await child.call(() => null);
  samples.push(performance.now() - t);
}
samples.sort((a, b) => a - b);
console.log(`time to a ready local context: ${readyMs.toFixed(1)} ms`);
console.log(`median round trip of an empty call: ${((samples[samples.length >> 1] as number) * 1000).toFixed(0)} µs`);
