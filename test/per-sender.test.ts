import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { type Context, type LogRecord, ProtocolError, Router, type RouterWarning } from 'tendril';
import { ADD_ROUTE, DEL_ROUTE, encode, FORWARD_LOG, ROUTE_PRESSURE } from '#dist/internal.js';
import { frameBytes, writeBytes } from './support/frames.js';
import { claimIds, forgeConnectReplies } from './support/hostile.js';
import { switchOf } from './support/internals.js';
import { waitFor } from './support/procs.js';

/**
 * Authority checked per sender, not per stream: every context behind one
 * child of the master reaches it through the same stream, so a check that
 * the IDs a request names are "behind that stream" lets a grandchild speak
 * for its parent and its siblings. Each test plays that grandchild (or an
 * isolated call's interpreter) writing raw frames on its own stream.
 */

function collect(router: Router, code: RouterWarning['code']): RouterWarning[] {
  const seen: RouterWarning[] = [];
  router.on('warning', (warning) => warning.code === code && seen.push(warning));
  return seen;
}

describe('what a grandchild can say for its parent and its siblings', () => {
  let router: Router;
  let parent: Context;
  let attacker: Context;
  let sibling: Context;
  const lines: LogRecord[] = [];
  before(async () => {
    router = new Router();
    router.on('log', (record) => lines.push(record));
    parent = await router.local({ name: 'parent' });
    [attacker, sibling] = await Promise.all([
      router.local({ name: 'attacker', via: parent }),
      router.local({ name: 'sibling', via: parent }),
    ]);
  });
  after(() => router.shutdown());

  for (const victim of ['parent', 'sibling'] as const) {
    test(`a line forwarded in the name of its ${victim} is refused and warned`, async () => {
      const refused = collect(router, 'bad-route');
      const target = victim === 'parent' ? parent : sibling;
      const text = `a line the ${victim} never wrote`;
      await attacker.call(
        writeBytes,
        frameBytes({ dst: 0, src: attacker.id, handle: FORWARD_LOG }, encode([target.id, victim, text])),
      );
      // The attacker's stream carried the frame before the call's reply: the master has read it.
      await attacker.call(() => null);
      assert.ok(!lines.some((line) => line.text === text), 'the line never became a log record');
      assert.match(
        refused[0]?.message ?? '',
        new RegExp(
          `refused FORWARD_LOG for context ${target.id} from stream parent: context ${attacker.id} did not start that context`,
        ),
      );
    });
  }

  test('the parent still reports the lines of its children', async () => {
    await sibling.call(() => console.log('the sibling speaks'));
    await waitFor(() => lines.some((line) => line.text === 'the sibling speaks'));
    assert.equal(lines.find((line) => line.text === 'the sibling speaks')?.contextName, 'sibling');
  });

  test("an isolated call's interpreter cannot log in the name of its context", async () => {
    const refused = collect(router, 'bad-route');
    const text = 'a line the context never wrote';
    await parent.callWith(
      { isolate: true },
      (contextId: number, line: string, handle: number) => {
        const core = require('tendril:core') as {
          contextRuntime(): { router: { id: number; send(message: unknown): void } };
          Message: { encoded(header: object, value: unknown): unknown };
        };
        const own = core.contextRuntime().router;
        own.send(
          core.Message.encoded({ dst: 0, src: own.id, auth: own.id, handle, replyTo: 0 }, [contextId, 'parent', line]),
        );
      },
      parent.id,
      text,
      FORWARD_LOG,
    );
    // Isolated calls end when their interpreter has gone: its last message has been read.
    assert.ok(!lines.some((line) => line.text === text), 'the line never became a log record');
    assert.equal(refused.length, 1, 'refused once');
  });

  test('a DEL_ROUTE of its parent, sent straight to the master, is refused: calls to the parent go on', async () => {
    const refused = collect(router, 'bad-route');
    await attacker.call(
      writeBytes,
      frameBytes({ dst: 0, src: attacker.id, handle: DEL_ROUTE }, encode([parent.id, 'forged departure'])),
    );
    await attacker.call(() => null);
    assert.equal(await parent.callWith({ timeout: 5000 }, () => 'still routed'), 'still routed');
    assert.equal(await sibling.callWith({ timeout: 5000 }, () => 'still routed'), 'still routed');
    assert.match(refused[0]?.message ?? '', /not by the child at the end of that stream/);
  });

  test('a ROUTE_PRESSURE on its sibling, sent straight to the master, is refused: calls to the sibling flow', async () => {
    const refused = collect(router, 'bad-route');
    await attacker.call(
      writeBytes,
      frameBytes({ dst: 0, src: attacker.id, handle: ROUTE_PRESSURE }, encode([sibling.id, 1])),
    );
    await attacker.call(() => null);
    assert.equal(await sibling.callWith({ timeout: 5000 }, () => 'not held'), 'not held');
    assert.equal(refused.length, 1, 'refused once');
  });

  test('an ADD_ROUTE renaming its sibling, sent straight to the master, is refused', async () => {
    const refused = collect(router, 'bad-route');
    await attacker.call(
      writeBytes,
      frameBytes({ dst: 0, src: attacker.id, handle: ADD_ROUTE }, encode([sibling.id, 'renamed', attacker.id])),
    );
    await attacker.call(() => null);
    assert.equal(switchOf(router).nameOf(sibling.id), 'sibling');
    assert.equal(refused.length, 1, 'refused once');
  });

  test("a dead reply with a sibling's reply handle does not fail the master's call to that sibling", async () => {
    // The sibling learns the reply-to handle of the calls it gets, as a lucky
    // guesser of the 32-bit handle would know it; the attacker then fails it.
    await sibling.call(() => {
      const core = require('tendril:core') as {
        contextRuntime(): { router: { route(message: { handle: number; replyTo: number }, from: unknown): void } };
      };
      const router = core.contextRuntime().router;
      const route = router.route;
      const seen: number[] = [];
      (globalThis as { __replyTos?: number[] }).__replyTos = seen;
      router.route = function (message, from) {
        if (message.handle === 1) seen.push(message.replyTo);
        return route.call(this, message, from);
      };
    });
    const pending = sibling.call(() => new Promise((resolve) => setTimeout(resolve, 1500, 'answered')));
    const replyTo = await sibling.call(() => {
      const seen = (globalThis as { __replyTos?: number[] }).__replyTos as number[];
      return seen[seen.length - 2] as number;
    });
    await attacker.call(
      writeBytes,
      frameBytes({ dst: 0, src: attacker.id, handle: replyTo, flags: 1 }, encode('forged: the sibling is gone')),
    );
    assert.equal(await pending, 'answered');
  });

  test('a CONNECT reply of a grandchild naming its sibling as the new context is refused', async () => {
    const liar = await router.local({ name: 'liar', via: parent });
    await forgeConnectReplies(liar, sibling.id);
    await assert.rejects(
      router.local({ name: 'claimed', via: liar }),
      (error: unknown) =>
        error instanceof ProtocolError &&
        new RegExp(
          `it replied that the new context has ID ${sibling.id}, which is not a context started under it`,
        ).test(error.message),
    );
    assert.equal(switchOf(router).nameOf(sibling.id), 'sibling');
    await liar.shutdown();
  });

  test('after all of it, every context still answers', async () => {
    assert.deepEqual(await Promise.all([parent, attacker, sibling].map((context) => context.call(() => 'up'))), [
      'up',
      'up',
      'up',
    ]);
    const late = await router.local({ name: 'late', via: attacker });
    assert.equal(await late.call(() => 'started via the attacker'), 'started via the attacker');
    await late.shutdown();
  });
});

