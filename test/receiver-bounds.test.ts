import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { ChannelError, type Context, Router, type RouterWarning, type Sender } from 'tendril';
import { encode, Receiver } from '#dist/internal.js';
import { heldAfterGc } from './support/heap.js';
import { claimIds } from './support/hostile.js';
import { switchOf } from './support/internals.js';
import { waitFor } from './support/procs.js';

/**
 * What a Receiver in the master may be made to hold by the contexts that
 * feed it: one window per sending context however many Senders (credit
 * handles) it names, and everything the contexts behind one child queue at
 * most that child's `maxHeldBytes`. Attacks are raw frames written by the
 * child on its own stream (fd 4), as a compromised child could.
 */

const MiB = 1024 * 1024;

/**
 * Shipped to a child (self-contained): writes, for each of `sources`
 * credit handles (`firstCredit`, `firstCredit + 1`...), `perSource` frames
 * carrying `payload` to `handle` of context `dst`, from context `src`, on
 * its stream to the parent (fd 4), synchronously; with `closeEach`, each
 * source then closes (a dead message on its credit handle), as a Sender
 * does. With `padTo`, each frame is followed by one of padding to a handle
 * nobody listens on, the two `padTo` bytes long, so that each value
 * arrives in a read of its own. Returns the frames written (padding not
 * counted).
 */
function floodReceiver(
  src: number,
  dst: number,
  handle: number,
  payload: Uint8Array,
  sources: number,
  perSource: number,
  firstCredit: number,
  closeEach: boolean,
  padTo = 0,
): number {
  const fs = require('node:fs') as typeof import('node:fs');
  const frame = (replyTo: number, flags: number, data: Uint8Array) => {
    const header = Buffer.alloc(28);
    header.writeUInt16BE(0x7464, 0);
    header[2] = 1;
    header[3] = flags;
    header.writeUInt32BE(dst, 4);
    header.writeUInt32BE(src, 8);
    header.writeUInt32BE(src, 12);
    header.writeUInt32BE(handle, 16);
    header.writeUInt32BE(replyTo, 20);
    header.writeUInt32BE(data.length, 24);
    return Buffer.concat([header, data]);
  };
  const write = (bytes: Buffer) => {
    for (let offset = 0; offset < bytes.length; ) {
      try {
        offset += fs.writeSync(4, bytes, offset);
      } catch (error) {
        if ((error as NodeJS.ErrnoException).code !== 'EAGAIN') throw error;
      }
    }
  };
  // msgpack for the string 'closed by sender' (fixstr of 16 bytes).
  const closed = Buffer.concat([Buffer.from([0xb0]), Buffer.from('closed by sender')]);
  let frames = 0;
  for (let s = 0; s < sources; s++) {
    let data = frame(firstCredit + s, 0, Buffer.from(payload));
    if (padTo > data.length + 28) {
      const padding = frame(0, 0, Buffer.alloc(padTo - data.length - 28, 0x70));
      padding.writeUInt32BE(0x7fff_fff0, 16);
      data = Buffer.concat([data, padding]);
    }
    for (let i = 0; i < perSource; i++, frames++) write(data);
    if (closeEach) write(frame(firstCredit + s, 1, closed));
  }
  return frames;
}

/**
 * Shipped: sends `count` values `{ who, i, pad }` (pad of `size` bytes),
 * each awaited; says how many went, and why it stopped if it did. With
 * `gated`, first waits until `globalThis.go()` is called there.
 */
async function produceTagged(
  out: Sender<unknown>,
  who: number,
  count: number,
  size: number,
  gated = false,
): Promise<string> {
  if (gated) {
    await new Promise<void>((resolve) => {
      (globalThis as { go?: () => void }).go = resolve;
    });
  }
  let sent = 0;
  try {
    for (; sent < count; sent++) await out.send({ who, i: sent, pad: Buffer.alloc(size, who) });
    return `${sent} sent`;
  } catch (error) {
    return `${sent} sent, then ${(error as Error).name}: ${(error as Error).message}`;
  }
}

/**
 * Makes `holder` hold a Sender of `receiver` in a call that stays in
 * flight, so that other Senders closing do not end the receiver. Returns
 * what ends that call.
 */
function keepOpen(holder: Context, receiver: Receiver<unknown>): () => Promise<void> {
  const holding = holder.call(
    (_out: Sender<unknown>) =>
      new Promise<void>((resolve) => {
        (globalThis as { done?: () => void }).done = resolve;
      }),
    receiver.toSender(),
  );
  return async () => {
    await holder.call(() => (globalThis as { done?: () => void }).done?.());
    await holding;
  };
}

