import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import {
  type Context,
  ContextDisconnectedError,
  type DisconnectKind,
  InvalidOptionError,
  Router,
  TimeoutError,
} from 'tendril';
import { HEARTBEAT, Heartbeat, heartbeatSettings, type Message } from '#dist/internal.js';
import { isAlive, sleep, waitGone } from './support/procs.js';

/** A heartbeat's view of a stream: bytes heard (changed by the test), frames sent, and whether it was declared dead. */
function fakeStream() {
  const sent: Message[] = [];
  const stream = {
    name: 'peer',
    bytesIn: 0,
    deadReason: undefined as string | undefined,
    send: (message: Message) => void sent.push(message),
    dead(reason: string) {
      stream.deadReason = reason;
    },
  };
  return { stream, sent };
}

/** Blocks this thread's event loop for `ms`, as synchronous user code or a debugger pause does. */
function block(ms: number): void {
  const until = Date.now() + ms;
  while (Date.now() < until);
}

/** A call's settled state, its rejection, and when, in ms from `start`. */
async function settleOf(promise: Promise<unknown>, start: number) {
  try {
    await promise;
    return { error: undefined, ms: Date.now() - start };
  } catch (error) {
    return { error: error as Error, ms: Date.now() - start };
  }
}

const pidOf = (context: Context) => context.call(() => process.pid);

