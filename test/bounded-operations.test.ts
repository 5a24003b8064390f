// Every operation a caller can bound settles within its bound against a
// context that never answers: a real child frozen with SIGSTOP (it reads
// nothing, answers nothing, and its stream stays open), or an intermediate
// that swallows the request. The job operations, jobs(), tmpdir() and
// moduleStats() here; calls, service calls, starts, the pool, fleets and
// receivers in cancellation.test.ts; commands and transfers beside their
// other tests. And a shutdown settles whatever its intermediate does.
import assert from 'node:assert/strict';
import { existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import {
  Channel,
  ChannelError,
  type Context,
  ContextDisconnectedError,
  type Job,
  Router,
  type Sender,
  TimeoutError,
} from 'tendril';
import { STOP_CHILD } from '#dist/internal.js';
import { silence } from './support/hostile.js';
import { settlement as settledFor, sleep } from './support/procs.js';

/** Far longer than any bound under test: an operation still pending then never settles. */
const HANG = 20_000;
/** What an operation given a 300 ms timeout may take in all: the bound, and the scheduling of a loaded machine. */
const PROMPT = 2000;

/** How `operation` settled, and after how many ms (`'pending'` after HANG ms: it never would have). */
function settlement(operation: Promise<unknown>): ReturnType<typeof settledFor> {
  return settledFor(operation, HANG);
}

/** Runs `check` with `context`'s process stopped (SIGSTOP), and continues it whatever happens. */
async function frozen(context: Context, check: () => Promise<void>): Promise<void> {
  process.kill(context.info.pid, 'SIGSTOP');
  try {
    await check();
  } finally {
    process.kill(context.info.pid, 'SIGCONT');
  }
}

const never = () => new Promise<never>(() => undefined);

describe('operations on a context that never answers settle within their bound', { timeout: 180_000 }, () => {
  let router: Router;
  const stateHome = mkdtempSync(join(tmpdir(), 'tendril-bounded-'));
  const env = { ...process.env, XDG_STATE_HOME: stateHome };

  before(() => {
    router = new Router();
  });
  after(async () => {
    await router.shutdown();
    rmSync(stateHome, { recursive: true, force: true });
  });

  test('every job operation, jobs(), tmpdir() and moduleStats() of a frozen context end at their timeout', async () => {
    const context = await router.local({ name: 'frozen-jobs', env });
    let running: Job | undefined;
    try {
      running = await context.startJob(
        { timeout: 60_000 },
        () => new Promise((resolve) => setTimeout(resolve, 30_000)),
      );
      const job = running;
      const done = await context.startJob({ timeout: 60_000 }, () => 'done');
      await done.result();
      const marker = join(stateHome, 'the-stopped-start-ran');
      await frozen(context, async () => {
        const operations: [string, () => Promise<unknown>][] = [
          ['job.status()', () => job.status({ timeout: 300 })],
          ['job.result()', () => job.result({ timeout: 300 })],
          ['job.cancel()', () => job.cancel({ timeout: 300 })],
          ['job.remove()', () => done.remove({ timeout: 300 })],
          [
            'job.output()',
            async () => {
              for await (const _ of job.output({ timeout: 300 })) {
                // Nothing comes from a frozen context.
              }
            },
          ],
          ['context.jobs()', () => context.jobs({ timeout: 300 })],
          ['context.tmpdir()', () => context.tmpdir({ timeout: 300 })],
          ['context.moduleStats()', () => context.moduleStats({ timeout: 300 })],
        ];
        for (const [name, operation] of operations) {
          const settled = await settlement(operation());
          assert.equal(settled.outcome, 'rejected', `${name} ${settled.outcome} after ${settled.ms} ms`);
          assert.ok(settled.error instanceof TimeoutError, `${name}: ${settled.error}`);
          assert.equal(settled.error.contextName, 'frozen-jobs');
          assert.equal(settled.error.timeoutMs, 300);
          // result() used to wait 10 s more for the context's answer to travel.
          assert.ok(settled.ms < PROMPT, `${name} settled ${settled.ms} ms after its 300 ms timeout began`);
        }
        // A signal ends each wait the same way, with its reason.
        const controller = new AbortController();
        setTimeout(() => controller.abort(), 100);
        const aborted = await settlement(job.status({ signal: controller.signal }));
        assert.equal((aborted.error as Error).name, 'AbortError', String(aborted.error));
        assert.ok(aborted.ms < PROMPT, `${aborted.ms} ms`);
        const start = await settlement(
          context.startJob(
            { timeout: 60_000, signal: AbortSignal.timeout(300) },
            (path: string) => require('node:fs').writeFileSync(path, 'ran'),
            marker,
          ),
        );
        assert.equal((start.error as Error).name, 'TimeoutError', String(start.error));
        assert.ok(start.ms < PROMPT, `startJob settled after ${start.ms} ms`);
      });
      // Woken, the context reads the start and its stop together: the job it had not started never runs.
      assert.equal(await context.call(() => 'awake'), 'awake');
      await sleep(1500);
      assert.equal(existsSync(marker), false, 'the job whose start was stopped ran');
      // The timeouts ended the waits: the cancel and the removal that had reached the context were done.
      await assert.rejects(job.result({ timeout: 10_000 }), { code: 'ERR_TENDRIL_JOB_CANCELLED' });
      await assert.rejects(done.status(), { code: 'ERR_TENDRIL_JOB_NOT_FOUND' });
    } finally {
      await running?.cancel().catch(() => undefined);
      await context.shutdown();
    }
  });

  test('copy(), fetch(), the file streams and exec() of a frozen context end at their timeout or signal', async () => {
    const context = await router.local({ name: 'frozen-files' });
    const scratch = mkdtempSync(join(tmpdir(), 'tendril-bounded-files-'));
    try {
      const local = join(scratch, 'data');
      writeFileSync(local, 'data');
      // Warmed up: the toolkit is loaded before the freeze.
      await context.copy(local, join(scratch, 'warm'));
      await frozen(context, async () => {
        // A stop waits STOP_GRACE (2 s) for the context to say it removed its temporary file.
        const stopped = 300 + 2000 + PROMPT;
        const timed: [string, () => Promise<unknown>][] = [
          ['context.copy()', () => context.copy(local, join(scratch, 'copied'), { timeout: 300 })],
          ['context.fetch()', () => context.fetch(join(scratch, 'warm'), join(scratch, 'fetched'), { timeout: 300 })],
        ];
        for (const [name, operation] of timed) {
          const settled = await settlement(operation());
          assert.equal(settled.outcome, 'rejected', `${name} ${settled.outcome} after ${settled.ms} ms`);
          assert.ok(settled.error instanceof TimeoutError, `${name}: ${settled.error}`);
          assert.ok(settled.ms < stopped, `${name} settled after ${settled.ms} ms`);
        }
        // A command's stop waits for the kill (forceKillAfterDelay, here 0) and then 5 s for the context's word.
        const command = await settlement(context.exec('true', [], { timeout: 300, forceKillAfterDelay: 0 }));
        const failed = command.error as { result?: { timedOut: boolean } };
        assert.equal(failed.result?.timedOut, true, String(command.error));
        assert.ok(command.ms < 300 + 5000 + PROMPT, `exec settled after ${command.ms} ms`);
        const reading = context.createReadStream(join(scratch, 'warm'), { signal: AbortSignal.timeout(300) });
        const read = await settlement(
          new Promise((resolve, reject) => reading.on('data', resolve).on('error', reject).on('end', resolve)),
        );
        assert.equal((read.error as Error).name, 'AbortError', String(read.error));
        assert.ok(read.ms < stopped, `the read stream failed after ${read.ms} ms`);
        const writing = context.createWriteStream(join(scratch, 'streamed'), { signal: AbortSignal.timeout(300) });
        writing.write('some');
        const written = await settlement(
          new Promise((resolve, reject) => writing.on('error', reject).on('finish', resolve).end()),
        );
        assert.equal((written.error as Error).name, 'AbortError', String(written.error));
        assert.ok(written.ms < stopped, `the write stream failed after ${written.ms} ms`);
      });
      assert.equal(existsSync(join(scratch, 'streamed')), false, 'a destroyed write stream leaves nothing');
    } finally {
      await context.shutdown();
      rmSync(scratch, { recursive: true, force: true });
    }
  });

  test("a Sender's and a Channel's sends into a frozen context end at their timeout or signal; the Sender gives the receiver up", async () => {
    const context = await router.local({ name: 'frozen-receiver' });
    try {
      // A receiver in the context, whose Sender the master holds: a window of 4 values, none read.
      const sender = (await context.call(() => {
        const core = require('tendril:core') as {
          contextRuntime(): { router: unknown };
          Receiver: new (router: unknown, options: object) => { toSender(): unknown };
        };
        const receiver = new core.Receiver(core.contextRuntime().router, { highWaterMark: { messages: 4 } });
        (globalThis as { held?: unknown }).held = receiver;
        return receiver.toSender();
      })) as Sender<number>;
      const channel = new Channel<number, number>(router);
      // The other end, in the context, neither reads nor sends until released: the channel's sends wait for it.
      const ending = context.call(
        (end: Channel<number, number>) =>
          new Promise<void>((resolve) => {
            (globalThis as { release?: () => void }).release = resolve;
            void end;
          }),
        channel.otherEnd(),
      );
      for (let i = 0; i < 4; i++) await sender.send(i);
      await frozen(context, async () => {
        const timed = await settlement(sender.send(4, { timeout: 300 }));
        assert.ok(timed.error instanceof TimeoutError, `sender.send(): ${timed.outcome} ${timed.error}`);
        assert.ok(timed.ms < PROMPT, `sender.send() settled after ${timed.ms} ms`);
        await assert.rejects(sender.send(5), ChannelError, 'the Sender gave the receiver up');
        const aborted = await settlement(channel.send(1, { signal: AbortSignal.timeout(300) }));
        // AbortSignal.timeout's reason: a DOMException named TimeoutError.
        assert.equal((aborted.error as Error)?.name, 'TimeoutError', `channel.send(): ${aborted.error}`);
        await assert.rejects(channel.send(2), ChannelError, 'this end gave up sending');
        assert.ok(aborted.ms < PROMPT, `channel.send() settled after ${aborted.ms} ms`);
      });
      await context.call(() => (globalThis as { release?: () => void }).release?.());
      await ending;
    } finally {
      await context.shutdown();
    }
  });

  test('bad options are refused before anything is sent', async () => {
    const context = await router.local({ name: 'options' });
    try {
      const job = context.job('0123456789abcdef01234567');
      await assert.rejects(job.status({ timeout: -1 }), { name: 'InvalidOptionError' });
      await assert.rejects(job.cancel({ signal: 'soon' as never }), { name: 'InvalidOptionError' });
      await assert.rejects(context.jobs({ wait: 1 } as never), { name: 'InvalidOptionError' });
      await assert.rejects(context.tmpdir({ timeout: 'long' as never }), { name: 'InvalidOptionError' });
      await assert.rejects(context.moduleStats({ timeout: Number.NaN }), { name: 'InvalidOptionError' });
      await assert.rejects(
        context.startJob({ timeout: 1000, signal: {} as never }, () => 1),
        {
          name: 'InvalidOptionError',
        },
      );
      await assert.rejects(context.copy('/etc/hostname', '/tmp/x', { timeout: -5 }), { name: 'InvalidOptionError' });
      assert.throws(() => context.createReadStream('/etc/hostname', { signal: 1 as never }), {
        name: 'InvalidOptionError',
      });
    } finally {
      await context.shutdown();
    }
  });

  test('shutdown({ grace }) settles when the intermediate swallows STOP_CHILD; the context is then gone', async () => {
    const via = await router.local({ name: 'swallowing-via' });
    try {
      const child = await router.local({ via, name: 'behind-a-liar' });
      await silence(via, STOP_CHILD);
      const pending = child.call(never);
      pending.catch(() => undefined);
      const shut = await settlement(child.shutdown({ grace: 200 }));
      assert.equal(shut.outcome, 'resolved', `shutdown ${shut.outcome} after ${shut.ms} ms`);
      // Twice the grace and the 5 s margin.
      assert.ok(shut.ms < 2 * 200 + 5000 + PROMPT, `${shut.ms} ms`);
      const call = await settlement(pending);
      assert.ok(call.error instanceof ContextDisconnectedError, String(call.error));
      assert.match(call.error.message, /did not say it had stopped within 5400 ms/);
      const next = await settlement(child.call(() => 'reached'));
      assert.ok(next.error instanceof ContextDisconnectedError, String(next.error));
      assert.equal(await via.call(() => 'the intermediate is fine'), 'the intermediate is fine');
    } finally {
      // The intermediate's own shutdown (asked of the master) stops what it still runs.
      await via.shutdown();
    }
  });

  test('shutdown() settles when the intermediate is frozen, and the context is gone', async () => {
    const via = await router.local({ name: 'frozen-via' });
    try {
      const child = await router.local({ via, name: 'behind-a-frozen' });
      await frozen(via, async () => {
        const shut = await settlement(child.shutdown({ grace: 100 }));
        assert.equal(shut.outcome, 'resolved', `shutdown ${shut.outcome} after ${shut.ms} ms`);
        assert.ok(shut.ms < 2 * 100 + 5000 + PROMPT, `${shut.ms} ms`);
        const next = await settlement(child.call(() => 'reached'));
        assert.ok(next.error instanceof ContextDisconnectedError, String(next.error));
      });
    } finally {
      await via.shutdown();
    }
  });
});
