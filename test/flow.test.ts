import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import {
  CallError,
  Channel,
  ChannelError,
  type Context,
  Router,
  type RouterWarning,
  Select,
  type Sender,
  TimeoutError,
} from 'tendril';
import { Receiver } from '#dist/internal.js';
import { switchOf } from './support/internals.js';
import { waitFor } from './support/procs.js';

type Core = typeof import('#dist/core/index.js');

/** Shipped: sends `count` values of `size` bytes, each awaited, and returns how many were sent. */
async function produce(out: Sender<Buffer>, count: number, size: number): Promise<number> {
  for (let i = 0; i < count; i++) {
    const value = Buffer.alloc(size, i % 256);
    await out.send(value);
  }
  return count;
}

/** Shipped to a context: sends 0, 1, 2... to `out` until a send rejects, and says how many went and why it stopped. */
async function sendUntilRefused(out: Sender<number>): Promise<string> {
  let sent = 0;
  try {
    for (;;) {
      await out.send(sent);
      sent++;
    }
  } catch (error) {
    return `${sent} sent, then ${(error as Error).name}: ${(error as Error).message}`;
  }
}

describe('flow control', { timeout: 120_000 }, () => {
  let router: Router;
  let child: Context;
  const warnings: RouterWarning[] = [];
  before(async () => {
    router = new Router();
    router.on('warning', (warning) => warnings.push(warning));
    child = await router.local({ name: 'producer' });
  });
  after(() => router.shutdown());

  /** Reads every value, checking each is the `i`-th a `produce` sent. */
  async function drain(receiver: Receiver<Buffer>, size: number): Promise<number> {
    let n = 0;
    for await (const value of receiver) {
      assert.equal(value.length, size);
      assert.equal(value[0], n % 256, `value ${n} arrives in order`);
      n++;
    }
    return n;
  }

  for (const where of ['a child', 'a grandchild'] as const) {
    test(`a producer in ${where} waits for a slow reader: the receiver never holds more than its window`, async () => {
      const producer = where === 'a child' ? child : await router.local({ name: 'grand-producer', via: child });
      const receiver = new Receiver<Buffer>(router, { highWaterMark: { messages: 1000, bytes: 1024 * 1024 } });
      const done = producer.call(produce, receiver.toSender(), 40, 250_000);
      await waitFor(() => receiver.queued === 4, 10_000);
      // Nothing more comes while nobody reads: the producer is waiting.
      await sleep(300);
      assert.equal(receiver.queued, 4, 'a 1 MiB window holds four 250 kB values');
      assert.equal(await drain(receiver, 250_000), 40);
      assert.equal(await done, 40);
      if (producer !== child) await producer.shutdown();
    });
  }

  test('the window in messages holds as well as the one in bytes', async () => {
    const receiver = new Receiver<Buffer>(router, { highWaterMark: { messages: 3 } });
    const done = child.call(produce, receiver.toSender(), 20, 10);
    await waitFor(() => receiver.queued === 3, 10_000);
    await sleep(200);
    assert.equal(receiver.queued, 3);
    assert.equal(await drain(receiver, 10), 20);
    assert.equal(await done, 20);
  });

  test('a sender that runs past its window is refused: the receiver drops the excess and the sender learns why', async () => {
    const receiver = new Receiver<number>(router, { highWaterMark: { messages: 4 } });
    const before = warnings.length;
    // The child makes its own Sender claiming a far larger window.
    const outcome = await child.call(
      async (probe: Sender<number>, handle: number) => {
        const core = require('tendril:core') as Core;
        const liar = new core.Sender<number>(core.switchOf(probe), 0, handle, {
          highWaterMark: { messages: 1_000_000 },
        });
        for (let i = 0; i < 50; i++) liar.send(i);
        // The refusal comes back as a dead reply; wait for it.
        for (let i = 0; i < 100 && !liar.closed; i++) await new Promise((resolve) => setTimeout(resolve, 10));
        try {
          await liar.send(99);
          return 'accepted';
        } catch (error) {
          return `${(error as Error).name}: ${(error as Error).message}`;
        }
      },
      receiver.toSender(),
      receiver.handle,
    );
    assert.match(outcome, /ChannelError: .*ran past the window of the receiver/);
    assert.equal(receiver.queued, 4);
    assert.ok(
      warnings.slice(before).some((w) => w.code === 'flood' && /ran past the window/.test(w.message)),
      'a flood warning names the refusal',
    );
    receiver.close();
  });

  test('a Sender passed to a call is closed when the call throws: the loop ends', async () => {
    const receiver = new Receiver<number>(router);
    const done = child.call(async (out: Sender<number>) => {
      await out.send(1);
      await out.send(2);
      throw new Error('failed half way');
    }, receiver.toSender());
    const seen: number[] = [];
    for await (const value of receiver) seen.push(value);
    assert.deepEqual(seen, [1, 2]);
    await assert.rejects(done, (error: unknown) => error instanceof CallError && /failed half way/.test(error.message));
  });

  test('values sent without awaiting still arrive, in order, before the close', async () => {
    const receiver = new Receiver<number>(router, { highWaterMark: { messages: 2 } });
    const done = child.call((out: Sender<number>) => {
      for (let i = 0; i < 50; i++) out.send(i);
      return 'returned at once';
    }, receiver.toSender());
    assert.equal(await done, 'returned at once');
    const seen: number[] = [];
    for await (const value of receiver) seen.push(value);
    assert.deepEqual(
      seen,
      Array.from({ length: 50 }, (_, i) => i),
    );
  });

  test('one receiver fed by calls to three contexts ends after the last of them', async () => {
    const others = await Promise.all([router.local({ name: 'feed-1' }), router.local({ name: 'feed-2' })]);
    const receiver = new Receiver<string>(router);
    const calls = [child, ...others].map((context, i) =>
      context.call(
        async (out: Sender<string>, name: string, delay: number) => {
          for (let n = 0; n < 5; n++) {
            await new Promise((resolve) => setTimeout(resolve, delay));
            await out.send(name);
          }
        },
        receiver.toSender(),
        context.name,
        i * 20,
      ),
    );
    const seen = new Map<string, number>();
    for await (const name of receiver) seen.set(name, (seen.get(name) ?? 0) + 1);
    assert.deepEqual(Object.fromEntries(seen), { producer: 5, 'feed-1': 5, 'feed-2': 5 });
    await Promise.all(calls);
    await Promise.all(others.map((context) => context.shutdown()));
  });

  test('a receiver whose peer context dies ends with ChannelError naming it and why', async () => {
    const doomed = await router.local({ name: 'doomed' });
    const receiver = new Receiver<number>(router);
    const done = doomed.call(async (out: Sender<number>) => {
      await out.send(1);
      setTimeout(() => process.exit(3), 50);
      await new Promise(() => {});
    }, receiver.toSender());
    done.catch(() => {});
    assert.equal(await receiver.get(10_000), 1);
    await assert.rejects(
      (async () => {
        for await (const _ of receiver) assert.fail('no more values');
      })(),
      (error: unknown) =>
        error instanceof ChannelError &&
        /'doomed'/.test(error.message) &&
        /went away before closing/.test(error.message),
    );
  });

  test('a call carrying a Sender that cannot reach its context rejects, and the receiver ends too', async () => {
    const gone = await router.local({ name: 'gone' });
    await gone.shutdown();
    const receiver = new Receiver<number>(router);
    await assert.rejects(
      gone.call((out: Sender<number>) => out.send(1), receiver.toSender()),
      ChannelError,
    );
    await assert.rejects(
      receiver.get(10_000),
      (error: unknown) => error instanceof ChannelError && /did not reach it/.test(error.message),
    );
  });

  test('a send to a receiver that was closed rejects with ChannelError, and the loop on the sending side stops', async () => {
    const receiver = new Receiver<number>(router, { highWaterMark: { messages: 2 } });
    const done = child.call(sendUntilRefused, receiver.toSender());
    assert.equal(await receiver.get(10_000), 0);
    receiver.close();
    assert.match(await done, /^\d+ sent, then ChannelError: /);
  });

  test('closing a receiver fails a sender that waits for credit with nothing in flight', async () => {
    const receiver = new Receiver<number>(router, { highWaterMark: { messages: 2 } });
    const done = child.call(sendUntilRefused, receiver.toSender());
    // Nothing is read: both values of the window arrive, and the sender waits for credit.
    await waitFor(() => receiver.queued === 2, 10_000);
    receiver.close();
    const stop = new AbortController();
    const hang = sleep(20_000, 'still waiting for credit 20 s after the close', { signal: stop.signal });
    hang.catch(() => undefined);
    try {
      assert.match(await Promise.race([done, hang]), /^2 sent, then ChannelError: .*was closed/);
    } finally {
      stop.abort();
    }
  });

  test('a Channel carries values both ways, and both loops end', async () => {
    const channel = new Channel<number, string>(router, { highWaterMark: { messages: 2 } });
    const done = child.call(async (peer: Channel<string, number>) => {
      let n = 0;
      for await (const value of peer) {
        await peer.send(`${value} squared is ${value * value}`);
        n++;
      }
      return n;
    }, channel.otherEnd());
    const answers: string[] = [];
    const reading = (async () => {
      for await (const answer of channel) answers.push(answer);
    })();
    for (let i = 1; i <= 10; i++) await channel.send(i);
    channel.close();
    await reading;
    assert.equal(await done, 10);
    assert.equal(answers.length, 10);
    assert.equal(answers[2], '3 squared is 9');
  });

  test('a Channel whose other end throws ends; a send after that rejects', async () => {
    const channel = new Channel<number, number>(router);
    const done = child.call(async (peer: Channel<number, number>) => {
      const first = await peer.get();
      await peer.send(first + 1);
      throw new Error('peer gave up');
    }, channel.otherEnd());
    await channel.send(41);
    const seen: number[] = [];
    for await (const value of channel) seen.push(value);
    assert.deepEqual(seen, [42]);
    await assert.rejects(done, /peer gave up/);
    // The other end's receiver closed with its call: a send gets a dead reply, and the next ones reject.
    let rejected: unknown;
    for (let i = 0; i < 100 && rejected === undefined; i++) {
      await channel.send(i).catch((error: unknown) => {
        rejected = error;
      });
      await sleep(10);
    }
    assert.ok(rejected instanceof ChannelError, `a send rejects with ChannelError (got ${rejected})`);
  });

  test('Select: remove() takes a receiver out, add() wakes a waiting get(), get(timeout) times out', async () => {
    const a = new Receiver<string>(router);
    const b = new Receiver<string>(router);
    const select = new Select<string>([a]);
    await assert.rejects(select.get(50), TimeoutError);
    const waiting = select.get(10_000);
    select.add(b);
    b.toSender().send('from b');
    assert.deepEqual(await waiting, { receiver: b, value: 'from b' });
    assert.equal(select.remove(a), true);
    assert.equal(select.remove(a), false);
    a.toSender().send('not selected');
    await assert.rejects(select.get(50), TimeoutError);
    assert.equal(await a.get(1000), 'not selected');
    a.close();
    b.close();
  });

  test('many large calls to a busy grandchild wait in the master, not in the context between', async () => {
    const grandchild = await router.local({ name: 'busy-grandchild', via: child });
    const busy = grandchild.call(() => {
      Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, 2000);
      return 'woke';
    });
    await sleep(100);
    const mib = Buffer.alloc(1024 * 1024, 7);
    const calls = Array.from({ length: 40 }, () => grandchild.call((b: Buffer) => b.length, mib));
    await sleep(500);
    // What the child holds for the grandchild, asked of the child itself (its event loop is free).
    const queued = await child.call(
      (probe: Sender<never>, id: number) =>
        (require('tendril:core') as Core).switchOf(probe).routeOf(id)?.queuedBytes ?? -1,
      router.receiver<never>().toSender(),
      grandchild.id,
    );
    assert.ok(queued >= 0, 'the child routes to the grandchild');
    assert.ok(queued < 4 * 1024 * 1024, `the child holds a few MiB for the grandchild, not 40 (${queued} bytes)`);
    assert.equal(await busy, 'woke');
    assert.deepEqual(await Promise.all(calls), Array(40).fill(1024 * 1024));
    await grandchild.shutdown();
  });

  test('a call waiting for a backed-up stream still times out and aborts on time', async () => {
    const busy = child.call(() => {
      Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, 1500);
    });
    await sleep(100);
    const mib = Buffer.alloc(1024 * 1024, 7);
    const filling = Array.from({ length: 4 }, () => child.call((b: Buffer) => b.length, mib));
    const timed = child.callWith({ timeout: 200 }, (b: Buffer) => b.length, mib);
    // The timeout counts while the call waits: it fires long before the busy call ends.
    const first = await Promise.race([
      timed.then(
        () => 'answered',
        (error: unknown) => (error instanceof TimeoutError ? 'timed out' : String(error)),
      ),
      busy.then(() => 'busy call ended'),
    ]);
    assert.equal(first, 'timed out');
    const controller = new AbortController();
    const aborted = child.callWith({ signal: controller.signal }, (b: Buffer) => b.length, mib);
    controller.abort(new Error('no longer needed'));
    await assert.rejects(aborted, /no longer needed/);
    await busy;
    await Promise.all(filling);
  });

  test('many large calls to a busy context wait in the master, unencoded, not in its stream', async () => {
    const busy = child.call(() => {
      Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, 1500);
      return 'woke';
    });
    await sleep(100);
    const mib = Buffer.alloc(1024 * 1024, 7);
    const calls = Array.from({ length: 40 }, () => child.call((b: Buffer) => b.length, mib));
    await sleep(200);
    const stream = switchOf(router).routeOf(child.id);
    assert.ok(stream, 'the child has a stream');
    const queued = stream.queuedBytes;
    assert.ok(
      queued < 3 * 1024 * 1024,
      `at most the high-water mark and a call are queued, not 40 MiB (${queued} bytes)`,
    );
    assert.equal(await busy, 'woke');
    assert.deepEqual(await Promise.all(calls), Array(40).fill(1024 * 1024));
  });
});

describe('route pressure', { timeout: 60_000 }, () => {
  test('calls of 1 MiB through an intermediate, each frame past the stream high-water mark, all come back', async () => {
    // The intermediate reports pressure toward the leaf as it forwards each
    // frame, and relief once the frame has left; when the frame leaves at
    // once, the relief must still follow the pressure, or the master holds
    // calls to the leaf for ever.
    const router = new Router();
    try {
      const middle = await router.local({ name: 'middle' });
      const leaf = await router.local({ name: 'leaf', via: middle });
      const value = Buffer.alloc(1024 * 1024, 7);
      for (let i = 0; i < 50; i++) {
        const echoed = await leaf.callWith({ timeout: 10_000 }, (v: Buffer) => v, value);
        assert.ok(Buffer.compare(echoed as Buffer, value) === 0);
      }
    } finally {
      await router.shutdown();
    }
  });
});
