// Part 4, fairness: context A streams 1 MiB values to the master as fast as
// it can (the master reads them as fast as it can) while the master times
// empty calls to context B; in alternating rounds, the same calls with A
// idle. Issue 9's target: B's round trip under A's load within 2x of idle.
import { Router } from 'tendril';
import {
  atAbort,
  drain,
  MIB,
  mbps,
  mean,
  median,
  micros,
  produce,
  progress,
  quantile,
  sleep,
  type Table,
  within,
} from './flow-shared.js';

const ROUNDS = Number(process.env.FLOW_ROUNDS ?? 5);
/** Milliseconds of calls per phase. */
const WINDOW = 2000;
/** Milliseconds the stream runs before the busy phase's calls start, so it is saturated. */
const LEAD = 300;

type Local = Awaited<ReturnType<Router['local']>>;

/** Empty calls to `context`, one after another, for `window` ms: each one's round trip in ms. */
async function timeCalls(context: Local, window: number): Promise<number[]> {
  const times: number[] = [];
  const until = performance.now() + window;
  while (performance.now() < until) {
    const started = performance.now();
    await context.call(() => null);
    times.push(performance.now() - started);
  }
  return times;
}

export async function benchFairness(table: Table): Promise<void> {
  const router = new Router();
  const forget = atAbort(() => router.shutdown());
  const idle: number[] = [];
  const busy: number[] = [];
  const rates: number[] = [];
  const problems: string[] = [];
  const broken: number[] = [];
  let brokeWith = '';
  try {
    const startA = async (): Promise<Local> => {
      const a = await router.local({ name: 'flow-a' });
      // Ship the producer once, so the first busy round does not wait for it.
      const warm = router.receiver<Buffer>({ contextId: a.id });
      const warmCall = a.call(produce, warm.toSender(), 4, 10_000, MIB);
      await drain(warm, () => {});
      await within(warmCall, 30_000, 'the first producer call');
      return a;
    };
    let a = await startA();
    const b = await router.local({ name: 'flow-b' });
    await timeCalls(b, 500);

    for (let round = 0; round < ROUNDS; round++) {
      progress(`fairness round ${round + 1}/${ROUNDS}: idle`);
      idle.push(...(await timeCalls(b, WINDOW)));

      progress(`fairness round ${round + 1}/${ROUNDS}: A streaming`);
      const receiver = router.receiver<Buffer>({ contextId: a.id });
      const started = performance.now();
      // Runs past the busy window, so the stream is saturated throughout it.
      const streamMs = LEAD + WINDOW + 1000;
      const call = a.call(produce, receiver.toSender(), Number.MAX_SAFE_INTEGER, streamMs, MIB);
      call.catch(() => {});
      let values = 0;
      let ended = 0;
      const drained = drain(receiver, () => values++).then(() => {
        ended = performance.now();
      });
      drained.catch(() => {});
      await sleep(LEAD);
      const from = values;
      const windowStart = performance.now();
      busy.push(...(await timeCalls(b, WINDOW)));
      const windowMs = performance.now() - windowStart;
      rates.push(((values - from) * MIB) / 1e6 / (windowMs / 1000));
      try {
        await drained;
        await within(call, 30_000, "A's producer call");
      } catch (error) {
        broken.push(round + 1);
        brokeWith ||= (error as Error).message;
        await a.shutdown();
        a = await startA();
        continue;
      }
      if (ended - started < LEAD + windowMs)
        problems.push(`round ${round + 1}: A's stream ended before the window did`);
    }
  } finally {
    await router.shutdown();
    forget();
  }

  table.heading(
    `fairness: empty calls to B while A streams 1 MiB values to the master; ${ROUNDS} alternating rounds of ${WINDOW} ms`,
  );
  // The median hides a tail: the mean and the 99th percentile say how slow the slow calls got.
  const spread = (times: number[]) =>
    `mean ${micros(mean(times))}, p99 ${micros(quantile(times, 0.99))}, ${times.length} calls`;
  table.add('B round trip, A idle (median)', micros(median(idle)), spread(idle));
  table.add(
    'B round trip, A streaming (median)',
    micros(median(busy)),
    `${spread(busy)}; A's stream meanwhile: ${rates.map(mbps).join(', ')}`,
  );
  if (broken.length > 0) {
    problems.push(
      `A's stream broke in round ${broken.join(', ')} (${brokeWith})${broken.length === ROUNDS ? ', so this is not a figure under load' : ''}`,
    );
  }
  const ratio = median(busy) / median(idle);
  const means = mean(busy) / mean(idle);
  const tails = quantile(busy, 0.99) / quantile(idle, 0.99);
  table.add(
    'busy/idle (medians)',
    `${ratio.toFixed(2)}x`,
    `target <= 2x; means ${means.toFixed(2)}x, p99 ${tails.toFixed(2)}x${problems.length ? `; ${problems.join('; ')}` : ''}`,
  );
}
