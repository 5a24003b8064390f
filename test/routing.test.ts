import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import {
  ChannelError,
  type Context,
  ContextDisconnectedError,
  type LogRecord,
  Router,
  type RouterWarning,
  type Sender,
} from 'tendril';
import {
  ADD_ROUTE,
  CALL_FUNCTION,
  DEL_ROUTE,
  encode,
  FORWARD_LOG,
  GET_MODULE,
  ROUTE_PRESSURE,
} from '#dist/internal.js';
import { frameBytes, writeBytes } from './support/frames.js';
import { switchOf } from './support/internals.js';
import { waitFor } from './support/procs.js';

type Core = typeof import('#dist/core/index.js');

/**
 * Shipped: writes `frame` (built with a reply-to of 0) on the child's own
 * stream (fd 4), with the reply-to handle of a receiver made here, and
 * returns the decoded reply that receiver gets. `probe` only lends the
 * child's router.
 */
async function askRaw(probe: Sender<never>, frame: Uint8Array): Promise<unknown> {
  const core = require('tendril:core') as Core;
  const fs = require('node:fs') as typeof import('node:fs');
  const receiver = new core.Receiver(core.switchOf(probe));
  try {
    const bytes = Buffer.from(frame);
    bytes.writeUInt32BE(receiver.handle, 20);
    for (let offset = 0; offset < bytes.length; ) {
      try {
        offset += fs.writeSync(4, bytes, offset);
      } catch (error) {
        if ((error as NodeJS.ErrnoException).code !== 'EAGAIN') throw error;
      }
    }
    return await receiver.get(10_000);
  } finally {
    receiver.close();
  }
}

function nextWarning(router: Router, code: RouterWarning['code']): Promise<RouterWarning> {
  return new Promise((resolve) => {
    const listener = (warning: RouterWarning) => {
      if (warning.code !== code) return;
      router.off('warning', listener);
      resolve(warning);
    };
    router.on('warning', listener);
  });
}

describe('routing through intermediate contexts', () => {
  let router: Router;
  before(() => {
    router = new Router();
  });
  after(() => router.shutdown());

  test('a grandchild started via a child is called directly by the master', async () => {
    const child = await router.local({ name: 'parent' });
    const grandchild = await router.local({ name: 'grandchild', via: child });
    assert.equal(grandchild.parentId, child.id);
    const [pid, ppid] = await grandchild.call(() => [process.pid, process.ppid]);
    assert.equal(pid, grandchild.info.pid);
    assert.equal(ppid, child.info.pid, "the grandchild is the child's process child");
    await child.shutdown();
  });

  test('a chain of 10 contexts, each started via the previous, answers at the far end', async () => {
    const chain: Context[] = [await router.local({ name: 'hop0' })];
    for (let i = 1; i < 10; i++) chain.push(await router.local({ name: `hop${i}`, via: chain[i - 1] as Context }));
    const far = chain[9] as Context;
    assert.equal(await far.call((x: number) => x * 2, 21), 42);
    const ppids = await Promise.all(chain.map((c) => c.call(() => process.ppid)));
    for (let i = 1; i < 10; i++) assert.equal(ppids[i], chain[i - 1]?.info.pid);
    // Shutting down the first hop takes the whole chain with it.
    await (chain[0] as Context).shutdown();
    await assert.rejects(
      far.call(() => 1),
      ChannelError,
    );
  });
});

