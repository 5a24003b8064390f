import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import {
  CallError,
  ChannelError,
  type Context,
  type LogRecord,
  MessageTooLargeError,
  Router,
  TimeoutError,
  UnsupportedValueError,
} from 'tendril';
import { waitFor } from './support/procs.js';

declare global {
  // Globals set by functions running in the child.
  var __ran: unknown;
  var __value: unknown;
}

describe('calls', () => {
  let router: Router;
  let child: Context;
  const logs: LogRecord[] = [];

  before(async () => {
    router = new Router();
    router.on('log', (record) => logs.push(record));
    child = await router.local({ name: 'calls' });
  });
  after(() => router.shutdown());

  test('a call returns the function result, typed from the function', async () => {
    const sum: number = await child.call((a: number, b: number) => a + b, 2, 3);
    assert.equal(sum, 5);
    const pid = await child.call(() => process.pid);
    assert.equal(pid, child.info.pid);
    assert.notEqual(pid, process.pid);
  });

  test('arguments and results keep their types across the process boundary', async () => {
    const value = {
      map: new Map<string, unknown>([['k', [1n, new Date(5)]]]),
      set: new Set(['a']),
      bytes: Buffer.from('bytes'),
      huge: 2n ** 100n,
      nothing: undefined,
    };
    const echoed = await child.call(
      (v: typeof value) => ({ v, kinds: [v.map instanceof Map, v.set instanceof Set, Buffer.isBuffer(v.bytes)] }),
      value,
    );
    assert.deepEqual(echoed.v, value);
    assert.deepEqual(echoed.kinds, [true, true, true]);
  });

  test('a 1 MiB argument arrives intact', async () => {
    const big = Buffer.alloc(1024 * 1024);
    for (let i = 0; i < big.length; i++) big[i] = (i * 7) & 0xff;
    const digest = await child.call(
      (b: Buffer) => require('node:crypto').createHash('sha256').update(b).digest('hex') as string,
      big,
    );
    assert.equal(digest, (await import('node:crypto')).createHash('sha256').update(big).digest('hex'));
  });

  test('async functions run concurrently in one context', async () => {
    const spans = await Promise.all(
      [0, 1, 2, 3].map(() =>
        child.call(async () => {
          const start = Date.now();
          await new Promise((resolve) => setTimeout(resolve, 200));
          return [start, Date.now()] as const;
        }),
      ),
    );
    const lastStart = Math.max(...spans.map(([start]) => start));
    const firstEnd = Math.min(...spans.map(([, end]) => end));
    assert.ok(lastStart < firstEnd, 'every call started before any finished');
  });

  test('a remote throw is a CallError with the remote class, message, stack and context', async () => {
    await assert.rejects(
      child.call(function failing() {
        throw new RangeError('too far');
      }),
      (error: unknown) => {
        assert.ok(error instanceof CallError);
        assert.equal(error.remoteName, 'RangeError');
        assert.equal(error.remoteMessage, 'too far');
        assert.match(error.remoteStack, /failing/);
        assert.equal(error.contextName, 'calls');
        assert.equal(error.contextId, child.id);
        assert.match(error.message, /RangeError: too far \(raised in context 'calls'/);
        return true;
      },
    );
    await assert.rejects(
      child.call(async () => {
        await null;
        throw Object.assign(new Error('gone'), { code: 'ENOENT' });
      }),
      (error: unknown) => error instanceof CallError && error.remoteCode === 'ENOENT',
    );
    await assert.rejects(
      child.call(() => {
        throw 'a string';
      }),
      (error: unknown) => error instanceof CallError && /non-Error value was thrown: a string/.test(error.message),
    );
  });

  test('method shorthand functions can be shipped', async () => {
    const helpers = {
      double(x: number) {
        return x * 2;
      },
      async later(x: number) {
        return x + 1;
      },
    };
    assert.equal(await child.call(helpers.double, 4), 8);
    assert.equal(await child.call(helpers.later, 4), 5);
  });

  test('functions without available source are refused with a TypeError', async () => {
    await assert.rejects(child.call(Math.max as () => number), /native or bound/);
    await assert.rejects(child.call((() => 1).bind(null)), /native or bound/);
    class Thing {}
    await assert.rejects(child.call(Thing as unknown as () => void), /it is a class/);
  });

  test('callNoReply runs without a reply, in order with later calls', async () => {
    child.callNoReply((v: number) => {
      globalThis.__value = v;
    }, 41);
    assert.equal(await child.call(() => globalThis.__value), 41);
  });

  test('an exception in callNoReply reaches the master as a log line', async () => {
    child.callNoReply(() => {
      throw new Error('nobody is listening');
    });
    await child.call(() => null);
    await waitFor(() => logs.some((r) => r.contextName === 'calls' && /nobody is listening/.test(r.text)));
  });

  test('a timeout rejects with TimeoutError and leaves the context usable', async () => {
    await assert.rejects(
      child.callWith({ timeout: 50 }, () => new Promise((resolve) => setTimeout(resolve, 2000))),
      (error: unknown) =>
        error instanceof TimeoutError &&
        error.timeoutMs === 50 &&
        error.contextName === 'calls' &&
        /50 ms/.test(error.message),
    );
    assert.equal(await child.call(() => 'still here'), 'still here');
  });

  test('an AbortSignal ends the wait; an aborted signal sends nothing', async () => {
    const controller = new AbortController();
    const pending = child.callWith({ signal: controller.signal }, () => new Promise((r) => setTimeout(r, 2000)));
    setTimeout(() => controller.abort(), 20);
    await assert.rejects(pending, { name: 'AbortError' });
    globalThis.__ran = undefined;
    await assert.rejects(
      child.callWith({ signal: AbortSignal.abort() }, () => {
        globalThis.__ran = true;
      }),
      { name: 'AbortError' },
    );
    assert.equal(await child.call(() => globalThis.__ran), undefined);
  });

  test('an unsupported argument fails at the sender and nothing runs', async () => {
    await assert.rejects(
      child.call(
        (f: unknown) => {
          globalThis.__ran = f;
        },
        () => 1,
      ),
      (error: unknown) => error instanceof UnsupportedValueError && error.path === 'args[0]',
    );
    assert.equal(await child.call(() => globalThis.__ran), undefined);
  });

  test('an unsupported return value is an UnsupportedValueError naming it, raised in the context', async () => {
    await assert.rejects(
      child.call(() => new (class Widget {})()),
      (error: unknown) =>
        error instanceof UnsupportedValueError &&
        error.path === 'return value' &&
        /Widget/.test(error.message) &&
        /raised in context 'calls'/.test(error.stack ?? ''),
    );
  });

  test('a call to a context ID that does not exist is a ChannelError, not a hang', async () => {
    const { Context } = await import('#dist/internal.js');
    const ghost = new Context(router, 999_999, 'ghost', 0, child.info);
    await assert.rejects(
      ghost.call(() => 1),
      (error: unknown) => error instanceof ChannelError && /no route/.test(error.message),
    );
  });
});

describe('message size limits', () => {
  let router: Router;
  let child: Context;
  before(async () => {
    router = new Router({ maxMessageSize: 64 * 1024 });
    child = await router.local({ name: 'small' });
  });
  after(() => router.shutdown());

  test('a call whose arguments exceed maxMessageSize is refused at the sender', async () => {
    await assert.rejects(
      child.call((b: Buffer) => b.length, Buffer.alloc(100 * 1024)),
      (error: unknown) => error instanceof MessageTooLargeError && error.maxMessageSize === 64 * 1024,
    );
    assert.equal(await child.call((b: Buffer) => b.length, Buffer.alloc(1024)), 1024);
  });

  test('the limit is inherited by the child: a reply over it is a MessageTooLargeError from there', async () => {
    await assert.rejects(
      child.call(() => Buffer.alloc(100 * 1024)),
      (error: unknown) =>
        error instanceof MessageTooLargeError && error.maxMessageSize === 64 * 1024 && error.size > 100 * 1024,
    );
    assert.equal(await child.call(() => 'fine'), 'fine');
  });
});

// Compile-time checks of the call typing: these lines fail the build if the types regress.
export async function typing(child: Context): Promise<void> {
  const n: number = await child.call((a: number) => a + 1, 1);
  const s: string = await child.call(async () => 'x');
  // @ts-expect-error the argument must be a number
  await child.call((a: number) => a, 'nope');
  // @ts-expect-error a missing argument
  await child.call((a: number, b: number) => a + b, 1);
  // @ts-expect-error the result is a string, not a number
  const wrong: number = await child.callWith({ timeout: 5 }, () => 'x');
  void [n, s, wrong];
}
