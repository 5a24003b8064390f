// `npm run bench:runtime`: what a target without Node costs (issue 23),
// over the suite's own loopback sshd, every figure measured in this run,
// the rows alternating so drift hits all alike:
//
// - time to a context that answered one call: on a target with Node; on
//   one without, the first context (the runtime sent, checked, unpacked
//   and started: the master's store already holds it, as after a first
//   run or `tendril-runtime fetch`) and the second (the runtime found in
//   the account's cache); beside the floor, plain OpenSSH's `ssh host
//   node -e 0` on the target with Node (start to exit);
// - the runtime bytes each of those sent (router.runtimeStats()).
//
// The target without Node is an sshd in a mount namespace where the
// host's Node is hidden (test/support/testbed.ts); the account's runtime
// cache is emptied before each first context and at the end.
//
//   node build/bench/runtime.js [--smoke] [--rounds N] [--json FILE]
import { execFile } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import { promisify } from 'node:util';
import { Router } from 'tendril';
import { forgetRuntimes, SHIPPED } from '../test/support/runtimes.js';
import { openSshArgs, sshLogin, startTestbed, type Testbed } from '../test/support/testbed.js';
import { commandLine } from './cli.js';
import { printTable, type Row, summarise } from './compare/results.js';

const { values: flags } = commandLine({
  script: 'node build/bench/runtime.js',
  description: `A target without Node (npm run bench:runtime): time to a context that answered one call over
ssh when the target has Node, and when it has none, for the first context (Node shipped) and
the second (Node kept there), beside plain OpenSSH's ssh host node -e 0; the runtime bytes each
sent. Needs root (the suite's sshd test bed).`,
  options: {
    smoke: { type: 'boolean', description: 'every measurement once (what the suite runs)' },
    rounds: { type: 'string', value: 'N', description: 'rounds, after one warm-up round (default 5; 1 with --smoke)' },
    json: { type: 'string', value: 'FILE', description: 'also write the results as JSON to FILE' },
  },
});
const SMOKE = flags.smoke === true;
const ROUNDS = SMOKE ? 1 : Math.max(1, Number(flags.rounds ?? 5) || 5);
const TIMEOUT = 300_000;

const TIME = 'Time to a context that answered one call, over ssh';
const BYTES = 'Runtime bytes sent for the context';
const rows = {
  there: row(TIME, 'target with Node', 'ms'),
  first: row(TIME, 'no Node: first context (Node shipped)', 'ms'),
  second: row(TIME, 'no Node: second context (Node kept)', 'ms'),
  firstBytes: row(BYTES, 'no Node: first context', 'bytes'),
  secondBytes: row(BYTES, 'no Node: second context', 'bytes'),
};
const floor: number[] = [];

function row(group: string, metric: string, unit: Row['unit']): Row {
  return { group, metric, unit, tendril: [], peers: {} };
}

async function timed<T>(work: () => Promise<T>): Promise<[number, T]> {
  const start = performance.now();
  const value = await work();
  return [performance.now() - start, value];
}

async function round(withNode: Testbed, without: Testbed, record: boolean): Promise<void> {
  const [sshFloor] = await timed(() =>
    promisify(execFile)('ssh', [...openSshArgs(withNode), 'node -e 0'], { timeout: TIMEOUT }),
  );
  const plain = new Router();
  try {
    const [there] = await timed(async () => (await plain.ssh(sshLogin(withNode))).call(() => 1));
    if (record) rows.there.tendril.push(there);
  } finally {
    await plain.shutdown();
  }
  forgetRuntimes(without.accounts.sudoer.name);
  const shipping = new Router({ nodeRuntime: SHIPPED });
  try {
    const login = { ...sshLogin(without), connectTimeout: TIMEOUT };
    const [first] = await timed(async () => (await shipping.ssh(login)).call(() => 1));
    const afterFirst = shipping.runtimeStats().bytesSent;
    const [second] = await timed(async () => (await shipping.ssh(login)).call(() => 1));
    if (!record) return;
    floor.push(sshFloor);
    rows.first.tendril.push(first);
    rows.second.tendril.push(second);
    rows.firstBytes.tendril.push(afterFirst);
    rows.secondBytes.tendril.push(shipping.runtimeStats().bytesSent - afterFirst);
  } finally {
    await shipping.shutdown();
  }
}

const withNode = await startTestbed();
const without = await startTestbed({ withoutNode: true });
try {
  // The warm-up also fills the master's store, if the registry must be asked.
  await round(withNode, without, SMOKE);
  for (let i = SMOKE ? 1 : 0; i < ROUNDS; i++) await round(withNode, without, true);
} finally {
  forgetRuntimes(without.accounts.sudoer.name);
  await without.stop();
  await withNode.stop();
}

const floorMedian = [...floor].sort((a, b) => a - b)[Math.floor(floor.length / 2)] as number;
for (const key of ['there', 'first', 'second'] as const) rows[key].peers['floor: ssh host node -e 0'] = floorMedian;
const summaries = Object.values(rows).map(summarise);
printTable(summaries);
if (flags.json) writeFileSync(flags.json, `${JSON.stringify({ summaries }, null, 2)}\n`);