describe('trust between contexts', () => {
  let router: Router;
  let a: Context;
  let b: Context;
  const logs: LogRecord[] = [];
  before(async () => {
    router = new Router();
    router.on('log', (record) => logs.push(record));
    [a, b] = await Promise.all([router.local({ name: 'a' }), router.local({ name: 'b' })]);
  });
  after(() => router.shutdown());

  test('a message claiming a source ID not routed through its stream is dropped', async () => {
    for (const forged of [0, b.id]) {
      const warned = nextWarning(router, 'forged-id');
      await a.call(writeBytes, frameBytes({ dst: 0, src: forged, handle: 4242 }, encode(null)));
      const warning = await warned;
      assert.match(warning.message, new RegExp(`claiming auth ID ${forged} from stream a`));
    }
    assert.equal(await a.call(() => 'a is fine'), 'a is fine');
  });

  test('a child cannot run code in its parent', async () => {
    const grandchild = await router.local({ name: 'sneaky', via: a });
    const attack = Buffer.from(encode({ f: '() => { globalThis.__pwned = true; }', a: [] }));
    await grandchild.call(writeBytes, frameBytes({ dst: a.id, src: grandchild.id, handle: CALL_FUNCTION }, attack));
    await waitFor(() =>
      logs.some((r) => r.contextName === 'a' && /refused a message from context \d+ .* CALL_FUNCTION/.test(r.text)),
    );
    assert.equal(await a.call(() => (globalThis as { __pwned?: boolean }).__pwned), undefined);
    await grandchild.shutdown();
  });

  test('a child cannot announce a route to another subtree', async () => {
    const warned = nextWarning(router, 'bad-route');
    const failed: RouterWarning[] = [];
    const listener = (warning: RouterWarning) => warning.code === 'handler' && failed.push(warning);
    router.on('warning', listener);
    await b.call(writeBytes, frameBytes({ dst: 0, src: b.id, handle: ADD_ROUTE }, encode([a.id, 'hijacked', b.id])));
    assert.match((await warned).message, new RegExp(`refused ADD_ROUTE for context ${a.id} from stream b`));
    await b.call(() => null);
    router.off('warning', listener);
    assert.deepEqual(failed, [], 'the refusal is reported once, not again as a failed handler');
    assert.equal(await a.call(() => process.pid), a.info.pid, 'calls to a still reach a');
  });

  for (const [handleName, handle, rest, reason] of [
    ['ADD_ROUTE', ADD_ROUTE, ['hijacked', 0], 'that ID does not belong to its subtree'],
    ['DEL_ROUTE', DEL_ROUTE, ['gone'], 'that context is not reached through it'],
    ['ROUTE_PRESSURE', ROUTE_PRESSURE, [1], 'that context is not reached through it'],
  ] as const) {
    test(`a refused ${handleName} that asks for a reply is answered with RouteRefusedError, never success, and warned once`, async () => {
      const seen: RouterWarning[] = [];
      const listener = (warning: RouterWarning) => seen.push(warning);
      router.on('warning', listener);
      const frame = frameBytes({ dst: 0, src: b.id, handle }, encode([a.id, ...rest]));
      const reply = await b.call(askRaw, router.receiver<never>().toSender(), frame);
      // A call made after the request: its reply came later on the same stream.
      await b.call(() => null);
      router.off('warning', listener);
      assert.ok(Array.isArray(reply), `a reply envelope (${JSON.stringify(reply)})`);
      const [status, error] = reply as [number, { name: string; message: string; code: string }];
      assert.equal(status, 1, `the reply is a failure, not ${JSON.stringify(reply)}`);
      assert.equal(error.name, 'RouteRefusedError');
      assert.equal(error.code, 'ERR_TENDRIL_ROUTE_REFUSED');
      assert.equal(error.message, `refused ${handleName} for context ${a.id} from stream b: ${reason}`);
      assert.deepEqual(
        seen.map((warning) => [warning.code, warning.message]),
        [['bad-route', `master: ${error.message}`]],
        'one warning for the refusal',
      );
      assert.equal(await a.call(() => process.pid), a.info.pid, 'calls to a still reach a');
    });
  }

  test("a FORWARD_LOG line of another subtree's context is refused, answered as a failure, and warned once", async () => {
    const seen: RouterWarning[] = [];
    const onWarning = (warning: RouterWarning) => seen.push(warning);
    const lines: string[] = [];
    const onLog = (record: { text: string }) => lines.push(record.text);
    router.on('warning', onWarning);
    router.on('log', onLog);
    const frame = frameBytes({ dst: 0, src: b.id, handle: FORWARD_LOG }, encode([a.id, 'a', 'a line a never wrote']));
    const reply = await b.call(askRaw, router.receiver<never>().toSender(), frame);
    await b.call(() => null);
    router.off('warning', onWarning);
    router.off('log', onLog);
    const [status, error] = reply as [number, { name: string; message: string }];
    assert.equal(status, 1, `the reply is a failure, not ${JSON.stringify(reply)}`);
    assert.equal(error.name, 'RouteRefusedError');
    assert.equal(
      error.message,
      `refused FORWARD_LOG for context ${a.id} from stream b: context ${b.id} did not start that context; the line was dropped`,
    );
    assert.deepEqual(
      seen.map((warning) => [warning.code, warning.message]),
      [['bad-route', `master: ${error.message}`]],
      'one warning for the refusal',
    );
    assert.ok(!lines.includes('a line a never wrote'), 'the line was dropped');
  });

  test('a child cannot hold calls to another subtree with ROUTE_PRESSURE', async () => {
    await b.call(writeBytes, frameBytes({ dst: 0, src: b.id, handle: ROUTE_PRESSURE }, encode([a.id, 1])));
    // A call made after the notice: b's stream carried it first.
    await b.call(() => null);
    const big = Buffer.alloc(64 * 1024);
    assert.equal(await a.callWith({ timeout: 10_000 }, (x: Buffer) => x.length, big), big.length, 'calls to a flow');
  });

  test('a message to a missing handle or refused by policy gets a dead reply, not silence', async () => {
    await assert.rejects(
      switchOf(router).request(a.id, 4242, encode(null)),
      (error: unknown) => error instanceof ChannelError && /no handle 4242 in context 'a'/.test(error.message),
    );
    // GET_MODULE only serves children, so a request from the parent is refused.
    await assert.rejects(
      switchOf(router).request(a.id, GET_MODULE, encode(['tendril:connection'])),
      (error: unknown) => error instanceof ChannelError && /refused by policy of GET_MODULE/.test(error.message),
    );
  });
});

describe('malformed streams', () => {
  let router: Router;
  before(() => {
    router = new Router();
  });
  after(() => router.shutdown());

  for (const [label, fields, reason] of [
    ['a bad magic', { magic: 0x4d49, dst: 0, src: 0, handle: 1 }, /bad magic 0x4d49/],
    ['an oversized length', { dst: 0, src: 0, handle: 1, length: 0xfffffff0 }, /over maxMessageSize/],
  ] as const) {
    test(`${label} closes that stream with the reason; pending calls reject; others carry on`, async () => {
      const [bad, good] = await Promise.all([router.local({ name: 'bad' }), router.local({ name: 'good' })]);
      const pending = bad.call(() => new Promise((resolve) => setTimeout(resolve, 10_000)));
      bad.callNoReply(writeBytes, frameBytes({ ...fields, src: bad.id }, Buffer.alloc(4)));
      await assert.rejects(pending, (error: unknown) => {
        assert.ok(error instanceof ContextDisconnectedError);
        assert.equal(error.contextName, 'bad');
        assert.match(error.reason, reason);
        return true;
      });
      assert.equal(await good.call(() => 'unaffected'), 'unaffected');
      await good.shutdown();
    });
  }
});