/** A one-byte value (msgpack 1). */
const ONE = Uint8Array.of(0x01);

/** A value the floods carry: about 1 MiB encoded, so that eight fill a default window (8 MiB). */
const FLOOD_VALUE = encode(Buffer.alloc(MiB - 64, 0x66));

describe('what a receiver in the master holds', { timeout: 180_000 }, () => {
  let router: Router;
  let child: Context;
  const warnings: RouterWarning[] = [];
  before(async () => {
    router = new Router();
    router.on('warning', (warning) => warnings.push(warning));
    child = await router.local({ name: 'flooder' });
  });
  after(() => router.shutdown());

  test('a child naming many credit handles queues at most one window in a master receiver', async () => {
    const receiver = new Receiver<Buffer>(router);
    const baseline = heldAfterGc();
    // 48 credit handles, each sending a full window: 384 MiB if each handle had a window of its own.
    const written = await child.call(
      floodReceiver,
      child.id,
      0,
      receiver.handle,
      FLOOD_VALUE,
      48,
      8,
      0x7000_0000,
      false,
    );
    assert.equal(written, 48 * 8);
    const growth = heldAfterGc() - baseline;
    assert.ok(
      growth <= 8 * MiB + 4 * MiB,
      `the master holds ${(growth / MiB).toFixed(1)} MiB more, ${receiver.queued} values queued (at most one window, 8 MiB)`,
    );
    assert.ok(receiver.queued <= 8, `${receiver.queued} values queued (a window holds 8)`);
    assert.ok(
      warnings.some((w) => w.code === 'flood' && /ran past the window/.test(w.message)),
      'the excess is refused with a flood warning',
    );
    receiver.close();
    assert.equal(await child.call(() => 'still here'), 'still here');
  });

  test('one context with 8 Senders of one receiver streams to a slow reader: nothing is refused, all values arrive, and the receiver never holds more than one window from it', async () => {
    const before = warnings.length;
    const size = 100_000;
    // Ten values of 100 kB fill this window.
    const receiver = new Receiver<{ who: number; i: number; pad: Buffer }>(router, {
      highWaterMark: { messages: 1000, bytes: MiB },
    });
    const calls = Array.from({ length: 8 }, (_, who) =>
      child.call(produceTagged, receiver.toSender() as Sender<unknown>, who, 30, size),
    );
    await waitFor(() => receiver.queued >= 10, 10_000);
    // Nothing more comes while nobody reads: the eight Senders share the window.
    await sleep(300);
    assert.equal(receiver.queued, 10, 'the receiver holds one window (ten values), not eight');
    const next = new Map<number, number>();
    let most = 0;
    for await (const value of receiver) {
      most = Math.max(most, receiver.queued + 1);
      assert.equal(value.pad.length, size);
      assert.equal(value.i, next.get(value.who) ?? 0, `values of Sender ${value.who} arrive in order`);
      next.set(value.who, value.i + 1);
      // A slow reader.
      if (value.i % 10 === 0) await sleep(5);
    }
    assert.ok(most <= 10, `at most one window was queued (${most} values)`);
    assert.deepEqual(await Promise.all(calls), Array(8).fill('30 sent'));
    assert.deepEqual([...next.values()], Array(8).fill(30));
    assert.deepEqual(
      warnings.slice(before).filter((w) => w.code === 'flood' || w.code === 'quota'),
      [],
      'nothing was refused',
    );
  });

  test('a Sender that closes with values unread frees its share of the window for the other Senders of its context: none is refused', async () => {
    const before = warnings.length;
    const receiver = new Receiver<{ who: number; i: number; pad: Buffer }>(router, { highWaterMark: { messages: 4 } });
    // The second call holds its Sender (so the receiver stays open) until told to go.
    const second = child.call(produceTagged, receiver.toSender() as Sender<unknown>, 1, 10, 10, true);
    const first = child.call(produceTagged, receiver.toSender() as Sender<unknown>, 0, 4, 10);
    // Its four values fill the window; the call returns and its Sender closes, nothing read.
    assert.equal(await first, '4 sent');
    await waitFor(() => receiver.queued === 4, 10_000);
    await child.call(() => (globalThis as { go?: () => void }).go?.());
    // The close took the first Sender's values out of the window at both ends: the second sends a window of its own.
    await waitFor(() => receiver.queued === 8, 10_000);
    const next = new Map<number, number>();
    for await (const value of receiver) {
      assert.equal(value.i, next.get(value.who) ?? 0);
      next.set(value.who, value.i + 1);
    }
    assert.equal(await second, '10 sent');
    assert.deepEqual([next.get(0), next.get(1)], [4, 10]);
    assert.deepEqual(
      warnings.slice(before).filter((w) => w.code === 'flood' || w.code === 'quota'),
      [],
      'nothing was refused',
    );
  });
});

