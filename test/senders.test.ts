import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { type Context, DecodeError, type LogRecord, Router } from 'tendril';
import { Receiver, Sender, SHUTDOWN } from '#dist/internal.js';
import { waitFor } from './support/procs.js';

/**
 * Senders seen from a child that lies: a Sender a child hands to the master
 * must not reach a sibling's standard handles, nor act with the master's
 * authority when the master sends on it.
 */

type Core = typeof import('#dist/core/index.js');

/**
 * Shipped to a child: returns a Sender made with the child's own core,
 * aimed wherever the child likes. `probe` is any Sender given to the child,
 * only to reach its router.
 */
function aimSender(probe: Sender, contextId: number, handle: number): Sender {
  const core = require('tendril:core') as Core;
  return new core.Sender(core.switchOf(probe), contextId, handle);
}

/**
 * Shipped to a child: opens a receiver that admits only messages under the
 * authority of the child itself or its ancestors, keeps it in a global,
 * and returns its handle.
 */
function openGuardedReceiver(probe: Sender): number {
  const core = require('tendril:core') as Core;
  const receiver = new core.Receiver(core.switchOf(probe), { policy: core.hasParentAuthority(core.switchOf(probe)) });
  (globalThis as { guarded?: unknown }).guarded = receiver;
  return receiver.handle;
}

describe('Senders from less trusted contexts', () => {
  let router: Router;
  let a: Context;
  let b: Context;
  let probe: Receiver;
  const logs: LogRecord[] = [];
  before(async () => {
    router = new Router();
    router.on('log', (record) => logs.push(record));
    [a, b] = await Promise.all([router.local({ name: 'a' }), router.local({ name: 'b' })]);
    probe = new Receiver(router);
  });
  after(() => router.shutdown());

  test("a child returning a Sender aimed at a sibling's SHUTDOWN handle: the call rejects with DecodeError, the sibling lives", async () => {
    await assert.rejects(a.call(aimSender, probe.toSender(), b.id, SHUTDOWN), (error: unknown) => {
      assert.ok(error instanceof DecodeError, `rejected with ${String(error)}`);
      assert.match(error.message, new RegExp(`from context 'a' \\(id ${a.id}\\)`));
      assert.match(error.message, /refused a Sender aimed at standard handle 2/);
      return true;
    });
    assert.equal(await b.call(() => 'b is fine'), 'b is fine');
    assert.equal(await a.call(() => 'a is fine too'), 'a is fine too');
  });

  test("a Sender a child hands the master acts with the child's authority: a sibling's parent-only receiver refuses it", async () => {
    const handle = await b.call(openGuardedReceiver, probe.toSender());
    const handed = await a.call(aimSender, probe.toSender(), b.id, handle);
    assert.ok(handed instanceof Sender);
    assert.equal(handed.authority, a.id);
    handed.send('sent by the master for a');
    const refusal = new RegExp(`b: refused a message from context 0 \\(auth ${a.id}\\) to handle ${handle}`);
    await waitFor(() => logs.some((record) => record.contextName === 'b' && refusal.test(record.text)), 10_000);
    assert.equal(await b.call(() => (globalThis as unknown as { guarded: Receiver }).guarded.queued), 0);
    // The master's own Sender to the same receiver is admitted: the refusal was about authority.
    new Sender(router, b.id, handle).send('sent by the master');
    assert.equal(
      await b.call(() => (globalThis as unknown as { guarded: Receiver }).guarded.get(10_000)),
      'sent by the master',
    );
  });

  // Bounded: if a Sender's messages were dropped, the iteration below would wait forever.
  test('Senders still work both ways: master to child and back, child to master and back', {
    timeout: 30_000,
  }, async () => {
    // The master's receiver, handed to a child, which streams into it.
    const inbox = new Receiver<number>(router);
    const sent = a.call((out: Sender<number>) => {
      for (let i = 0; i < 3; i++) out.send(i);
      out.close();
      return out.authority;
    }, inbox.toSender());
    const values: number[] = [];
    for await (const value of inbox) values.push(value);
    assert.deepEqual(values, [0, 1, 2]);
    assert.equal(await sent, a.id, 'a Sender from the parent acts with the child’s own authority');
    // A child's own receiver (parent authority only), handed to the master: the master's sends arrive.
    const handle = await a.call(openGuardedReceiver, probe.toSender());
    const toChild = await a.call(aimSender, probe.toSender(), a.id, handle);
    toChild.send('to a, through its own Sender');
    toChild.close();
    assert.deepEqual(
      await a.call(async () => {
        const received: unknown[] = [];
        for await (const value of (globalThis as unknown as { guarded: Receiver }).guarded) received.push(value);
        return received;
      }),
      ['to a, through its own Sender'],
    );
  });
});