describe('heartbeat', () => {
  describe('the watch of one stream', () => {
    test('pings after an interval of silence, and declares the stream dead after the timeout', async () => {
      const { stream, sent } = fakeStream();
      const heartbeat = new Heartbeat(stream, { interval: 100, timeout: 400 }, 3, 7);
      try {
        await sleep(200);
        assert.ok(sent.length >= 1, 'a ping went out after 100 ms of silence');
        const ping = sent[0] as Message;
        assert.deepEqual(
          [ping.handle, ping.replyTo, ping.src, ping.dst, ping.data.length],
          [HEARTBEAT, HEARTBEAT, 3, 7, 0],
        );
        assert.equal(stream.deadReason, undefined);
        await sleep(400);
        assert.equal(stream.deadReason, 'no answer for 400 ms');
      } finally {
        heartbeat.stop();
      }
    });

    test('any bytes heard count as life: a busy stream sends no ping and stays alive', async () => {
      const { stream, sent } = fakeStream();
      const heartbeat = new Heartbeat(stream, { interval: 100, timeout: 300 }, 0, 1);
      const traffic = setInterval(() => {
        stream.bytesIn += 28;
      }, 20);
      try {
        await sleep(700);
        assert.equal(sent.length, 0, 'no ping on a stream that carries traffic');
        assert.equal(stream.deadReason, undefined);
      } finally {
        clearInterval(traffic);
        heartbeat.stop();
      }
    });

    test('time this event loop did not run is not counted as the peer’s silence', async () => {
      const { stream } = fakeStream();
      const heartbeat = new Heartbeat(stream, { interval: 100, timeout: 400 }, 0, 1);
      try {
        await sleep(150);
        // Three timeouts of synchronous work: the peer's answers, if any, wait unread meanwhile.
        block(1200);
        // The first check after the block runs before the loop reads anything: it must not declare death.
        await new Promise((resolve) => setImmediate(resolve));
        await new Promise((resolve) => setTimeout(resolve, 0));
        assert.equal(stream.deadReason, undefined, 'not dead for time the loop did not run');
        // What the peer sent meanwhile is read at last: life.
        stream.bytesIn += 28;
        await sleep(300);
        assert.equal(stream.deadReason, undefined);
        // And with nothing more from it, the timeout counts again, in running time.
        await sleep(700);
        assert.equal(stream.deadReason, 'no answer for 400 ms');
      } finally {
        heartbeat.stop();
      }
    });
  });

  describe('options', () => {
    test('either option turns the heartbeat on, false turns it off, and a timeout must exceed the interval', () => {
      assert.equal(heartbeatSettings({}, false, 'here'), false);
      assert.deepEqual(heartbeatSettings({ heartbeatTimeout: 3000 }, false, 'here'), { interval: 1500, timeout: 3000 });
      assert.deepEqual(heartbeatSettings({ heartbeatInterval: 200 }, false, 'here'), {
        interval: 200,
        timeout: 30_000,
      });
      const inherited = { interval: 500, timeout: 2000 };
      assert.equal(heartbeatSettings({}, inherited, 'here'), inherited);
      assert.equal(heartbeatSettings({ heartbeatTimeout: false }, inherited, 'here'), false);
      assert.throws(
        () => heartbeatSettings({ heartbeatInterval: 5000, heartbeatTimeout: 5000 }, false, 'router.local()'),
        (error: Error) =>
          error instanceof InvalidOptionError &&
          /heartbeatTimeout/.test(error.message) &&
          /router\.local\(\)/.test(error.message),
      );
      assert.throws(() => new Router({ heartbeatInterval: 10 }), InvalidOptionError);
      assert.throws(() => new Router({ heartbeatTimeout: 'soon' as never }), InvalidOptionError);
    });

    test('a context inherits its parent’s heartbeat, and its own options replace it', async () => {
      await using router = new Router({ heartbeatInterval: 300, heartbeatTimeout: 1200 });
      const mid = await router.local({ name: 'mid', heartbeatTimeout: 2500 });
      const leaf = await router.local({ name: 'leaf', via: mid });
      const quiet = await router.local({ name: 'quiet', via: mid, heartbeatTimeout: false });
      const settings = () =>
        (require('tendril:core') as { contextRuntime(): { heartbeat: unknown } }).contextRuntime().heartbeat;
      assert.deepEqual(await mid.call(settings), { interval: 300, timeout: 2500 });
      assert.deepEqual(await leaf.call(settings), { interval: 300, timeout: 2500 });
      assert.equal(await quiet.call(settings), false);
      // A timeout alone takes an interval that fits inside it; both together must agree.
      const short = await router.local({ via: mid, heartbeatTimeout: 200 });
      assert.deepEqual(await short.call(settings), { interval: 100, timeout: 200 });
      await assert.rejects(router.local({ via: mid, heartbeatTimeout: 40 }), InvalidOptionError);
      await assert.rejects(router.local({ heartbeatInterval: 5000, heartbeatTimeout: 4000 }), InvalidOptionError);
    });
  });

  describe('a frozen intermediate', () => {
    test('kill -STOP of mid: calls to mid and leaf reject naming the silent hop; nothing is left running', async () => {
      await using router = new Router({ heartbeatInterval: 250, heartbeatTimeout: 1000, shutdownGrace: 300 });
      const kinds: [number, DisconnectKind][] = [];
      router.on('disconnect', (id, _reason, kind) => kinds.push([id, kind]));
      const mid = await router.local({ name: 'mid' });
      const leaf = await router.local({ name: 'leaf', via: mid });
      const [midPid, leafPid] = [await pidOf(mid), await pidOf(leaf)];
      assert.ok((await leaf.ping()) > 0);
      process.kill(midPid, 'SIGSTOP');
      try {
        const start = Date.now();
        const [toMid, toLeaf] = await Promise.all([
          settleOf(
            mid.call(() => 1),
            start,
          ),
          settleOf(
            leaf.call(() => 2),
            start,
          ),
        ]);
        for (const [settled, name] of [
          [toMid, 'mid'],
          [toLeaf, 'leaf'],
        ] as const) {
          assert.ok(
            settled.error instanceof ContextDisconnectedError,
            `the call to ${name} rejected: ${settled.error}`,
          );
          assert.equal(settled.error.kind, 'heartbeat');
          assert.match(settled.error.message, new RegExp(`context '${name}'.*no answer for 1 s \\(stream to mid\\)`));
          assert.ok(settled.ms < 1000 + 5000, `rejected after ${settled.ms} ms`);
          assert.ok(settled.ms >= 900, `not before the timeout: ${settled.ms} ms`);
        }
        assert.deepEqual(kinds.sort(), [
          [mid.id, 'heartbeat'],
          [leaf.id, 'heartbeat'],
        ]);
        // The master starts a new context at once.
        const other = await router.local({ name: 'other' });
        assert.equal(await other.call(() => 3), 3);
        // leaf declared its own parent dead and exited (a zombie until the stopped mid is reaped), and mid is killed.
        await waitGone([leafPid, midPid], 5000);
      } finally {
        if (isAlive(midPid)) process.kill(midPid, 'SIGCONT');
      }
    });

    test('the child side declares a frozen parent dead and exits; continued, the frozen context exits by itself', async () => {
      await using router = new Router({ heartbeatInterval: 250, heartbeatTimeout: 1000, shutdownGrace: 10_000 });
      const mid = await router.local({ name: 'mid' });
      const leaf = await router.local({ name: 'leaf', via: mid });
      const [midPid, leafPid] = [await pidOf(mid), await pidOf(leaf)];
      process.kill(midPid, 'SIGSTOP');
      const pending = leaf.call(() => 1);
      await assert.rejects(
        pending,
        (error: Error) => error instanceof ContextDisconnectedError && /no answer/.test(error.message),
      );
      // mid is still stopped, and no signal comes for 10 s: leaf's own end of the stream declared mid dead.
      await waitGone([leafPid], 3000);
      assert.ok(isAlive(midPid), 'mid is stopped, not killed');
      process.kill(midPid, 'SIGCONT');
      // Well within the grace: continued, mid finds its stream to the master closed and leaves.
      await waitGone([midPid], 3000);
    });

    test('with the heartbeat off, a frozen context is only as bounded as the call’s own timeout', async () => {
      await using router = new Router({ heartbeatTimeout: 1000 });
      const mid = await router.local({ name: 'mid', heartbeatTimeout: false });
      const midPid = await pidOf(mid);
      process.kill(midPid, 'SIGSTOP');
      try {
        await assert.rejects(
          mid.callWith({ timeout: 2500 }, () => 1),
          TimeoutError,
        );
        await assert.rejects(mid.ping({ timeout: 500 }), TimeoutError);
      } finally {
        process.kill(midPid, 'SIGCONT');
      }
      assert.ok((await mid.ping()) > 0, 'still connected once continued');
    });
  });

  test('context.ping() measures the round trip through the chain, in ms', async () => {
    await using router = new Router();
    const mid = await router.local({ name: 'mid' });
    const leaf = await router.local({ name: 'leaf', via: mid });
    const rtt = await leaf.ping();
    assert.ok(typeof rtt === 'number' && rtt > 0 && rtt < 5000, `${rtt}`);
    await mid.shutdown();
    await assert.rejects(leaf.ping(), ContextDisconnectedError);
  });
});
