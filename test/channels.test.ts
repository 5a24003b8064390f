import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { Channel, type Context, ContextDisconnectedError, Router, Select, type Sender, TimeoutError } from 'tendril';
import { Receiver, SEND_BYTES } from '#dist/internal.js';
import { waitFor } from './support/procs.js';

describe('receivers, senders and select', () => {
  let router: Router;
  let child: Context;
  before(async () => {
    router = new Router();
    child = await router.local({ name: 'streamer' });
  });
  after(() => router.shutdown());

  test('a Sender passed to a remote function streams values back in order, and close ends the iteration', async () => {
    const receiver = new Receiver<{ i: number; at: string }>(router);
    const done = child.call(
      async (out: Sender<{ i: number; at: string }>, count: number) => {
        for (let i = 0; i < count; i++) out.send({ i, at: process.title });
        out.close();
        return 'sent';
      },
      receiver.toSender(),
      100,
    );
    const values: number[] = [];
    for await (const value of receiver) {
      values.push(value.i);
      assert.equal(value.at, 'tendril:streamer');
    }
    assert.deepEqual(
      values,
      Array.from({ length: 100 }, (_, i) => i),
    );
    assert.equal(await done, 'sent');
  });

  test('SEND_BYTES: the bytes arrive as they are, and onCredited says so, in order, only once the other end has read them', async () => {
    const channel = new Channel<Uint8Array, string>(router);
    const done = child.call(async (peer: Channel<string, Uint8Array>) => {
      const input = peer[Symbol.asyncIterator]();
      const seen: number[][] = [];
      const first = await input.next();
      seen.push([...(first.value as Uint8Array)]);
      // The rest is read only once the master says so.
      await new Promise<void>((resolve) => {
        (globalThis as { readOn?: () => void }).readOn = resolve;
        peer.send('read one');
      });
      for (let next = await input.next(); !next.done; next = await input.next()) seen.push([...next.value]);
      return seen;
    }, channel.otherEnd());
    const credited: number[] = [];
    for (const n of [1, 2, 3]) await channel[SEND_BYTES](Uint8Array.of(n, n, n), () => credited.push(n));
    assert.deepEqual(credited, [], 'nothing is credited as it leaves');
    assert.equal(await channel.get(), 'read one');
    await waitFor(() => credited.length > 0);
    assert.deepEqual(credited, [1], 'only what the other end read');
    await child.call(() => (globalThis as { readOn?: () => void }).readOn?.());
    channel.close();
    assert.deepEqual(await done, [
      [1, 1, 1],
      [2, 2, 2],
      [3, 3, 3],
    ]);
  });

  test('Select merges receivers fed by several contexts and ends when all are closed', async () => {
    const others = await Promise.all([router.local({ name: 'feed-a' }), router.local({ name: 'feed-b' })]);
    const feeds = [child, ...others];
    const receivers = feeds.map(() => new Receiver<string>(router));
    const select = new Select(receivers);
    await Promise.all(
      feeds.map((context, i) =>
        context.call(
          (out: Sender<string>, name: string) => {
            for (let n = 0; n < 5; n++) out.send(name);
            out.close();
          },
          receivers[i]?.toSender() as Sender<string>,
          context.name,
        ),
      ),
    );
    const seen = new Map<string, number>();
    for await (const { receiver, value } of select) {
      assert.equal(value, feeds[receivers.indexOf(receiver)]?.name);
      seen.set(value, (seen.get(value) ?? 0) + 1);
    }
    assert.deepEqual(Object.fromEntries(seen), { streamer: 5, 'feed-a': 5, 'feed-b': 5 });
    await Promise.all(others.map((context) => context.shutdown()));
  });

  test('Select refuses the same receiver twice, in add() and in the constructor', () => {
    const a = new Receiver<number>(router);
    const b = new Receiver<number>(router);
    const select = new Select([a]);
    const twice = (error: unknown) =>
      error instanceof TypeError && new RegExp(`handle ${a.handle} .* is already in this Select`).test(error.message);
    assert.throws(() => select.add(a), twice);
    select.add(b);
    assert.equal(select.size, 2);
    assert.throws(() => new Select([a, b, a]), twice);
    a.close();
    b.close();
  });

  test('get() with a timeout rejects with TimeoutError', async () => {
    const receiver = new Receiver(router);
    await assert.rejects(receiver.get(30), TimeoutError);
    receiver.close();
  });

  test('a receiver bound to a context closes when that context dies', async () => {
    const doomed = await router.local({ name: 'doomed-feed' });
    const receiver = new Receiver<number>(router, { contextId: doomed.id });
    const pending = receiver.get();
    process.kill(doomed.info.pid, 'SIGKILL');
    await assert.rejects(pending, ContextDisconnectedError);
  });

  test('a Sender cannot be decoded without a router to bind it to', async () => {
    const { decode, encode } = await import('#dist/internal.js');
    const bytes = encode([new Receiver(router).toSender()]);
    assert.throws(() => decode(bytes), /only be decoded on behalf of a router/);
  });
});