/**
 * Shipped (self-contained): asks the master for context IDs, 1000 at a
 * time, until it says no or `most` were granted. Returns how many were
 * granted, the ranges, and the refusal.
 */
async function drainIds(most: number): Promise<{ granted: number; blocks: [number, number][]; refusal: string }> {
  const core = require('tendril:core') as {
    contextRuntime(): {
      router: { request(dst: number, handle: number, payload: Uint8Array): Promise<{ data: Uint8Array }> };
    };
    encode(value: unknown): Uint8Array;
    decode(bytes: Uint8Array): unknown;
    ALLOCATE_ID: number;
  };
  const router = core.contextRuntime().router;
  const blocks: [number, number][] = [];
  let granted = 0;
  while (granted < most) {
    const reply = await router.request(0, core.ALLOCATE_ID, core.encode(Math.min(1000, most - granted)));
    const [status, value] = core.decode(reply.data) as [number, [number, number] | { message: string }];
    if (status !== 0) return { granted, blocks, refusal: (value as { message: string }).message };
    const [start, end] = value as [number, number];
    blocks.push([start, end]);
    granted += end - start;
  }
  return { granted, blocks, refusal: '' };
}

describe('what one member of a subtree can take from the rest of it', () => {
  let router: Router;
  before(() => {
    router = new Router();
  });
  after(() => router.shutdown());

  test('an isolated call that asks for every context ID it can leaves its context IDs of its own: isolated calls and starts via it go on', async () => {
    const context = await router.local({ name: 'isolating' });
    const { granted, refusal } = await context.callWith({ isolate: true }, drainIds, 2 ** 21);
    assert.ok(granted <= 0.75 * 2 ** 20, `the isolated call was granted ${granted} IDs`);
    assert.match(refusal, /and the contexts it started have used their share of \d+ context IDs/);
    // The context's own refill, as it asks when its block runs low.
    const own = await context.call(drainIds, 1000);
    assert.deepEqual([own.granted, own.refusal], [1000, '']);
    assert.equal(await context.callWith({ isolate: true }, () => 'isolated again'), 'isolated again');
    const child = await router.local({ name: 'started-after', via: context });
    assert.equal(await child.call(() => 'started'), 'started');
    await context.shutdown();
  });

  test('a grandchild announcing as many routes as a stream may take leaves its parent routes of its own: a start via the parent goes on', async () => {
    const parent = await router.local({ name: 'announcing-parent' });
    const grandchild = await router.local({ name: 'announcing-grandchild', via: parent });
    const refused = collect(router, 'bad-route');
    assert.equal((await grandchild.call(claimIds, 65_536)).length, 65_536);
    assert.ok(refused.length > 0, 'the master refused some');
    const child = await router.local({ name: 'started-after-routes', via: parent });
    assert.equal(await child.call(() => 'started'), 'started');
    await parent.shutdown();
  });
});
