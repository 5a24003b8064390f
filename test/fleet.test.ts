// router.fleet(): outcomes in completion order, the concurrency bound, the
// per-target timeout, stopping (signal, break, stop()), failures naming
// their target, the summary with and without iterating, progress that adds
// up, and pooled contexts reused by a second fleet. Order is driven by
// gates the test opens, never by timing.
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import {
  CallError,
  ContextPool,
  type Fleet,
  FleetError,
  type FleetOutcome,
  type FleetProgress,
  InvalidOptionError,
  type PoolTarget,
  Router,
  TimeoutError,
} from 'tendril';
import { waitFor } from './support/procs.js';

const local = (name: string): PoolTarget => ({ method: 'local', name });
const locals = (count: number, prefix = 'fleet'): PoolTarget[] =>
  Array.from({ length: count }, (_, i) => local(`${prefix}-${i + 1}`));

/** A promise and its resolve, opened by the test. */
function gate<T = void>(): { promise: Promise<T>; open: (value: T) => void } {
  let open!: (value: T) => void;
  const promise = new Promise<T>((resolve) => {
    open = resolve;
  });
  return { promise, open };
}

/** Resolves when `signal` aborts, with its reason (how a function that honours its signal ends). */
const aborted = (signal: AbortSignal): Promise<unknown> =>
  new Promise((resolve) => signal.addEventListener('abort', () => resolve(signal.reason), { once: true }));

/** Every progress event of `fleet`, checked to add up as it comes. */
function recordProgress<T, Target>(fleet: Fleet<T, Target>): FleetProgress[] {
  const seen: FleetProgress[] = [];
  fleet.on('progress', (progress) => {
    const { total, done, succeeded, failed, running, waiting, skipped } = progress;
    assert.equal(succeeded + failed, done, JSON.stringify(progress));
    assert.equal(done + running + waiting + skipped, total, JSON.stringify(progress));
    assert.ok(running >= 0 && waiting >= 0, JSON.stringify(progress));
    seen.push(progress);
  });
  return seen;
}

