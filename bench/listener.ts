// Calls through the UNIX listener (`npm run bench:listener`): 8 worker
// processes (child_process.fork) x 20 calls to one ssh context they share
// through the master's pool, beside the master making the same calls
// itself, both against the suite's loopback sshd (needs root). The issue's
// target: a call through the listener within 2x of a direct one. Rounds
// alternate between the two, so drift on the machine hits both.
// Knobs (environment): LISTENER_ROUNDS (default 5).
import { type ChildProcess, fork } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { type Context, joinListener, type ListenerClientTarget, Router } from 'tendril';
import { sshLogin, startTestbed } from '../test/support/testbed.js';
import { commandLine } from './cli.js';
import { median, quantile } from './flow-shared.js';
import { row } from './report.js';

const WORKERS = 8;
const CALLS = 20;
const ROUNDS = Number(process.env.LISTENER_ROUNDS ?? 5);

/** Times each of `count` sequential calls of `() => 0`, in ms. */
async function timeCalls(context: Context, count: number): Promise<number[]> {
  const times: number[] = [];
  for (let i = 0; i < count; i++) {
    const started = performance.now();
    await context.call(() => 0);
    times.push(performance.now() - started);
  }
  return times;
}

type FromWorker = { ready: true } | { times: number[] };

async function worker(socket: string, target: ListenerClientTarget): Promise<void> {
  const joined = await joinListener(socket);
  const lease = await joined.acquire(target);
  // Warm this process's function analysis and the path, as the master's is warmed.
  await timeCalls(lease.context, 5);
  process.on('message', async (message) => {
    if (message === 'go') process.send?.({ times: await timeCalls(lease.context, CALLS) } satisfies FromWorker);
    else {
      lease.release();
      await joined.close();
      process.disconnect();
    }
  });
  process.send?.({ ready: true } satisfies FromWorker);
}

function next(child: ChildProcess): Promise<FromWorker> {
  return new Promise((resolve, reject) => {
    const onExit = (code: number | null) => reject(new Error(`a worker exited (${code})`));
    child.once('exit', onExit);
    child.once('message', (message) => {
      child.off('exit', onExit);
      resolve(message as FromWorker);
    });
  });
}

async function master(): Promise<void> {
  if (process.getuid?.() !== 0) {
    console.log('listener: not measured: the loopback sshd test bed needs root');
    return;
  }
  const bed = await startTestbed();
  const scratch = mkdtempSync(join(tmpdir(), 'tendril-bench-listener-'));
  const router = new Router();
  const workers: ChildProcess[] = [];
  try {
    const logStart = bed.sshdLog().length;
    const target = { method: 'ssh' as const, ...sshLogin(bed) };
    const listener = await router.listen(join(scratch, 'run', 'tendril.sock'));
    const lease = await router.pool.acquire(target);
    await timeCalls(lease.context, 5);
    for (let i = 0; i < WORKERS; i++) {
      workers.push(fork(fileURLToPath(import.meta.url), ['worker', listener.path, JSON.stringify(target)]));
    }
    await Promise.all(workers.map(next));
    const direct: number[] = [];
    const through: number[] = [];
    const directAlone: number[] = [];
    const throughAlone: number[] = [];
    const wall = { direct: [] as number[], through: [] as number[] };
    for (let round = 0; round < ROUNDS; round++) {
      // Alternate which side goes first.
      const sides = [
        async () => {
          const started = performance.now();
          const times = await Promise.all(workers.map(() => timeCalls(lease.context, CALLS)));
          wall.direct.push(performance.now() - started);
          direct.push(...times.flat());
          directAlone.push(...(await timeCalls(lease.context, CALLS)));
        },
        async () => {
          const started = performance.now();
          const replies = workers.map(next);
          for (const child of workers) child.send('go');
          const times = (await Promise.all(replies)).map((reply) => ('times' in reply ? reply.times : []));
          wall.through.push(performance.now() - started);
          through.push(...times.flat());
          const one = workers[0] as ChildProcess;
          const reply = next(one);
          one.send('go');
          const alone = await reply;
          throughAlone.push(...('times' in alone ? alone.times : []));
        },
      ];
      if (round % 2 === 1) sides.reverse();
      for (const side of sides) await side();
    }
    const connections = (
      bed
        .sshdLog()
        .slice(logStart)
        .match(/Accepted publickey for /g) ?? []
    ).length;
    console.log(`tendril listener bench on node ${process.version}, ${new Date().toISOString()}`);
    console.log(`${ROUNDS} rounds; ${WORKERS} workers x ${CALLS} calls of () => 0 to one ssh context`);
    const ms = (value: number) => `${value.toFixed(3)} ms`;
    const describe = (times: number[]) => `median ${ms(median(times))}, p90 ${ms(quantile(times, 0.9))}`;
    row('direct, 8 loops in the master', ms(median(direct)), describe(direct));
    row('through the listener, 8 workers', ms(median(through)), describe(through));
    row(
      '  ratio (target <= 2x)',
      `${(median(through) / median(direct)).toFixed(2)}x`,
      `wall per round: ${ms(median(wall.direct))} direct, ${ms(median(wall.through))} through the listener`,
    );
    row('direct, one loop in the master', ms(median(directAlone)), describe(directAlone));
    row('through the listener, one worker', ms(median(throughAlone)), describe(throughAlone));
    row('  ratio', `${(median(throughAlone) / median(directAlone)).toFixed(2)}x`, 'one caller at a time');
    row('SSH connections accepted by sshd', String(connections), 'during the whole run, workers included');
  } finally {
    for (const child of workers) if (child.connected) child.send('exit');
    await Promise.all(
      workers.map(
        (child) => new Promise((resolve) => (child.exitCode !== null ? resolve(0) : child.on('exit', resolve))),
      ),
    );
    await router.shutdown();
    await bed.stop();
    rmSync(scratch, { recursive: true, force: true });
  }
}

const { positionals } = commandLine({
  script: 'node build/bench/listener.js',
  description: `Calls through the UNIX listener (npm run bench:listener): ${WORKERS} worker processes x ${CALLS}
calls to one ssh context shared through the master's pool, beside the master making
the same calls itself, against the suite's loopback sshd. Needs root (the test bed).`,
  arguments: [
    { name: 'worker', description: 'internal: run as one of the workers the bench forks', choices: ['worker'] },
    { name: 'socket', description: "internal: the worker's listener socket" },
    { name: 'target', description: "internal: the worker's target, as JSON" },
  ],
  environment: { LISTENER_ROUNDS: 'rounds (default 5)' },
});
if (positionals[0] === 'worker') await worker(positionals[1] as string, JSON.parse(positionals[2] as string));
else await master();