describe('what the contexts behind one child make a receiver hold, together', { timeout: 180_000 }, () => {
  const maxHeldBytes = 16 * MiB;
  let router: Router;
  const warnings: RouterWarning[] = [];
  before(() => {
    router = new Router({ maxHeldBytes });
    router.on('warning', (warning) => warnings.push(warning));
  });
  after(() => router.shutdown());

  test('contexts behind one child that each stream a window into one receiver are bounded by its maxHeldBytes: the Senders past it close with ChannelError naming maxHeldBytes', async () => {
    const relay = await router.local({ name: 'relay' });
    const grandchildren = await Promise.all(
      [1, 2, 3, 4].map((n) => router.local({ name: `streamer-${n}`, via: relay })),
    );
    const receiver = new Receiver<{ who: number; i: number; pad: Buffer }>(router);
    // Four windows of 8 MiB would be 32 MiB: the account stops them at 16.
    const calls = grandchildren.map((grandchild, who) =>
      grandchild.call(produceTagged, receiver.toSender() as Sender<unknown>, who, 12, MiB - 64),
    );
    await waitFor(() => warnings.some((w) => w.code === 'quota'), 20_000);
    const held = switchOf(router).holdings.snapshot().get(relay.id) ?? 0;
    assert.ok(held <= maxHeldBytes, `the relay's account holds ${held} bytes (at most ${maxHeldBytes})`);
    assert.ok(receiver.queued <= 16, `${receiver.queued} values of 1 MiB queued`);
    const next = new Map<number, number>();
    const ended = await (async () => {
      try {
        for await (const value of receiver) {
          assert.equal(value.i, next.get(value.who) ?? 0, `values of grandchild ${value.who} arrive in order`);
          next.set(value.who, value.i + 1);
        }
        return 'the loop ended without an error';
      } catch (error) {
        return error;
      }
    })();
    assert.ok(
      ended instanceof ChannelError && /values it sent were refused: .*maxHeldBytes/.test(ended.message),
      `the reader learns that values were refused (${ended})`,
    );
    const outcomes = await Promise.all(calls);
    const refused = outcomes.filter((outcome) => /ChannelError: .*maxHeldBytes/.test(outcome));
    assert.ok(refused.length >= 1, outcomes.join('\n'));
    outcomes.forEach((outcome, who) => {
      if (outcome === '12 sent') assert.equal(next.get(who), 12, `every value of grandchild ${who} arrives`);
    });
    assert.equal(switchOf(router).holdings.snapshot().get(relay.id) ?? 0, 0, 'reading the values gives it all back');
    await relay.shutdown();
  });

  test("contexts behind one child together queue at most its maxHeldBytes in a receiver, however many IDs they use; a sibling child's stream is unaffected", async () => {
    const hostile = await router.local({ name: 'hostile' });
    const honest = await router.local({ name: 'honest' });
    const grandchildren = await Promise.all(
      [1, 2, 3, 4].map((n) => router.local({ name: `hostile-${n}`, via: hostile })),
    );
    const receiver = new Receiver<unknown>(router);
    // The honest child holds a Sender of the receiver (a call in flight), so that it stays open.
    const streaming = honest.call(
      async (out: Sender<unknown>, size: number) => {
        await new Promise<void>((resolve) => {
          (globalThis as { go?: () => void }).go = resolve;
        });
        for (let i = 0; i < 40; i++) await out.send({ honest: i, pad: Buffer.alloc(size) });
        return 'all sent';
      },
      receiver.toSender(),
      MiB - 64,
    );
    const baseline = heldAfterGc();
    const before = warnings.length;
    // Each grandchild: 4 credit handles, each a full window. 128 MiB in all.
    await Promise.all(
      grandchildren.map((grandchild, n) =>
        grandchild.call(
          floodReceiver,
          grandchild.id,
          0,
          receiver.handle,
          FLOOD_VALUE,
          4,
          8,
          0x7000_0000 + n * 16,
          false,
        ),
      ),
    );
    const growth = heldAfterGc() - baseline;
    assert.ok(
      growth <= maxHeldBytes + 8 * MiB,
      `the master holds ${(growth / MiB).toFixed(1)} MiB more (at most maxHeldBytes, ${maxHeldBytes / MiB} MiB)`,
    );
    const held = switchOf(router).holdings.snapshot().get(hostile.id) ?? 0;
    assert.ok(held <= maxHeldBytes, `the hostile child's account holds ${held} bytes`);
    assert.ok(
      warnings.slice(before).some((w) => w.code === 'quota' && /maxHeldBytes/.test(w.message)),
      'a quota warning names maxHeldBytes',
    );
    await honest.call(() => (globalThis as { go?: () => void }).go?.());
    let honestValues = 0;
    while (honestValues < 40) {
      const value = (await receiver.get(20_000)) as { honest?: number };
      if (value.honest !== undefined) assert.equal(value.honest, honestValues++);
    }
    assert.equal(await streaming, 'all sent');
    receiver.close();
    assert.equal(
      switchOf(router).holdings.snapshot().get(hostile.id) ?? 0,
      0,
      'closing the receiver gives it all back',
    );
    await Promise.all([hostile.shutdown(), honest.shutdown()]);
  });

  test("a grandchild flooding a receiver fills only its share of its parent's account: the parent's own values are still taken", async () => {
    const parent = await router.local({ name: 'flooded-parent' });
    const flooder = await router.local({ name: 'flooding-grandchild', via: parent });
    const receiver = new Receiver<unknown>(router);
    // The parent's values wait until the flood is in: a call in flight holding a Sender.
    const sending = parent.call(produceTagged, receiver.toSender() as Sender<unknown>, 0, 3, MiB - 64, true);
    // A window of 8 values of 1 MiB from each of four IDs (its own and three it announces): 32 MiB, twice the account.
    const ids = [flooder.id, ...(await flooder.call(claimIds, 3))];
    for (const [n, id] of ids.entries()) {
      await flooder.call(floodReceiver, id, 0, receiver.handle, FLOOD_VALUE, 1, 8, 0x7100_0000 + n, false);
    }
    const held = switchOf(router).holdings.snapshot();
    const share = Math.floor(maxHeldBytes * 0.75);
    assert.ok(
      (held.get(flooder.id) ?? 0) <= share,
      `the grandchild holds ${held.get(flooder.id)} bytes (its share: ${share})`,
    );
    await parent.call(() => (globalThis as { go?: () => void }).go?.());
    // Nothing is read before the parent's sends have settled: they fit in what the flood left.
    assert.equal(await sending, '3 sent');
    const ownValues: number[] = [];
    for (let taken = 0; ownValues.length < 3 && taken < 64; taken++) {
      const value = (await receiver.get(20_000)) as { who?: number; i?: number };
      if (value.who === 0 && value.i !== undefined) ownValues.push(value.i);
    }
    assert.deepEqual(ownValues, [0, 1, 2], "the parent's values were taken");
    receiver.close();
    await parent.shutdown();
  });

  test('a context that closes one Sender and opens another to pile up unread values is bounded by the same account', async () => {
    const hostile = await router.local({ name: 'reopener' });
    const holder = await router.local({ name: 'holder' });
    const receiver = new Receiver<unknown>(router);
    const letGo = keepOpen(holder, receiver);
    const baseline = heldAfterGc();
    // 24 Senders one after the other, each sending a full window and closing: 192 MiB.
    await hostile.call(floodReceiver, hostile.id, 0, receiver.handle, FLOOD_VALUE, 24, 8, 0x7000_0000, true);
    const growth = heldAfterGc() - baseline;
    assert.ok(
      growth <= maxHeldBytes + 8 * MiB,
      `the master holds ${(growth / MiB).toFixed(1)} MiB more (at most maxHeldBytes, ${maxHeldBytes / MiB} MiB)`,
    );
    assert.equal(receiver.closed, false);
    await letGo();
    receiver.close();
    await Promise.all([hostile.shutdown(), holder.shutdown()]);
  });

  test('one-byte values queued in a receiver, each arriving in a read of 64 KiB, hold no more than their account says', async () => {
    const viewer = await router.local({ name: 'viewer' });
    const receiver = new Receiver<number>(router);
    const baseline = heldAfterGc();
    // One window's worth of messages (1024), each beside 64 KiB of padding: 64 MiB read.
    await viewer.call(floodReceiver, viewer.id, 0, receiver.handle, ONE, 1, 1024, 0x7000_0000, false, 64 * 1024);
    await waitFor(() => receiver.queued === 1024, 20_000);
    const growth = heldAfterGc() - baseline;
    const charged = switchOf(router).holdings.snapshot().get(viewer.id) ?? 0;
    assert.ok(
      growth <= charged + 4 * MiB,
      `${receiver.queued} one-byte values queued: the child's account is charged ${charged} bytes, the master holds ${(growth / MiB).toFixed(1)} MiB more`,
    );
    receiver.close();
    await viewer.shutdown();
  });

  test('one-byte values from Senders that close one after another, each arriving in a read of 64 KiB, hold no more than their account says', async () => {
    const viewer = await router.local({ name: 'closing-viewer' });
    const holder = await router.local({ name: 'holder' });
    const receiver = new Receiver<number>(router);
    const letGo = keepOpen(holder, receiver);
    const baseline = heldAfterGc();
    // Four Senders of a window of one-byte values each, one after the other: 256 MiB read.
    await viewer.call(floodReceiver, viewer.id, 0, receiver.handle, ONE, 4, 1024, 0x7000_0000, true, 64 * 1024);
    await waitFor(() => receiver.queued === 4096, 30_000);
    const growth = heldAfterGc() - baseline;
    const charged = switchOf(router).holdings.snapshot().get(viewer.id) ?? 0;
    assert.ok(
      growth <= charged + 4 * MiB,
      `${receiver.queued} one-byte values queued: the child's account is charged ${charged} bytes, the master holds ${(growth / MiB).toFixed(1)} MiB more (maxHeldBytes ${maxHeldBytes / MiB} MiB)`,
    );
    receiver.close();
    await letGo();
    await Promise.all([viewer.shutdown(), holder.shutdown()]);
  });
});

