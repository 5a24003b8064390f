import assert from 'node:assert/strict';
import { EventEmitter } from 'node:events';
import { after, before, describe, test } from 'node:test';
import {
  CallError,
  Channel,
  type Context,
  InvalidOptionError,
  ProtocolError,
  Router,
  type RouterWarning,
  type Sender,
  ServiceError,
  type ServiceOptions,
  TimeoutError,
} from 'tendril';
import { thisContext } from 'tendril/child';
import { CALL_SERVICE_HANDLE, encode, HEADER_SIZE, ITEM_OVERHEAD } from '#dist/internal.js';
import { frameBytes, writeBytes } from './support/frames.js';
import { heldAfterGc, MiB, mib } from './support/heap.js';
import { switchOf } from './support/internals.js';
import { NODE_MAJORS, nodeBinary } from './support/nodes.js';
import { waitFor } from './support/procs.js';

type Tendril = typeof import('tendril');
type Child = typeof import('tendril/child');

/** Asserts `promise` rejects with a ServiceError of `code` whose message matches every pattern. */
async function rejectsService(promise: Promise<unknown>, code: string, ...patterns: RegExp[]): Promise<ServiceError> {
  let caught: unknown;
  await assert.rejects(promise, (error: unknown) => {
    caught = error;
    return true;
  });
  assert.ok(caught instanceof ServiceError, `expected a ServiceError, got ${(caught as Error)?.stack ?? caught}`);
  assert.equal(caught.code, code, caught.message);
  for (const pattern of patterns) assert.match(caught.message, pattern);
  return caught;
}

/**
 * Counts the service calls that reach `router`'s registry (registered
 * before, so it is installed): a test waits for all of them to arrive
 * before looking at queues, instead of guessing how long that takes.
 */
function countArrivals(router: Router): () => number {
  const core = switchOf(router);
  const dispatch = core.serviceDispatcher;
  assert.ok(dispatch, 'a service is registered');
  let arrived = 0;
  core.serviceDispatcher = (request, message) => {
    arrived++;
    return dispatch(request, message);
  };
  return () => arrived;
}

/** A promise and the function that resolves it. */
function gate(): { promise: Promise<void>; open: () => void } {
  let open = () => {};
  const promise = new Promise<void>((resolve) => {
    open = resolve;
  });
  return { promise, open };
}

/**
 * Registers `name` in `router` with one method, `take(value)`, that waits
 * until `open()` and then answers with the value's length (a number, itself).
 */
function gatedTaker(router: Router, name: string, options: ServiceOptions): { open: () => void; ran: () => number } {
  const release = gate();
  let ran = 0;
  router.registerService(
    name,
    {
      async take(value: number | { length: number }) {
        await release.promise;
        ran++;
        return typeof value === 'number' ? value : value.length;
      },
    },
    options,
  );
  return { open: release.open, ran: () => ran };
}

