// Part 1, memory: a producer sends 1 MiB values as fast as `await send()`
// lets it to a Receiver in the master that reads 20 values a second, first
// from a child, then from a grandchild (through that child). RSS of every
// process is sampled four times a second from /proc (never by a call, which
// would queue behind the saturated stream), so a short peak is not missed. Issue 9's bar: no process grows by
// 64 MiB or more. Without flow control the master grows at the speed of the
// pipe, so a run stops early once any process passes CAP.
import { type Context, Router } from 'tendril';
import { atAbort, drain, MIB, mib, produce, progress, rssOf, sleep, type Table, within } from './flow-shared.js';

const SECONDS = Number(process.env.FLOW_SECONDS ?? 30);
const READS_PER_SECOND = 20;
const CAP = 2048 * MIB;
const BAR = 64 * MIB;
const SAMPLE_MS = 250;

interface Watched {
  name: string;
  rss: () => number;
}

async function run(table: Table, grandchild: boolean): Promise<void> {
  const router = new Router();
  const forget = atAbort(() => router.shutdown());
  try {
    const child = await router.local({ name: 'flow-child' });
    const producer: Context = grandchild ? await router.local({ name: 'flow-grandchild', via: child }) : child;
    const watched: Watched[] = [
      { name: 'master', rss: () => process.memoryUsage.rss() },
      { name: `child (${grandchild ? 'forwarding' : 'producer'})`, rss: () => rssOf(child.info.pid) },
    ];
    if (grandchild) watched.push({ name: 'grandchild (producer)', rss: () => rssOf(producer.info.pid) });

    // Ship the producer once, so its start is not part of the curve.
    const warm = router.receiver<Buffer>({ contextId: producer.id });
    const warmCall = producer.call(produce, warm.toSender(), 2, 10_000, MIB);
    await drain(warm, () => {});
    await within(warmCall, 30_000, 'the first producer call');
    await sleep(500);

    const samples: number[][] = [];
    let capped = '';
    const sample = () => {
      const now = watched.map((w) => w.rss());
      samples.push(now);
      const over = now.findIndex((rss) => rss > CAP);
      if (over >= 0 && !capped) capped = `${watched[over]?.name} passed ${mib(CAP)}`;
    };
    sample();

    const receiver = router.receiver<Buffer>({ contextId: producer.id });
    const started = performance.now();
    const deadline = started + SECONDS * 1000;
    let producerError = '';
    const call = producer.call(produce, receiver.toSender(), Number.MAX_SAFE_INTEGER, SECONDS * 1000 + 5000, MIB);
    call.catch((error: Error) => {
      producerError ||= `failed at ${((performance.now() - started) / 1000).toFixed(1)} s: ${error.message}`;
    });
    const sampler = setInterval(sample, SAMPLE_MS);
    let read = 0;
    let readError = '';
    try {
      while (!capped && performance.now() < deadline) {
        // On a schedule, so a slow get() does not lower the rate.
        await sleep(started + (read + 1) * (1000 / READS_PER_SECOND) - performance.now());
        try {
          await receiver.get(Math.max(1, deadline - performance.now()));
          read++;
        } catch (error) {
          if ((error as Error).name !== 'TimeoutError') readError = (error as Error).message;
          break;
        }
      }
    } finally {
      clearInterval(sampler);
    }
    const elapsed = (performance.now() - started) / 1000;
    sample();

    const where = grandchild ? 'grandchild -> child -> master' : 'child -> master';
    table.heading(
      `memory, producer in a ${grandchild ? 'grandchild' : 'child'} (${where}), 1 MiB values, master reads ${READS_PER_SECOND}/s, RSS sampled every ${SAMPLE_MS} ms`,
    );
    const stops = [
      capped && `stopped early at ${elapsed.toFixed(1)} s: ${capped}`,
      readError && `the stream broke: ${readError}`,
      producerError && `producer call ${producerError}`,
    ].filter(Boolean);
    table.add(
      'run',
      `${elapsed.toFixed(1)} s`,
      `${read} values read (${(read / elapsed).toFixed(1)}/s)${stops.length ? `; ${stops.join('; ')}` : ''}`,
    );
    watched.forEach((w, i) => {
      const curve = samples.map((s) => s[i] as number).filter((rss) => !Number.isNaN(rss));
      const start = curve[0] ?? Number.NaN;
      const peak = Math.max(...curve);
      const end = curve[curve.length - 1] ?? Number.NaN;
      const growth = peak - start;
      table.add(
        `${w.name} RSS growth`,
        mib(growth),
        `start ${mib(start)}, peak ${mib(peak)}, end ${mib(end)} (${curve.length} samples); bar < ${mib(BAR)}: ${growth < BAR ? 'met' : 'NOT met'}`,
      );
    });
  } finally {
    await router.shutdown();
    forget();
  }
}

export async function benchMemory(table: Table): Promise<void> {
  progress(`memory: producer in a child, ${SECONDS} s`);
  await run(table, false);
  progress(`memory: producer in a grandchild, ${SECONDS} s`);
  await run(table, true);
}
