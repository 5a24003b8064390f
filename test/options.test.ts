import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import {
  Channel,
  type Context,
  ContextPool,
  InvalidOptionError,
  joinListener,
  Router,
  type RouterOptions,
  type TransferOptions,
} from 'tendril';
import { Receiver } from '#dist/internal.js';

/** A bad option is refused with InvalidOptionError naming it, where it was passed and what it must be. */
function refused(option: string, where: string): (error: unknown) => boolean {
  return (error: unknown) => {
    assert.ok(error instanceof InvalidOptionError, String(error));
    assert.equal(error.option, option);
    assert.ok(error.message.startsWith(`option ${option} of ${where} must be `), error.message);
    return true;
  };
}

describe('options are checked in one place', () => {
  let router: Router;
  let child: Context;
  before(async () => {
    router = new Router();
    child = await router.local({ name: 'options' });
  });
  after(() => router.shutdown());

  test('Router options', () => {
    assert.throws(() => new Router({ shutdownGrace: -1 }), refused('shutdownGrace', 'new Router()'));
    assert.throws(
      () => new Router({ shutdownGrace: '2s' as unknown as number }),
      refused('shutdownGrace', 'new Router()'),
    );
    assert.throws(() => new Router({ maxMessageSize: 12 }), refused('maxMessageSize', 'new Router()'));
    assert.throws(() => new Router({ name: '' }), refused('name', 'new Router()'));
    assert.throws(
      () => new Router({ moduleRoots: '/srv' as unknown as string[] }),
      refused('moduleRoots', 'new Router()'),
    );
    assert.throws(() => new Router({ base: 42 as unknown as string }), refused('base', 'new Router()'));
    assert.throws(() => new Router({ maxHeldBytes: 1024 }), refused('maxHeldBytes', 'new Router()'));
    assert.throws(() => new Router({ output: 'stdout' as 'stderr' }), refused('output', 'new Router()'));
    assert.throws(
      () => new Router({ shutdownOnSignal: 'SIGINT' as unknown as boolean }),
      refused('shutdownOnSignal', 'new Router()'),
    );
    assert.throws(
      () => new Router({ shutdownOnSignal: ['SIGKILL'] as unknown as ['SIGINT'] }),
      refused('shutdownOnSignal', 'new Router()'),
    );
    // A misspelt option is refused, not ignored for its default.
    assert.throws(
      () => new Router({ maxHeldByte: 64 * 1024 * 1024 } as unknown as RouterOptions),
      refused('maxHeldByte', 'new Router()'),
    );
  });

  test('receiver and channel windows', () => {
    assert.throws(
      () => router.receiver({ highWaterMark: { bytes: 0 } }),
      refused('highWaterMark.bytes', 'new Receiver()'),
    );
    assert.throws(
      () => new Receiver(router, { highWaterMark: { messages: 1.5 } }),
      refused('highWaterMark.messages', 'new Receiver()'),
    );
    assert.throws(
      () => new Receiver(router, { highWaterMark: 5 as unknown as { messages: number } }),
      refused('options', 'new Receiver()'),
    );
    assert.throws(
      () => new Channel(router, { highWaterMark: { bytes: -1 } }),
      refused('highWaterMark.bytes', 'new Channel()'),
    );
  });

  test('call options', async () => {
    await assert.rejects(
      child.callWith({ timeout: -1 }, () => 1),
      refused('timeout', 'context.callWith()'),
    );
    await assert.rejects(
      child.callWith({ signal: 'stop' as unknown as AbortSignal }, () => 1),
      refused('signal', 'context.callWith()'),
    );
    assert.throws(() => child.import('./x.js', { timeout: Number.NaN }), refused('timeout', 'context.import()'));
    await assert.rejects(child.shutdown({ grace: -5 }), refused('grace', 'context.shutdown()'));
    assert.equal(await child.callWith({ timeout: 5000 }, () => 'valid options still work'), 'valid options still work');
  });

  test('transfer options: a misspelt one is refused before anything is sent', async () => {
    await assert.rejects(
      child.fetch('/etc/hostname', '/nonexistent/x', { recusive: true } as unknown as TransferOptions),
      refused('recusive', 'context.fetch()'),
    );
    await assert.rejects(
      router.copy('/etc/hostname', '/nonexistent/x', [child], { stallTimout: 5 } as unknown as TransferOptions),
      refused('stallTimout', 'router.copy()'),
    );
  });

  test('every public options object refuses an unknown key, suggesting the one it most likely meant', async () => {
    // Each surface with a misspelling of one of its options: the refusal names it, where, and the likely one.
    const misspelt = (option: string, where: string, meant: string) => (error: unknown) =>
      refused(option, where)(error) && new RegExp(`\\(did you mean ${meant}\\?\\)`).test((error as Error).message);
    const bad = <T>(options: object) => options as T;
    await assert.rejects(
      child.copy('/etc/hostname', '/tmp/x', bad({ mod: 0o600 })),
      misspelt('mod', 'context.copy()', 'mode'),
    );
    await assert.rejects(
      child.fetch('/etc/hostname', '/tmp/x', bad({ recusive: true })),
      misspelt('recusive', 'context.fetch()', 'recursive'),
    );
    assert.throws(
      () => child.createWriteStream('/tmp/x', bad({ mdoe: 0o600 })),
      misspelt('mdoe', 'context.createWriteStream()', 'mode'),
    );
    await assert.rejects(
      router.copy('/etc/hostname', '/tmp/x', [child], bad({ stallTimout: 5 })),
      misspelt('stallTimout', 'router.copy()', 'stallTimeout'),
    );
    assert.throws(() => child.exec('true', bad({ cwdd: '/' })), misspelt('cwdd', 'context.exec()', 'cwd'));
    await assert.rejects(
      child.callWith(bad({ timout: 5 }), () => 1),
      misspelt('timout', 'context.callWith()', 'timeout'),
    );
    assert.throws(() => child.import('./x.js', bad({ bsae: '/' })), misspelt('bsae', 'context.import()', 'base'));
    await assert.rejects(
      child.callServiceWith(bad({ singal: undefined }), 's', 'm'),
      misspelt('singal', 'context.callServiceWith()', 'signal'),
    );
    assert.throws(() => child.service('s', bad({ timeOut: 5 })), misspelt('timeOut', 'context.service()', 'timeout'));
    await assert.rejects(child.shutdown(bad({ grase: 5 })), misspelt('grase', 'context.shutdown()', 'grace'));
    assert.throws(
      () => router.receiver(bad({ highWatermark: 5 })),
      misspelt('highWatermark', 'new Receiver()', 'highWaterMark'),
    );
    assert.throws(
      () => router.receiver({ highWaterMark: bad({ message: 5 }) }),
      misspelt('message', 'new Receiver()', 'messages'),
    );
    assert.throws(
      () => new Channel(router, bad({ highwatermark: 5 })),
      misspelt('highwatermark', 'new Channel()', 'highWaterMark'),
    );
    assert.throws(
      () => router.registerService('s', {}, bad({ concurency: 2 })),
      misspelt('concurency', 'registerService()', 'concurrency'),
    );
    assert.throws(
      () => new ContextPool(router, bad({ maxContext: 2 })),
      misspelt('maxContext', 'new ContextPool()', 'maxContexts'),
    );
    await assert.rejects(
      router.pool.acquire({ method: 'local' }, bad({ uniqe: true })),
      misspelt('uniqe', 'pool.acquire()', 'unique'),
    );
    assert.throws(
      () => router.fleet([], () => 1, bad({ concurrancy: 2 })),
      misspelt('concurrancy', 'router.fleet()', 'concurrency'),
    );
    await assert.rejects(
      router.listen('/tmp/tendril-options/x.sock', bad({ maxPeer: 2 })),
      misspelt('maxPeer', 'router.listen()', 'maxPeers'),
    );
    await assert.rejects(
      joinListener('/tmp/tendril-options/x.sock', bad({ connectTimout: 5 })),
      misspelt('connectTimout', 'joinListener()', 'connectTimeout'),
    );
    // A key far from every option gets no guess.
    assert.throws(
      () => child.exec('true', bad({ xyzzy: 1 })),
      (error: unknown) => refused('xyzzy', 'context.exec()')(error) && !/did you mean/.test((error as Error).message),
    );
  });

  test('connection options, before anything starts', async () => {
    await assert.rejects(router.local({ name: 7 as unknown as string }), refused('name', 'router.local()'));
    await assert.rejects(
      router.ssh({ hostname: '127.0.0.1', keepaliveInterval: 'often' as unknown as number }),
      refused('keepaliveInterval', 'router.ssh()'),
    );
    await assert.rejects(router.sudo({ via: {} as Context }), refused('via', 'router.sudo()'));
  });
});