describe('services in the master', { timeout: 120_000 }, () => {
  let router: Router;
  let child: Context;
  let stranger: Context;
  const warnings: RouterWarning[] = [];
  before(async () => {
    router = new Router();
    router.on('warning', (warning) => warnings.push(warning));
    [child, stranger] = await Promise.all([router.local({ name: 'trusted' }), router.local({ name: 'stranger' })]);
  });
  after(() => router.shutdown());

  test("policy 'any' admits a child; the default ('parents') refuses it, naming the service, the caller and the context", async () => {
    const OPEN = router.registerService('open', { add: (a: number, b: number) => a + b }, { policy: 'any' });
    const CLOSED = router.registerService('closed', { secret: () => 42 });
    const results = await child.call(
      async (open: string, closed: string) => {
        const master = (require('tendril/child') as Child).thisContext().master;
        const sum = await master.callService(open, 'add', 1, 2);
        try {
          await master.callService(closed, 'secret');
          return { sum, refused: undefined };
        } catch (error) {
          const e = error as InstanceType<Tendril['ServiceError']>;
          return {
            sum,
            refused: {
              isServiceError: e instanceof (require('tendril') as Tendril).ServiceError,
              code: e.code,
              message: e.message,
              service: e.service,
              caller: e.caller,
              callerId: e.callerId,
            },
          };
        }
      },
      OPEN,
      CLOSED,
    );
    assert.equal(results.sum, 3);
    assert.deepEqual(results.refused, {
      isServiceError: true,
      code: 'ERR_TENDRIL_SERVICE_REFUSED',
      message: results.refused?.message,
      service: 'closed',
      caller: 'trusted',
      callerId: child.id,
    });
    assert.match(
      String(results.refused?.message),
      new RegExp(
        `call to secret\\(\\) of service 'closed' in context 'master' refused by policy: it does not admit context 'trusted' \\(id ${child.id}\\)`,
      ),
    );
    assert.ok(warnings.some((w) => w.code === 'policy' && /service 'closed' from context 'trusted'/.test(w.message)));
  });

  test('a predicate admits callers by name, sees their ID and authority, and refuses when it throws', async () => {
    const seen: unknown[] = [];
    router.registerService(
      'by-name',
      { whoami: () => 'admitted' },
      {
        policy: (caller) => {
          seen.push({ ...caller });
          return caller.name === 'trusted';
        },
      },
    );
    router.registerService(
      'throwing-policy',
      { whoami: () => 'admitted' },
      {
        policy: () => {
          throw new Error('policy bug');
        },
      },
    );
    const ask = (name: string) =>
      (require('tendril/child') as Child).thisContext().master.callService(name, 'whoami') as Promise<string>;
    assert.equal(await child.call(ask, 'by-name'), 'admitted');
    assert.deepEqual(seen, [{ id: child.id, name: 'trusted', authId: child.id }]);
    await assert.rejects(stranger.call(ask, 'by-name'), (error: unknown) => {
      assert.ok(error instanceof ServiceError);
      assert.equal(error.code, 'ERR_TENDRIL_SERVICE_REFUSED');
      assert.match(
        error.message,
        new RegExp(`refused by policy: it does not admit context 'stranger' \\(id ${stranger.id}\\)`),
      );
      return true;
    });
    await rejectsService(child.call(ask, 'throwing-policy'), 'ERR_TENDRIL_SERVICE_REFUSED', /refused by policy/);
    assert.ok(warnings.some((w) => w.code === 'policy' && /a service policy threw .*policy bug/.test(w.message)));
  });

  test('unknown services and methods: prototype names, constructor, private and accessor names are not methods', async () => {
    class Counter {
      count = 0;
      _secret() {
        return 'hidden';
      }
      get value() {
        return this.count;
      }
      increment(by: number) {
        this.count += by;
        return this.count;
      }
    }
    class Named extends Counter {
      name() {
        return 'named';
      }
    }
    const COUNTER = router.registerService('counter', new Named(), { policy: 'any' });
    assert.equal(
      await child.call(
        (n: string) => (require('tendril/child') as Child).thisContext().master.callService(n, 'increment', 2),
        COUNTER,
      ),
      2,
    );
    assert.equal(
      await child.call(
        (n: string) => (require('tendril/child') as Child).thisContext().master.callService(n, 'name'),
        COUNTER,
      ),
      'named',
    );
    const callMaster = (service: string, method: string) =>
      (require('tendril/child') as Child).thisContext().master.callService(service, method);
    for (const method of [
      '__proto__',
      'constructor',
      'toString',
      'hasOwnProperty',
      'valueOf',
      '_secret',
      'value',
      'count',
      '',
    ]) {
      await rejectsService(
        child.call(callMaster, 'counter', method),
        'ERR_TENDRIL_SERVICE_METHOD',
        new RegExp(
          `service 'counter' in context 'master' has no method '${method.replace(/[_$]/g, '\\$&')}'; its methods are increment, name`,
        ),
      );
    }
    await rejectsService(
      child.call(callMaster, 'no-such-service', 'x'),
      'ERR_TENDRIL_SERVICE_UNKNOWN',
      new RegExp(
        `context 'master' offers no service 'no-such-service' \\(called by context 'trusted' \\(id ${child.id}\\)\\)`,
      ),
    );
    // A context where no service was ever registered answers from the core.
    await rejectsService(
      child.callService('anything', 'x'),
      'ERR_TENDRIL_SERVICE_UNKNOWN',
      /context 'trusted' offers no service 'anything'/,
    );
    assert.equal(
      await child.call(
        (n: string) => (require('tendril/child') as Child).thisContext().master.callService(n, 'increment', 1),
        COUNTER,
      ),
      3,
    );
  });

  test('validate refuses bad arguments naming the method and the reason; a throwing method leaves the service answering', async () => {
    router.registerService(
      'checked',
      {
        square: (n: number) => n * n,
        fail: (why: string) => {
          throw new RangeError(`failed: ${why}`);
        },
      },
      {
        policy: 'any',
        validate: {
          square: (args) => {
            if (args.length !== 1 || typeof args[0] !== 'number') throw new TypeError('expected one number');
          },
        },
      },
    );
    const call = (method: string, args: unknown[]) =>
      (require('tendril/child') as Child).thisContext().master.callService('checked', method, ...args);
    await rejectsService(
      child.call(call, 'square', ['seven']),
      'ERR_TENDRIL_SERVICE_ARGUMENTS',
      /bad arguments to square\(\) of service 'checked' in context 'master': expected one number/,
    );
    assert.equal(await child.call(call, 'square', [7]), 49);
    await assert.rejects(child.call(call, 'fail', ['on purpose']), (error: unknown) => {
      assert.ok(error instanceof CallError, String(error));
      assert.equal(error.remoteName, 'RangeError');
      assert.match(error.remoteMessage, /failed: on purpose/);
      return true;
    });
    assert.equal(await child.call(call, 'square', [8]), 64);
  });

  test('concurrency 2: of 10 calls at most 2 run at once, the others wait their turn', async () => {
    let running = 0;
    let most = 0;
    const gates: (() => void)[] = [];
    const SLOW = router.registerService(
      'two-at-a-time',
      {
        async work(n: number) {
          running++;
          most = Math.max(most, running);
          await new Promise<void>((resolve) => gates.push(resolve));
          running--;
          return n;
        },
      },
      { policy: 'any', concurrency: 2 },
    );
    const arrived = countArrivals(router);
    const done = child.call((name: string) => {
      const master = (require('tendril/child') as Child).thisContext().master;
      return Promise.all(Array.from({ length: 10 }, (_, i) => master.callService(name, 'work', i)));
    }, SLOW);
    await waitFor(() => arrived() === 10);
    assert.equal(running, 2);
    for (let released = 0; released < 10; released++) {
      await waitFor(() => gates.length > 0);
      assert.ok(running <= 2, `${running} calls run at once`);
      (gates.shift() as () => void)();
    }
    assert.deepEqual(await done, [0, 1, 2, 3, 4, 5, 6, 7, 8, 9]);
    assert.equal(most, 2);
  });

  test('past maxQueued waiting calls, a call is refused as busy; the queued ones still run', async () => {
    const release = gate();
    let started = 0;
    router.registerService(
      'busy',
      {
        async work(n: number) {
          started++;
          await release.promise;
          return n;
        },
      },
      { policy: 'any', concurrency: 4, maxQueued: 4 },
    );
    const arrived = countArrivals(router);
    const outcomes = child.call(async () => {
      const master = (require('tendril/child') as Child).thisContext().master;
      const calls = [0, 1, 2, 3, 4, 5, 6, 7, 8].map((n) => master.callService('busy', 'work', n));
      const settled = await Promise.allSettled(calls);
      return settled.map((s) => (s.status === 'fulfilled' ? s.value : (s.reason as { code: string }).code));
    });
    await waitFor(() => arrived() === 9);
    assert.equal(started, 4);
    release.open();
    // Four run, and of the four that may wait, one caller may take three (its share): the rest are busy.
    const busy = 'ERR_TENDRIL_SERVICE_BUSY';
    assert.deepEqual(await outcomes, [0, 1, 2, 3, 4, 5, 6, busy, busy]);
  });

  test("one caller filling a service's queue leaves room in it for another", async () => {
    const release = gate();
    router.registerService(
      'shared-queue',
      {
        async work(n: number) {
          await release.promise;
          return n;
        },
      },
      { policy: 'any', concurrency: 1, maxQueued: 100 },
    );
    const other = await router.local({ name: 'other-caller' });
    try {
      const arrived = countArrivals(router);
      const flooding = child.call(async () => {
        const master = (require('tendril/child') as Child).thisContext().master;
        const calls = Array.from({ length: 200 }, (_, n) => master.callService('shared-queue', 'work', n));
        const settled = await Promise.allSettled(calls);
        return settled.filter((s) => s.status === 'rejected').length;
      });
      await waitFor(() => arrived() === 200);
      const waiting = other.call(() =>
        (require('tendril/child') as Child).thisContext().master.callService('shared-queue', 'work', -1),
      );
      await waitFor(() => arrived() === 201);
      release.open();
      assert.equal(await waiting, -1, "the other caller's call waited its turn and ran");
      // One ran, 75 waited (its share of 100), 124 were refused.
      assert.equal(await flooding, 124);
    } finally {
      router.unregisterService('shared-queue');
      await other.shutdown();
    }
  });

  test('past maxQueuedBytes of waiting arguments, a call is refused as busy', async () => {
    const release = gatedTaker(router, 'heavy', { policy: 'any', concurrency: 1, maxQueuedBytes: 1024 * 1024 });
    const arrived = countArrivals(router);
    const outcomes = child.call(async () => {
      const master = (require('tendril/child') as Child).thisContext().master;
      const chunk = Buffer.alloc(600 * 1024);
      const settled = await Promise.allSettled([0, 1, 2].map(() => master.callService('heavy', 'take', chunk)));
      return settled.map((s) => (s.status === 'fulfilled' ? s.value : (s.reason as { code: string }).code));
    });
    await waitFor(() => arrived() === 3);
    release.open();
    // One runs, one waits (600 KiB), the third would make 1.2 MiB wait.
    assert.deepEqual(await outcomes, [600 * 1024, 600 * 1024, 'ERR_TENDRIL_SERVICE_BUSY']);
    router.unregisterService('heavy');
  });

  test("waiting calls are charged to the caller's account: past its maxHeldBytes a call is refused as busy, saying so", async () => {
    const small = new Router({ maxHeldBytes: 1024 * 1024 });
    try {
      const caller = await small.local({ name: 'thrifty' });
      const release = gatedTaker(small, 'heavy', { policy: 'any', concurrency: 1 });
      const arrived = countArrivals(small);
      const outcomes = caller.call(async () => {
        const master = (require('tendril/child') as Child).thisContext().master;
        const chunk = Buffer.alloc(300 * 1024);
        const settled = await Promise.allSettled([0, 1, 2, 3, 4].map(() => master.callService('heavy', 'take', chunk)));
        return settled.map((s) =>
          s.status === 'fulfilled' ? s.value : `${(s.reason as { code: string }).code}: ${(s.reason as Error).message}`,
        );
      });
      await waitFor(() => arrived() === 5);
      // One runs; three wait (900 KiB and their overhead); the fifth would pass 1 MiB.
      const charged = switchOf(small).holdings.snapshot().get(caller.id) ?? 0;
      assert.ok(charged > 3 * (300 * 1024 + ITEM_OVERHEAD) && charged < 1024 * 1024, `${charged} bytes charged`);
      release.open();
      const settled = await outcomes;
      assert.deepEqual(settled.slice(0, 4), new Array(4).fill(300 * 1024));
      assert.match(
        String(settled[4]),
        /^ERR_TENDRIL_SERVICE_BUSY: service 'heavy' in context 'master' is busy, and context 'thrifty' \(id \d+\) and the contexts behind it already make 'master' hold \d+ bytes \(its maxHeldBytes is 1048576\)/,
      );
      assert.equal(switchOf(small).holdings.snapshot().get(caller.id) ?? 0, 0);
    } finally {
      await small.shutdown();
    }
  });

  test("an event emitter's or a built-in's inherited methods are never exposed", async () => {
    class Notifier extends EventEmitter {
      notify(text: string) {
        return `notified: ${text}`;
      }
    }
    const notifier = new Notifier();
    notifier.on('error', () => {});
    router.registerService('notifier', notifier, { policy: 'any' });
    try {
      const outcomes = await child.call(async () => {
        const master = (require('tendril/child') as Child).thisContext().master;
        const settled = await Promise.allSettled(
          ['notify', 'emit', 'removeAllListeners', 'on', 'setMaxListeners'].map((method) =>
            master.callService('notifier', method, 'x'),
          ),
        );
        return settled.map((s) => (s.status === 'fulfilled' ? s.value : (s.reason as { code: string }).code));
      });
      assert.deepEqual(outcomes, [
        'notified: x',
        'ERR_TENDRIL_SERVICE_METHOD',
        'ERR_TENDRIL_SERVICE_METHOD',
        'ERR_TENDRIL_SERVICE_METHOD',
        'ERR_TENDRIL_SERVICE_METHOD',
      ]);
      assert.equal(notifier.listenerCount('error'), 1, 'the service kept its listeners');
    } finally {
      router.unregisterService('notifier');
    }
  });

  test('registration is checked: a taken name, bad options; unregistering makes a service unknown', async () => {
    router.registerService('taken', { f: () => 1 });
    assert.throws(
      () => router.registerService('taken', { f: () => 2 }),
      /a service named 'taken' is already registered in context 'master'/,
    );
    assert.throws(() => router.registerService('bad', { f: () => 1 }, { concurrency: 0 }), InvalidOptionError);
    assert.throws(() => router.registerService('bad', { f: () => 1 }, { maxQueued: -1 }), InvalidOptionError);
    assert.throws(
      () => router.registerService('bad', { f: () => 1 }, { policy: 'everyone' as 'any' }),
      (error: unknown) => error instanceof InvalidOptionError && error.option === 'policy',
    );
    assert.throws(
      () => router.registerService('bad', { f: () => 1 }, { validate: { g: () => {} } as never }),
      (error: unknown) => error instanceof InvalidOptionError && error.option === 'validate.g',
    );
    assert.throws(() => router.registerService('', { f: () => 1 }), InvalidOptionError);
    assert.throws(() => router.registerService('null', null as unknown as object), InvalidOptionError);
    assert.equal(router.unregisterService('taken'), true);
    assert.equal(router.unregisterService('taken'), false);
    router.registerService('taken', { f: () => 3 }, { policy: 'any' });
    assert.equal(
      await child.call(() => (require('tendril/child') as Child).thisContext().master.callService('taken', 'f')),
      3,
    );
    router.unregisterService('taken');
    await rejectsService(
      child.call(() => (require('tendril/child') as Child).thisContext().master.callService('taken', 'f')),
      'ERR_TENDRIL_SERVICE_UNKNOWN',
    );
  });

  test('thisContext() in the master says to use the Router', () => {
    assert.throws(() => thisContext(), /in the master, call registerService on the Router you created/);
  });
});

