import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { type Context, ContextDisconnectedError, type LogRecord, ProtocolError, Router } from 'tendril';
import { ADD_ROUTE, ALLOCATE_ID, DEL_ROUTE, encode, FORWARD_LOG, ROUTE_PRESSURE } from '#dist/internal.js';
import { frameBytes, writeBytes } from './support/frames.js';
import { claimIds, forgeConnectReplies } from './support/hostile.js';
import { switchOf } from './support/internals.js';
import { waitFor } from './support/procs.js';
import { collectWarnings } from './support/warnings.js';

/**
 * Authority checked per sender, not per stream: every context behind one
 * child of the master reaches it through the same stream, so a check that
 * the IDs a request names are "behind that stream" lets a grandchild speak
 * for its parent and its siblings. Each test plays that grandchild (or an
 * isolated call's interpreter) writing raw frames on its own stream.
 */

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
      const refused = collectWarnings(router, 'bad-route');
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
    const refused = collectWarnings(router, 'bad-route');
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
    const refused = collectWarnings(router, 'bad-route');
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
    const refused = collectWarnings(router, 'bad-route');
    await attacker.call(
      writeBytes,
      frameBytes({ dst: 0, src: attacker.id, handle: ROUTE_PRESSURE }, encode([sibling.id, 1])),
    );
    await attacker.call(() => null);
    assert.equal(await sibling.callWith({ timeout: 5000 }, () => 'not held'), 'not held');
    assert.equal(refused.length, 1, 'refused once');
  });

  test('an ADD_ROUTE renaming its sibling, sent straight to the master, is refused', async () => {
    const refused = collectWarnings(router, 'bad-route');
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

  test('an isolated call gets no context IDs at all: its interpreter is a leaf', async () => {
    const context = await router.local({ name: 'isolating' });
    const { granted, refusal } = await context.callWith({ isolate: true }, drainIds, 2 ** 21);
    assert.equal(granted, 0);
    assert.match(refusal, /was started to run an isolated call, which starts no contexts/);
    // Its interpreter got no block either: each isolated call costs its context one ID.
    const left = await context.callWith({ isolate: true }, () => {
      const core = require('tendril:core') as { contextRuntime(): { ids: { size: number } } };
      return core.contextRuntime().ids.size;
    });
    assert.equal(left, 0);
    await context.shutdown();
  });

  test('a context started via another that asks for every context ID it can leaves its parent IDs of its own: isolated calls and starts via the parent go on', async () => {
    const context = await router.local({ name: 'drained-parent' });
    const member = await router.local({ name: 'draining-member', via: context });
    const { granted, refusal } = await member.call(drainIds, 2 ** 21);
    assert.ok(granted <= 0.75 * 2 ** 20, `the member was granted ${granted} IDs`);
    assert.match(refusal, /have used the \d+ context IDs they may have together/);
    // The parent's own refill, as it asks when its block runs low.
    const own = await context.call(drainIds, 1000);
    assert.deepEqual([own.granted, own.refusal], [1000, '']);
    assert.equal(await context.callWith({ isolate: true }, () => 'isolated'), 'isolated');
    const child = await router.local({ name: 'started-after', via: context });
    assert.equal(await child.call(() => 'started'), 'started');
    await context.shutdown();
  });

  test('a child asking for one context ID at a time makes the master keep a bounded number of grants', async () => {
    const context = await router.local({ name: 'one-at-a-time' });
    // Each grant costs the master about 64 bytes, and its share at least 64 IDs: 2^20 / 64 grants at most.
    const granted = await context.call(async () => {
      const core = require('tendril:core') as {
        contextRuntime(): {
          router: { request(dst: number, handle: number, payload: Uint8Array): Promise<{ data: Uint8Array }> };
        };
        encode(value: unknown): Uint8Array;
        decode(bytes: Uint8Array): unknown;
        ALLOCATE_ID: number;
      };
      const own = core.contextRuntime().router;
      let grants = 0;
      for (; grants < 20_000; grants++) {
        const reply = await own.request(0, core.ALLOCATE_ID, core.encode(1));
        if ((core.decode(reply.data) as [number])[0] !== 0) break;
      }
      return grants;
    });
    assert.ok(granted <= 2 ** 20 / 64, `${granted} grants of one ID`);
    await context.shutdown();
  });

  test('a grandchild announcing as many routes as a stream may take leaves its parent routes of its own: a start via the parent goes on', async () => {
    const parent = await router.local({ name: 'announcing-parent' });
    const grandchild = await router.local({ name: 'announcing-grandchild', via: parent });
    const refused = collectWarnings(router, 'bad-route');
    assert.equal((await grandchild.call(claimIds, 65_536)).length, 65_536);
    assert.ok(refused.length > 0, 'the master refused some');
    const child = await router.local({ name: 'started-after-routes', via: parent });
    assert.equal(await child.call(() => 'started'), 'started');
    await parent.shutdown();
  });
});