describe('router.fleet', { timeout: 180_000 }, () => {
  let router: Router;

  before(() => {
    router = new Router();
  });
  after(() => router.shutdown());

  test('yields outcomes in the order they complete, each naming its target', async () => {
    const targets = locals(5, 'order');
    const gates = targets.map(() => gate());
    const fleet = router.fleet(
      targets,
      async (context, _target, { index }) => {
        await gates[index]?.promise;
        return context.call((i: number) => i * 10, index);
      },
      { concurrency: 5 },
    );
    const release = [2, 0, 4, 1, 3];
    gates[release[0] as number]?.open();
    const seen: number[] = [];
    for await (const outcome of fleet) {
      assert.ok(outcome.ok);
      assert.equal(outcome.value, outcome.index * 10);
      assert.equal(outcome.label, `order-${outcome.index + 1}`);
      assert.equal(outcome.target, targets[outcome.index]);
      seen.push(outcome.index);
      gates[release[seen.length] as number]?.open();
    }
    assert.deepEqual(seen, release);
    const summary = await fleet.summary();
    assert.equal(summary.succeeded.length, 5);
    assert.deepEqual(
      summary.succeeded.map((s) => s.label),
      targets.map((t) => t.name),
      'the summary lists targets in the order given',
    );
  });

  test('runs at most `concurrency` targets at once', async () => {
    let running = 0;
    let highest = 0;
    const full = gate();
    const fleet = router.fleet(
      locals(11, 'bound'),
      async (context) => {
        running++;
        highest = Math.max(highest, running);
        if (running === 3) full.open();
        await full.promise;
        const pid = await context.call(() => process.pid);
        running--;
        return pid;
      },
      { concurrency: 3 },
    );
    const progress = recordProgress(fleet);
    const summary = await fleet.summary();
    assert.equal(summary.succeeded.length, 11, summary.format());
    assert.equal(highest, 3);
    assert.equal(Math.max(...progress.map((p) => p.running)), 3);
  });

  test('a target past its timeout fails with a TimeoutError naming it; the others go on', async () => {
    const fleet = router.fleet(
      [local('slow-remote'), local('ignores-signal'), local('quick')],
      async (context, _target, { label, signal }) => {
        if (label === 'slow-remote') {
          // Honours its signal: the call's wait ends with it.
          return context.callWith({ signal }, () => new Promise(() => {}));
        }
        if (label === 'ignores-signal') return new Promise(() => {}); // never settles, ignores its signal
        return 'done';
      },
      { timeout: 2_000 },
    );
    const summary = await fleet.summary();
    assert.deepEqual(
      summary.succeeded.map((s) => s.label),
      ['quick'],
    );
    assert.deepEqual(
      summary.failed.map((f) => f.label),
      ['slow-remote', 'ignores-signal'],
    );
    for (const { error, label } of summary.failed) {
      assert.ok(error instanceof FleetError);
      assert.equal(error.label, label);
      assert.ok(error.cause instanceof TimeoutError, String(error.cause));
      assert.match(error.message, new RegExp(`^${label}: connecting and running .* timed out after 2000 ms`));
    }
    assert.match(summary.format(), /^3 targets in .*: 1 succeeded, 2 failed\n/);
  });

  test('the timeout covers connecting', async () => {
    // A context that never starts: its "Node" sleeps; the start gives up at its own connectTimeout.
    const slow: PoolTarget = {
      method: 'local',
      name: 'slow-start',
      nodePath: ['sh', '-c', 'exec sleep 60', 'sh'],
      connectTimeout: 3_000,
    };
    const fleet = router.fleet([slow], () => 'unreachable', { timeout: 200 });
    const [outcome] = await collect(fleet);
    assert.ok(outcome && !outcome.ok);
    assert.ok(outcome.error.cause instanceof TimeoutError, String(outcome.error.cause));
    assert.match(outcome.error.message, /^slow-start: /);
  });

  test('aborting the signal stops new targets and aborts running ones', async () => {
    const controller = new AbortController();
    const started: string[] = [];
    const twoRunning = gate();
    const fleet = router.fleet(
      locals(6, 'abort'),
      async (_context, _target, { signal, label }) => {
        started.push(label);
        if (started.length === 2) twoRunning.open();
        throw await aborted(signal);
      },
      { concurrency: 2, signal: controller.signal },
    );
    const progress = recordProgress(fleet);
    await twoRunning.promise;
    const reason = new Error('operator pressed stop');
    controller.abort(reason);
    const summary = await fleet.summary();
    assert.deepEqual(started.sort(), ['abort-1', 'abort-2']); // in the order they connected
    assert.equal(summary.failed.length, 2);
    for (const { error } of summary.failed) {
      assert.equal(error.cause, reason);
      assert.match(error.message, /^abort-\d: stopped: operator pressed stop$/);
    }
    assert.deepEqual(
      summary.skipped.map((s) => s.label),
      ['abort-3', 'abort-4', 'abort-5', 'abort-6'],
    );
    assert.match(
      summary.format(),
      /2 failed, 4 skipped[\s\S]*skipped \(the fleet was stopped first\): abort-3, abort-4/,
    );
    const last = progress[progress.length - 1];
    assert.deepEqual(last, { total: 6, done: 2, succeeded: 0, failed: 2, running: 0, waiting: 0, skipped: 4 });
  });

  test('a signal aborted before the start skips every target', async () => {
    let calls = 0;
    const fleet = router.fleet(
      locals(3, 'never'),
      () => {
        calls++;
      },
      { signal: AbortSignal.abort() },
    );
    const summary = await fleet.summary();
    assert.equal(calls, 0);
    assert.equal(summary.skipped.length, 3);
    assert.deepEqual(await collect(fleet), []);
  });

  test('a function that throws, synchronously or remotely, fails its target alone', async () => {
    const fleet = router.fleet(locals(4, 'throws'), (context, _target, { index }) => {
      if (index === 0) throw new RangeError('bad input');
      if (index === 1) return Promise.reject('a string, not an Error');
      if (index === 2)
        return context.call(() => {
          throw new Error('remote failure');
        });
      return context.call(() => 'fine');
    });
    const summary = await fleet.summary();
    assert.deepEqual(
      summary.succeeded.map((s) => s.label),
      ['throws-4'],
    );
    const [first, second, third] = summary.failed;
    assert.ok(first?.error.cause instanceof RangeError);
    assert.equal(first.error.message, 'throws-1: bad input');
    assert.equal(second?.error.cause, 'a string, not an Error');
    assert.equal(second?.error.message, 'throws-2: a string, not an Error');
    assert.ok(third?.error.cause instanceof CallError);
    assert.match(third.error.message, /^throws-3: Error: remote failure \(raised in context 'throws-3'/);
    assert.equal(third.error.code, 'ERR_TENDRIL_FLEET');
  });

  test('a target that cannot connect fails with the connection error, named', async () => {
    const fleet = router.fleet(
      [{ method: 'local', name: 'no-node', nodePath: '/nonexistent/node', nodeCandidates: [] }, local('fine')],
      (context) => context.name,
    );
    const summary = await fleet.summary();
    assert.deepEqual(
      summary.succeeded.map((s) => s.label),
      ['fine'],
    );
    const failure = summary.failed[0];
    assert.ok(failure);
    assert.match(failure.error.message, /^no-node: /);
    assert.ok(failure.error.cause instanceof Error && failure.error.cause.name !== 'FleetError');
  });

  test('breaking out of the loop stops the fleet; nothing is left running', async () => {
    let running = 0;
    let started = 0;
    const fleet = router.fleet(
      locals(8, 'break'),
      async (_context, _target, { signal, index }) => {
        started++;
        running++;
        try {
          if (index === 0) return 'first';
          await aborted(signal);
          throw signal.reason;
        } finally {
          running--;
        }
      },
      { concurrency: 3 },
    );
    for await (const outcome of fleet) {
      assert.equal(outcome.label, 'break-1');
      await waitFor(() => running >= 2, 30_000); // more started in the meantime
      break;
    }
    // The loop's end waited for the running targets to stop.
    assert.equal(running, 0);
    const summary = await fleet.summary();
    assert.equal(summary.succeeded.length, 1);
    assert.equal(summary.failed.length + summary.skipped.length, 7);
    assert.ok(summary.failed.length >= started - 1 && summary.skipped.length > 0, summary.format());
    for (const { error } of summary.failed) assert.match(error.message, /stopped: the loop over the fleet's outcomes/);
  });

  test('stop() stops it and resolves once nothing runs', async () => {
    const fleet = router.fleet(locals(4, 'stop'), (_context, _target, { signal }) => aborted(signal), {
      concurrency: 1,
    });
    await waitFor(() => fleet.progress.running === 1, 30_000);
    await fleet.stop();
    assert.equal(fleet.progress.running, 0);
    const summary = await fleet.summary();
    assert.equal(summary.failed.length, 1);
    assert.match(summary.failed[0]?.error.message ?? '', /^stop-1: stopped: fleet.stop\(\) was called$/);
    assert.equal(summary.skipped.length, 3);
  });

  test('the summary comes with or without iterating; a late loop sees every outcome', async () => {
    const targets = locals(5, 'summary');
    const fleet = router.fleet(targets, (context) => context.id);
    const summary = await fleet.summary();
    assert.equal(summary.total, 5);
    assert.ok(summary.ok);
    assert.equal(summary.succeeded.length, 5);
    assert.match(summary.format(), /^5 targets in \d+(\.\d+)? m?s: 5 succeeded, 0 failed\ntime per target: median/);
    assert.equal(String(summary), summary.format());
    const outcomes = await collect(fleet);
    assert.equal(outcomes.length, 5);
    assert.deepEqual(outcomes.map((o) => o.label).sort(), targets.map((t) => t.name).sort());
  });

  test("the summary gives each target's value, label and index; format() shows values when asked", async () => {
    const targets = [local('values-1'), local('values-2'), local('values-3'), local('values-4')];
    const fleet = router.fleet(
      targets,
      async (context, _target, { index }) => {
        if (index === 1) throw new Error('no value here');
        return { name: context.name, index, list: [1, 2, 3] };
      },
      { concurrency: 1 },
    );
    // Stopped once the third has its outcome, before the fourth starts: it is skipped.
    fleet.on('outcome', ({ index }) => {
      if (index === 2) void fleet.stop();
    });
    const summary = await fleet.summary();
    assert.deepEqual(
      summary.succeeded.map(({ label, index, value }) => ({ label, index, value })),
      [
        { label: 'values-1', index: 0, value: { name: 'values-1', index: 0, list: [1, 2, 3] } },
        { label: 'values-3', index: 2, value: { name: 'values-3', index: 2, list: [1, 2, 3] } },
      ],
    );
    // The value has the function's type.
    const first: { name: string; index: number } | undefined = summary.succeeded[0]?.value;
    assert.equal(first?.name, 'values-1');
    assert.deepEqual(
      summary.failed.map(({ label, index, error }) => [
        label,
        index,
        error.cause instanceof Error && error.cause.message,
      ]),
      [['values-2', 1, 'no value here']],
    );
    assert.deepEqual(
      summary.skipped.map(({ label, index, target }) => [label, index, target]),
      [['values-4', 3, targets[3]]],
    );
    // By default the report names no values; with values: true, one line each, before the failures.
    assert.doesNotMatch(summary.format(), /succeeded:/);
    const report = summary.format({ values: true });
    assert.match(
      report,
      /\nsucceeded:\n {2}values-1: \{ name: 'values-1', index: 0, list: \[ 1, 2, 3 \] \}\n {2}values-3: .*\nfailed:\n {2}values-2: /,
    );
    assert.match(
      summary.format({ values: (value, { label }) => `${label}=${value.index}`, limit: 1 }),
      /\nsucceeded:\n {2}values-1: values-1=0\n {2}\.\.\.and 1 more \(summary\.succeeded\)\n/,
    );
    assert.throws(() => summary.format({ value: true } as never), InvalidOptionError);
    assert.throws(() => summary.format({ values: 'yes' as never }), InvalidOptionError);
    assert.throws(() => summary.format({ limit: -1 }), InvalidOptionError);
  });

  test('progress events add up and end at the total', async () => {
    const fleet = router.fleet(locals(9, 'progress'), (context, _target, { index }) =>
      index % 3 === 0 ? Promise.reject(new Error('every third')) : context.call(() => 1),
    );
    const progress = recordProgress(fleet);
    const outcomes: FleetOutcome<number>[] = [];
    fleet.on('outcome', (outcome) => outcomes.push(outcome));
    await fleet.summary();
    assert.equal(outcomes.length, 9);
    // One event per start, one per outcome.
    assert.equal(progress.length, 18);
    assert.deepEqual(progress[progress.length - 1], {
      total: 9,
      done: 9,
      succeeded: 6,
      failed: 3,
      running: 0,
      waiting: 0,
      skipped: 0,
    });
    assert.deepEqual(fleet.progress, progress[progress.length - 1]);
  });

  test('a listener that throws stops the fleet, and the summary rejects with what it threw', async () => {
    const fleet = router.fleet(locals(4, 'listener'), (context) => context.id, { concurrency: 1 });
    const bug = new Error('bug in a progress display');
    fleet.on('outcome', () => {
      throw bug;
    });
    await assert.rejects(fleet.summary(), (error) => error === bug);
    await assert.rejects(collect(fleet), (error) => error === bug);
    assert.equal(fleet.progress.skipped, 3);
  });

  test('a second fleet over the same targets reuses the pooled contexts', async () => {
    const pool = new ContextPool(router);
    const targets = locals(4, 'reuse');
    const first = await collect(router.fleet(targets, (context) => context.id, { pool }));
    assert.deepEqual(pool.stats(), { contexts: 4, idle: 4, connecting: 0, waiting: 0, hits: 0, misses: 4 });
    const second = await collect(router.fleet(targets, (context) => context.id, { pool }));
    const ids = (outcomes: FleetOutcome<number>[]) =>
      outcomes.map((o) => (o.ok ? `${o.label}=${o.value}` : o.error.message)).sort();
    assert.deepEqual(ids(second), ids(first));
    assert.deepEqual(pool.stats(), { contexts: 4, idle: 4, connecting: 0, waiting: 0, hits: 4, misses: 4 });
    await pool.close();
  });

  test('close: true gives each target a context of its own and closes it', async () => {
    const pool = new ContextPool(router);
    const gone = new Set<number>();
    router.on('disconnect', (id) => gone.add(id));
    const outcomes = await collect(router.fleet(locals(3, 'closed'), (context) => context.id, { pool, close: true }));
    const ids = outcomes.map((o) => (o.ok ? o.value : -1));
    await waitFor(() => ids.every((id) => gone.has(id)), 30_000);
    assert.equal(pool.stats().contexts, 0);
    await pool.close();
  });

  test('contexts the program holds are used as they are, named by their name, and left open', async () => {
    const held = await router.local({ name: 'held' });
    const fleet = router.fleet([held, local('pooled')], (context) => context.call(() => process.pid));
    const summary = await fleet.summary();
    assert.deepEqual(summary.succeeded.map((s) => s.label).sort(), ['held', 'pooled']);
    assert.equal(await held.call(() => process.pid), held.info.pid);
    await held.shutdown();
  });

  test('labels: name, else the method, user, host and port, and the via', () => {
    const fleet = router.fleet(
      [
        { method: 'sudo', username: 'deploy', via: { method: 'ssh', hostname: 'Web1', username: 'ops' } },
        { method: 'sudo', name: 'root-on-web2', via: { method: 'ssh', hostname: 'web2', name: 'web2' } },
      ],
      () => 0,
    );
    void fleet.stop();
    return fleet.summary().then((summary) => {
      assert.deepEqual(
        summary.skipped.map((s) => s.label),
        ['sudo:deploy via ssh:ops@web1', 'root-on-web2 via web2'],
      );
    });
  });

  test('a malformed target, function or option throws before anything starts', () => {
    const invalid = (fn: () => unknown, pattern: RegExp) =>
      assert.throws(fn, (error) => error instanceof InvalidOptionError && pattern.test(error.message));
    invalid(() => router.fleet([local('a'), { method: 'telnet' } as never], () => 0), /method.*targets\[1\]/);
    invalid(() => router.fleet([{ method: 'ssh', via: local('x') } as never], () => 0), /hostname.*targets\[0\]/);
    invalid(() => router.fleet(42 as never, () => 0), /targets/);
    invalid(() => router.fleet([], 'not a function' as never), /fn/);
    invalid(() => router.fleet([], () => 0, { concurrency: 0 }), /concurrency/);
    invalid(() => router.fleet([], () => 0, { timeout: -1 }), /timeout/);
    invalid(() => router.fleet([], () => 0, { pool: {} as never }), /pool/);
  });

  test('an empty fleet ends at once', async () => {
    const summary = await router.fleet([], () => 0).summary();
    assert.equal(summary.total, 0);
    assert.equal(summary.format(), '0 targets in 0 ms: 0 succeeded, 0 failed');
  });
});

/** Every outcome of a fleet, by iterating it. */
async function collect<T, Target>(fleet: Fleet<T, Target>): Promise<FleetOutcome<T, Target>[]> {
  const outcomes: FleetOutcome<T, Target>[] = [];
  for await (const outcome of fleet) outcomes.push(outcome);
  return outcomes;
}