describe('services in a child', { timeout: 120_000 }, () => {
  let router: Router;
  let parent: Context;
  let sibling: Context;
  let grandchild: Context;
  before(async () => {
    router = new Router();
    [parent, sibling] = await Promise.all([router.local({ name: 'parent' }), router.local({ name: 'sibling' })]);
    await parent.call(() => {
      const here = (require('tendril/child') as Child).thisContext();
      here.registerService('family', { hello: (who: string) => `hello ${who} from ${here.name}` });
      here.registerService('peer', { hello: (who: string) => `hi ${who}` }, { policy: 'any' });
    });
    grandchild = await router.local({ name: 'grandchild', via: parent });
  });
  after(() => router.shutdown());

  test("the master, an ancestor, is admitted by the default policy; the context's own children are not", async () => {
    assert.equal(await parent.callService('family', 'hello', 'master'), 'hello master from parent');
    const refused = await rejectsService(
      grandchild.call(() =>
        (require('tendril/child') as Child).thisContext().parent.callService('family', 'hello', 'g'),
      ),
      'ERR_TENDRIL_SERVICE_REFUSED',
      new RegExp(
        `service 'family' in context 'parent' refused by policy: it does not admit context 'grandchild' \\(id ${grandchild.id}\\)`,
      ),
    );
    assert.equal(refused.contextName, 'parent');
    assert.equal(refused.callerId, grandchild.id);
  });

  test("a grandchild calls its parent's service, and sees its parent and the master", async () => {
    const seen = await grandchild.call(async () => {
      const here = (require('tendril/child') as Child).thisContext();
      return {
        id: here.id,
        name: here.name,
        parent: [here.parent.id, here.parent.name, here.parent.parentId],
        master: [here.master.id, here.master.name],
        answer: await here.parent.callService('peer', 'hello', here.name),
      };
    });
    assert.deepEqual(seen, {
      id: grandchild.id,
      name: 'grandchild',
      parent: [parent.id, 'parent', 0],
      master: [0, 'master'],
      answer: 'hi grandchild',
    });
  });

  test("a sibling reaches a policy-'any' service through the master, and is refused by a 'parents' one", async () => {
    const call = async (id: number, service: string) => {
      const core = require('tendril:core') as typeof import('#dist/core/index.js');
      const here = core.thisContext();
      // The sibling's own handle on the other child: messages to it go up to the master, which routes them down.
      const other = new core.Context(core.contextRuntime().router, id, 'parent', 0, here.master.info);
      return other.callService(service, 'hello', here.name);
    };
    assert.equal(await sibling.call(call, parent.id, 'peer'), 'hi sibling');
    await rejectsService(
      sibling.call(call, parent.id, 'family'),
      'ERR_TENDRIL_SERVICE_REFUSED',
      new RegExp(`it does not admit context ${sibling.id};`),
    );
  });

  // Bounded: without the closing, the loops below would wait for ever.
  test("a child's service answers calls with a Sender, and the Sender closes when the call settles, refused or not", {
    timeout: 30_000,
  }, async () => {
    await parent.call(() => {
      (require('tendril/child') as Child).thisContext().registerService(
        'streamer',
        {
          async count(out: Sender<number>, to: number) {
            for (let i = 1; i <= to; i++) await out.send(i);
            return 'counted';
          },
        },
        { policy: (caller) => caller.id === 0 },
      );
    });
    const numbers = router.receiver<number>();
    const result = parent.callService('streamer', 'count', numbers.toSender(), 3);
    const got: number[] = [];
    for await (const n of numbers) got.push(n);
    assert.deepEqual(got, [1, 2, 3]);
    assert.equal(await result, 'counted');
    const unread = router.receiver<number>();
    const refused = grandchild.call(async (out: Sender<number>) => {
      try {
        await (require('tendril/child') as Child).thisContext().parent.callService('streamer', 'count', out, 3);
      } catch (error) {
        return (error as { code: string }).code;
      }
    }, unread.toSender());
    const left: number[] = [];
    for await (const n of unread) left.push(n);
    assert.deepEqual(left, []);
    assert.equal(await refused, 'ERR_TENDRIL_SERVICE_REFUSED');
  });

  test('a call that waited for its turn gets the Senders and Channels it was sent with, closed when it settles', {
    timeout: 30_000,
  }, async () => {
    await parent.call(() => {
      (require('tendril/child') as Child).thisContext().registerService(
        'turns',
        {
          async hold(gate: Channel<never, unknown>) {
            await gate.get();
            return 'held';
          },
          async count(out: Sender<number>, to: number) {
            for (let i = 1; i <= to; i++) await out.send(i);
            return 'counted';
          },
          async shout(line: Channel<string, string>) {
            for await (const text of line) await line.send(text.toUpperCase());
            return 'shouted';
          },
        },
        { policy: (caller) => caller.id === 0, concurrency: 1 },
      );
    });
    const gate = new Channel<unknown, never>(router);
    const held = parent.callService('turns', 'hold', gate.otherEnd());
    const numbers = router.receiver<number>();
    const counted = parent.callService('turns', 'count', numbers.toSender(), 3);
    const line = new Channel<string, string>(router);
    const shouted = parent.callService('turns', 'shout', line.otherEnd());
    // Both wait behind hold(), their arguments held as bytes, until the gate opens.
    const sent = line.send('hello');
    line.close();
    await gate.send('go');
    await sent;
    assert.equal(await held, 'held');
    const got: number[] = [];
    for await (const n of numbers) got.push(n);
    assert.deepEqual(got, [1, 2, 3]);
    assert.equal(await counted, 'counted');
    const answers: string[] = [];
    for await (const text of line) answers.push(text);
    assert.deepEqual(answers, ['HELLO']);
    assert.equal(await shouted, 'shouted');
  });

  test('typed proxies, per-call timeouts, unregistering in a child', async () => {
    const NAME = await parent.call(() =>
      (require('tendril/child') as Child).thisContext().registerService('slow', {
        never: () => new Promise(() => {}),
        echo: (value: unknown) => value,
      }),
    );
    const slow = parent.service(NAME);
    assert.deepEqual(await slow.echo({ a: [1, 2n] }), { a: [1, 2n] });
    assert.equal((slow as unknown as { then?: unknown }).then, undefined);
    await assert.rejects(parent.callServiceWith({ timeout: 50 }, 'slow', 'never'), TimeoutError);
    await assert.rejects(
      parent.callServiceWith({ timeout: -1 }, 'slow', 'never'),
      (error: unknown) => error instanceof InvalidOptionError && error.option === 'timeout',
    );
    assert.equal(
      await parent.call(() => (require('tendril/child') as Child).thisContext().unregisterService('slow')),
      true,
    );
    await rejectsService(slow.echo(1), 'ERR_TENDRIL_SERVICE_UNKNOWN', /context 'parent' offers no service 'slow'/);
  });
});