/**
 * Shipped (self-contained): announces to this context's parent the route
 * requests `requests` ([handle, payload] each, as this context sends
 * them), then makes a round trip to the master behind them.
 */
async function announce(requests: [number, unknown[]][], ALLOCATE_ID: number): Promise<void> {
  const core = require('tendril:core') as {
    contextRuntime(): {
      router: {
        id: number;
        parentId: number;
        send(message: unknown): void;
        request(dst: number, handle: number, payload: Uint8Array): Promise<unknown>;
      };
    };
    encode(value: unknown): Uint8Array;
    Message: { encoded(header: object, value: unknown): unknown };
  };
  const router = core.contextRuntime().router;
  for (const [handle, payload] of requests) {
    router.send(
      core.Message.encoded({ dst: router.parentId, src: router.id, auth: router.id, handle, replyTo: 0 }, payload),
    );
  }
  await router.request(0, ALLOCATE_ID, core.encode(1));
}

describe('what a grandchild can do with IDs, names and cycles', () => {
  let router: Router;
  const lines: LogRecord[] = [];
  before(() => {
    router = new Router({ maxHeldBytes: 8 * 1024 * 1024 });
    router.on('log', (record) => lines.push(record));
  });
  after(() => router.shutdown());

  test("a departed sibling's ID, announced again, takes none of the calls still meant for the sibling", async () => {
    const parent = await router.local({ name: 'ids-parent' });
    const attacker = await router.local({ name: 'ids-attacker', via: parent });
    const sibling = await router.local({ name: 'ids-sibling', via: parent });
    // The attacker answers any call routed to it for another context.
    await attacker.call(() => {
      const core = require('tendril:core') as {
        CALL_FUNCTION: number;
        contextRuntime(): {
          router: {
            id: number;
            route(message: { dst: number; src: number; handle: number; replyTo: number }, from: unknown): void;
            send(message: unknown): void;
          };
        };
        Message: { encoded(header: object, value: unknown): unknown };
      };
      const own = core.contextRuntime().router;
      const route = own.route;
      own.route = function (message, from) {
        if (message.dst !== own.id && message.handle === core.CALL_FUNCTION) {
          const header = { dst: message.src, src: message.dst, auth: own.id, handle: message.replyTo, replyTo: 0 };
          return own.send(core.Message.encoded(header, [0, 'a forged result']));
        }
        return route.call(this, message, from);
      };
    });
    await sibling.shutdown();
    await attacker.call(announce, [[ADD_ROUTE, [sibling.id, 'ids-sibling', attacker.id]]], ALLOCATE_ID);
    await assert.rejects(
      sibling.callWith({ timeout: 5000 }, (secret: string) => secret, 'a secret'),
      ContextDisconnectedError,
    );
    await parent.shutdown();
  });

  test("a grandchild announcing its parent's next IDs cannot take them: starts via the parent go on", async () => {
    const parent = await router.local({ name: 'squatted-parent' });
    const attacker = await router.local({ name: 'squatter', via: parent });
    const refused = collectWarnings(router, 'bad-route');
    const squat = [1, 2, 3, 4, 5].map((n): [number, unknown[]] => [ADD_ROUTE, [attacker.id + n, 'web1', attacker.id]]);
    await attacker.call(announce, squat, ALLOCATE_ID);
    const started = await router.local({ name: 'after-the-squat', via: parent });
    assert.equal(await started.call(() => 'started'), 'started');
    assert.equal(await parent.callWith({ isolate: true }, () => 'isolated'), 'isolated');
    assert.deepEqual(refused, [], 'the parent refused the squat itself; nothing reached the master');
    await parent.shutdown();
  });

  test('a route cycle (a context announced again under its own child) is refused, and gets no share of its own', async () => {
    const parent = await router.local({ name: 'cycle-parent' });
    const attacker = await router.local({ name: 'cycler', via: parent });
    const [x, y] = await attacker.call(claimIds, 2);
    const warned = collectWarnings(router, 'bad-route');
    const parentWarnings: string[] = [];
    router.on('log', (record) => record.contextName === 'cycle-parent' && parentWarnings.push(record.text));
    await attacker.call(
      announce,
      [
        [DEL_ROUTE, [x, 'gone']],
        [ADD_ROUTE, [x, 'again', y]],
      ],
      ALLOCATE_ID,
    );
    assert.deepEqual(warned, [], 'the parent refused it: nothing reached the master');
    // Refused as an ID that went away (IDs never come back), before its parent's chain is looked at.
    const refusal = new RegExp(`refused ADD_ROUTE for context ${x} from stream cycler`);
    await waitFor(() => parentWarnings.some((text) => refusal.test(text)));
    assert.equal(switchOf(router).routeOf(x), undefined, 'x is gone, and not back under y');
    await parent.shutdown();
  });

  test('a child announcing IDs the master has not handed out yet takes none of them from the sibling they go to', async () => {
    const parent = await router.local({ name: 'future-parent' });
    const squatter = await router.local({ name: 'future-squatter', via: parent });
    const honest = await router.local({ name: 'future-honest', via: parent });
    // The IDs right after the master's latest grant: they go to whoever asks next.
    const [latest] = await squatter.call(claimIds, 1);
    const future = Array.from({ length: 3000 }, (_, n) => (latest as number) + 1 + n);
    await squatter.call(
      announce,
      future.map((id): [number, unknown[]] => [ADD_ROUTE, [id, 'x', squatter.id]]),
      ALLOCATE_ID,
    );
    // The honest child asks next, and announces what it got, as it would the contexts it starts.
    const got = await honest.call(claimIds, 3000);
    assert.ok(
      got.some((id) => future.includes(id)),
      'the honest child was granted IDs the squatter had announced',
    );
    const unrouted = got.filter((id) => switchOf(router).routeOf(id) === undefined);
    assert.deepEqual(unrouted.slice(0, 5), [], `${unrouted.length} of its ${got.length} IDs could not be announced`);
    await parent.shutdown();
  });

  test('a fake child named like another with an invisible character added prints with it escaped', async () => {
    const parent = await router.local({ name: 'invisible-parent' });
    const attacker = await router.local({ name: 'invisible-namer', via: parent });
    const fakes = await attacker.call(claimIds, 3);
    const names = ['db\u200d', 'db\u034f', 'db\ufe00'];
    await attacker.call(
      announce,
      names.map((name, i): [number, unknown[]] => [ADD_ROUTE, [fakes[i], name, attacker.id]]),
      ALLOCATE_ID,
    );
    assert.deepEqual(
      fakes.map((id) => switchOf(router).nameOf(id)),
      ['db\\u200d', 'db\\u034f', 'db\\ufe00'],
    );
    await parent.shutdown();
  });

  test('a fake child named like a sibling has its lines printed under a name of its own', async () => {
    const parent = await router.local({ name: 'named-parent' });
    const attacker = await router.local({ name: 'namer', via: parent });
    await router.local({ name: 'named-sibling', via: parent });
    const [fake] = await attacker.call(claimIds, 1);
    await attacker.call(announce, [[ADD_ROUTE, [fake, 'named-sibling', attacker.id]]], ALLOCATE_ID);
    assert.equal(switchOf(router).nameOf(fake as number), `named-sibling#${fake}`);
    await parent.shutdown();
  });
});