describe('what a child makes a receiver in a sibling hold', { timeout: 180_000 }, () => {
  const maxHeldBytes = 16 * MiB;
  let router: Router;
  before(() => {
    router = new Router({ maxHeldBytes });
  });
  after(() => router.shutdown());

  test("a child's IDs flooding a receiver in a sibling are bounded there by maxHeldBytes: the contexts beyond a context's parent share one account", async () => {
    const [victim, attacker] = await Promise.all([
      router.local({ name: 'victim' }),
      router.local({ name: 'sibling-attacker' }),
    ]);
    // The victim's receiver, whose Sender the attacker was given (here: its handle).
    const handle = await victim.call(() => {
      const core = require('tendril:core') as {
        contextRuntime(): { router: { on(event: 'warning', fn: (w: { message: string }) => void): void } };
        Receiver: new (router: unknown) => { handle: number };
      };
      const router = core.contextRuntime().router;
      const receiver = new core.Receiver(router);
      const quota: string[] = [];
      router.on('warning', (warning) => quota.push(warning.message));
      Object.assign(globalThis, { receiver, quota });
      return receiver.handle;
    });
    const held = () =>
      victim.call(() => {
        const v8 = require('node:v8') as typeof import('node:v8');
        const vm = require('node:vm') as typeof import('node:vm');
        v8.setFlagsFromString('--expose-gc');
        const gc = vm.runInNewContext('gc') as () => void;
        gc();
        gc();
        const usage = process.memoryUsage();
        const { receiver, quota } = globalThis as unknown as { receiver: { queued: number }; quota: string[] };
        return { bytes: usage.heapUsed + usage.arrayBuffers, queued: receiver.queued, warning: quota[0] };
      });
    const baseline = (await held()).bytes;
    const ids = await attacker.call(claimIds, 12);
    // Each of 12 IDs sends a full window of 1 MiB values: 96 MiB.
    for (const [n, id] of ids.entries()) {
      await attacker.call(floodReceiver, id, victim.id, handle, FLOOD_VALUE, 1, 8, 0x7100_0000 + n, false);
    }
    // What the attacker wrote went ahead of its answers, and the master forwards it ahead of this call.
    const after = await held();
    const growth = after.bytes - baseline;
    assert.ok(
      growth <= maxHeldBytes + 8 * MiB,
      `the victim holds ${(growth / MiB).toFixed(1)} MiB more, ${after.queued} values of 1 MiB queued from ${ids.length} IDs of its sibling (maxHeldBytes ${maxHeldBytes / MiB} MiB)`,
    );
    assert.ok(after.queued <= 16, `${after.queued} values of 1 MiB queued`);
    assert.match(
      after.warning ?? '',
      /the contexts beyond the parent of 'victim' .* would make 'victim' hold \d+ bytes .* over its maxHeldBytes \(16777216 bytes\)/,
    );
    await Promise.all([victim.shutdown(), attacker.shutdown()]);
  });
});