describe('a hostile child calling services by hand', { timeout: 120_000 }, () => {
  let router: Router;
  let hostile: Context;
  let friend: Context;
  before(async () => {
    router = new Router();
    [hostile, friend] = await Promise.all([router.local({ name: 'hostile' }), router.local({ name: 'friend' })]);
    router.registerService('echo', { echo: (value: unknown) => value }, { policy: 'any' });
  });
  after(() => router.shutdown());

  /** Shipped: sends each payload to CALL_TOOLKIT in the master and returns each reply's status, error name and message. */
  async function sendRaw(handle: number, payloads: { value?: unknown; raw?: Uint8Array }[]) {
    const core = require('tendril') as Tendril & {
      contextRuntime(): {
        router: {
          id: number;
          request(dst: number, handle: number, data: Uint8Array, o: object): Promise<{ data: Uint8Array }>;
        };
      };
      encode(value: unknown): Uint8Array;
      decode(data: Uint8Array): unknown;
    };
    const { router } = core.contextRuntime();
    const answers: unknown[] = [];
    for (const payload of payloads) {
      const data = payload.raw ? payload.raw : core.encode(payload.value);
      const reply = await router.request(0, handle, data, { timeout: 10_000 });
      const [status, body] = core.decode(reply.data) as [number, { name: string; message: string }];
      answers.push(status === 0 ? [status, body] : [status, body.name, body.message]);
    }
    return answers;
  }

  test('malformed CALL_TOOLKIT payloads are answered with errors naming what was wrong; the master carries on', async () => {
    const payloads = [
      { value: 'not a request' },
      { value: [1, 2, 3] },
      { value: ['echo', 'echo'] },
      { value: ['echo', 'echo', 'not an array'] },
      { value: ['e'.repeat(300), 'echo', []] },
      { value: ['echo', 'm'.repeat(300), []] },
      { value: ['echo', 'echo', new Array(2000).fill(0)] },
      { value: ['echo', { toString: 'x' }, []] },
      { raw: new Uint8Array([0xc1]) },
      { value: ['echo', '__proto__', []] },
      { value: ['echo', 'echo', ['fine']] },
    ];
    const answers = (await hostile.call(sendRaw, CALL_SERVICE_HANDLE, payloads)) as unknown[][];
    const malformed = /^malformed CALL_TOOLKIT message from context 'hostile': /;
    assert.deepEqual(
      answers.slice(0, 8).map(([status, name]) => [status, name]),
      new Array(8).fill([1, ProtocolError.name]),
    );
    assert.match(String(answers[0]?.[2]), malformed);
    assert.match(String(answers[0]?.[2]), /request: expected an array of 3 items/);
    assert.match(String(answers[3]?.[2]), /args: expected the arguments as an array of at most 1024 items/);
    assert.match(String(answers[4]?.[2]), /service: longer than 256 characters/);
    assert.match(String(answers[5]?.[2]), /method: longer than 256 characters/);
    assert.match(String(answers[7]?.[2]), /method: expected a string/);
    assert.deepEqual(answers[8]?.slice(0, 2), [1, 'DecodeError']);
    assert.deepEqual(answers[9]?.slice(0, 2), [1, 'ServiceError']);
    assert.deepEqual(answers[10], [0, 'fine']);
    assert.equal(
      await friend.call(() =>
        (require('tendril/child') as Child).thisContext().master.callService('echo', 'echo', 'ok'),
      ),
      'ok',
    );
  });

  test('raw frames to CALL_TOOLKIT that expect no reply are reported, never answered, and cost the master nothing lasting', async () => {
    const reported: RouterWarning[] = [];
    router.on('warning', (warning) => warning.code === 'handler' && reported.push(warning));
    let echoed = 0;
    router.registerService('counted', { hit: () => ++echoed }, { policy: 'any' });
    const junk = frameBytes({ dst: 0, src: hostile.id, handle: CALL_SERVICE_HANDLE }, encode({ not: 'a request' }));
    const hits = frameBytes({ dst: 0, src: hostile.id, handle: CALL_SERVICE_HANDLE }, encode(['counted', 'hit', []]));
    await hostile.call(writeBytes, junk, 5000);
    await hostile.call(writeBytes, hits, 100);
    await waitFor(() => echoed === 100);
    assert.ok(
      reported.some((w) => /CALL_TOOLKIT from context \d+ failed: malformed CALL_TOOLKIT message/.test(w.message)),
    );
    assert.ok(reported.length < 5000, `${reported.length} warnings for 5000 frames: reported at a bounded rate`);
    assert.equal(
      await friend.call(() => (require('tendril/child') as Child).thisContext().master.callService('counted', 'hit')),
      101,
    );
  });

  test('a flood of calls to a busy service is refused past its queue, not queued without bound', async () => {
    const release = gate();
    router.registerService(
      'bottleneck',
      { wait: () => release.promise.then(() => 'done') },
      { policy: 'any', concurrency: 1, maxQueued: 10 },
    );
    const arrived = countArrivals(router);
    const flood = hostile.call(async () => {
      const master = (require('tendril/child') as Child).thisContext().master;
      const settled = await Promise.allSettled(
        Array.from({ length: 2000 }, () => master.callService('bottleneck', 'wait')),
      );
      const counts: Record<string, number> = {};
      for (const s of settled) {
        const key = s.status === 'fulfilled' ? String(s.value) : (s.reason as { code: string }).code;
        counts[key] = (counts[key] ?? 0) + 1;
      }
      return counts;
    });
    await waitFor(() => arrived() === 2000, 20_000);
    // The master still answers others while the flood waits.
    assert.equal(
      await friend.call(() => (require('tendril/child') as Child).thisContext().master.callService('echo', 'echo', 1)),
      1,
    );
    release.open();
    // One ran and seven waited: one caller may fill three quarters of a queue of 10.
    assert.deepEqual(await flood, { done: 8, ERR_TENDRIL_SERVICE_BUSY: 1992 });
  });

  test("a busy service's waiting calls are held encoded: many tiny objects cost the master about their bytes, charged to the caller", async (t) => {
    const release = gatedTaker(router, 'hoard', { policy: 'any', concurrency: 1 });
    const arrived = countArrivals(router);
    // 20,000 empty maps: 20 KB encoded, about 40 times that decoded.
    const frame = frameBytes(
      { dst: 0, src: hostile.id, handle: CALL_SERVICE_HANDLE },
      encode(['hoard', 'take', [Array.from({ length: 20_000 }, () => ({}))]]),
    );
    const calls = 400;
    const encoded = calls * frame.length;
    const before = heldAfterGc();
    await hostile.call(writeBytes, frame, calls);
    await waitFor(() => arrived() === calls, 60_000);
    const held = heldAfterGc() - before;
    t.diagnostic(`${mib(held)} held for ${mib(encoded)} of waiting arguments`);
    assert.ok(held < 2 * encoded + 16 * MiB, `${mib(held)} held for ${mib(encoded)} of waiting arguments`);
    // Each waiting call's bytes, and ITEM_OVERHEAD, are on the caller's account until its turn.
    const account = () => switchOf(router).holdings.snapshot().get(hostile.id) ?? 0;
    assert.ok(account() >= (calls - 1) * (frame.length - HEADER_SIZE + ITEM_OVERHEAD), `${account()} bytes charged`);
    release.open();
    await waitFor(() => release.ran() === calls, 60_000);
    assert.equal(account(), 0);
    router.unregisterService('hoard');
  });

  test('a waiting call holds its own bytes only, not the read buffer it arrived in', async (t) => {
    const release = gatedTaker(router, 'sparse', { policy: 'any', concurrency: 1 });
    const arrived = countArrivals(router);
    // Each small call rides with 60 KiB for a handle nobody listens on, so that it shares a read buffer with little else.
    const call = frameBytes({ dst: 0, src: hostile.id, handle: CALL_SERVICE_HANDLE }, encode(['sparse', 'take', [1]]));
    const filler = frameBytes({ dst: 0, src: hostile.id, handle: 999_999 }, Buffer.alloc(60 * 1024));
    // As many as one caller may have waiting: three quarters of the default maxQueued (1000).
    const calls = 750;
    const before = heldAfterGc();
    await hostile.call(writeBytes, Buffer.concat([call, filler]), calls);
    await waitFor(() => arrived() === calls, 60_000);
    const held = heldAfterGc() - before;
    t.diagnostic(`${mib(held)} held for ${calls} waiting calls of ${call.length} bytes`);
    assert.ok(held < 16 * MiB, `${mib(held)} held for ${calls} waiting calls of ${call.length} bytes`);
    release.open();
    await waitFor(() => release.ran() === calls, 60_000);
    router.unregisterService('sparse');
  });
});

// The oldest Node a child may run, and the newest: the registry and p-queue, bundled in tendril:toolkit, run there.
for (const major of [NODE_MAJORS[0], NODE_MAJORS[NODE_MAJORS.length - 1]]) {
  describe(`services on a Node ${major} child`, { timeout: 120_000 }, () => {
    let router: Router;
    before(() => {
      router = new Router();
    });
    after(() => router.shutdown());

    test('it offers a service with bounded concurrency, to the master and to its own child, and calls the master', async () => {
      const nodePath = nodeBinary(major);
      const child = await router.local({ name: `node${major}`, nodePath });
      router.registerService('master-side', { version: () => process.version }, { policy: 'any' });
      const observed = await child.call(async () => {
        const here = (require('tendril/child') as Child).thisContext();
        let running = 0;
        let most = 0;
        here.registerService(
          'paced',
          {
            async step(n: number) {
              running++;
              most = Math.max(most, running);
              await new Promise((resolve) => setTimeout(resolve, 5));
              running--;
              return n * 2;
            },
            most: () => most,
          },
          { policy: 'any', concurrency: 1 },
        );
        return { masterVersion: await here.master.callService('master-side', 'version'), own: process.version };
      });
      assert.equal(observed.masterVersion, process.version);
      assert.match(observed.own, new RegExp(`^v${major}\\.`));
      const doubled = await Promise.all([1, 2, 3, 4].map((n) => child.callService('paced', 'step', n)));
      assert.deepEqual(doubled, [2, 4, 6, 8]);
      assert.equal(await child.callService('paced', 'most'), 1);
      const grandchild = await router.local({ name: `node${major}-grandchild`, nodePath, via: child });
      assert.equal(
        await grandchild.call(() =>
          (require('tendril/child') as Child).thisContext().parent.callService('paced', 'step', 21),
        ),
        42,
      );
      await rejectsService(child.callService('paced', 'constructor'), 'ERR_TENDRIL_SERVICE_METHOD');
    });
  });
}
