// Every operation that takes an AbortSignal or a timeout settles within a
// bounded time after it fires, whatever the other side does: here the
// calls, service calls, module proxies, starts through a via context, the
// pool, fleets, receivers and a worker's acquire, each against a context
// (or master) that never answers. Transfers and commands are tested the
// same way beside their other tests (files, commands).
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { createServer, type Server, type Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { ConnectTimeoutError, type Context, joinListener, Router, Select, TimeoutError } from 'tendril';
import { BOOT, CONNECT, encode, encodeFrame, FrameDecoder, Message } from '#dist/internal.js';
import { silence } from './support/hostile.js';
import { settlement as settledFor } from './support/procs.js';

/** Far longer than any bound under test: an operation still pending then never settles. */
const HANG = 20_000;

/** How `operation` settled, and after how many ms (`'pending'` after HANG ms: it never would have). */
function settlement(operation: Promise<unknown>): ReturnType<typeof settledFor> {
  return settledFor(operation, HANG);
}

const never = () => new Promise<never>(() => undefined);

describe('operations with a signal or a timeout settle when the other side never answers', { timeout: 120_000 }, () => {
  let router: Router;
  let child: Context;

  before(async () => {
    router = new Router();
    child = await router.local({ name: 'unanswering' });
    await child.call(() => {
      require('tendril/child')
        .thisContext()
        .registerService('stuck', { wait: () => new Promise(() => undefined) });
    });
  });
  after(() => router.shutdown());

  test('context.callWith: a timeout rejects with TimeoutError, a signal with its reason', async () => {
    const timed = await settlement(child.callWith({ timeout: 300 }, never));
    assert.equal(timed.outcome, 'rejected');
    assert.ok(timed.error instanceof TimeoutError, String(timed.error));
    const controller = new AbortController();
    setTimeout(() => controller.abort(), 100);
    const aborted = await settlement(child.callWith({ signal: controller.signal }, never));
    assert.equal(aborted.outcome, 'rejected');
    assert.equal((aborted.error as Error).name, 'AbortError');
  });

  test('a module proxy with a timeout rejects with TimeoutError', async () => {
    const fs = child.import<typeof import('node:timers/promises')>('node:timers/promises', { timeout: 300 });
    const timed = await settlement(fs.setTimeout(60_000));
    assert.equal(timed.outcome, 'rejected');
    assert.ok(timed.error instanceof TimeoutError, String(timed.error));
  });

  test('context.callServiceWith: a timeout and a signal end the wait on a method that never returns', async () => {
    const timed = await settlement(child.callServiceWith({ timeout: 300 }, 'stuck', 'wait'));
    assert.ok(timed.error instanceof TimeoutError, String(timed.error));
    const controller = new AbortController();
    setTimeout(() => controller.abort(), 100);
    const aborted = await settlement(child.callServiceWith({ signal: controller.signal }, 'stuck', 'wait'));
    assert.equal((aborted.error as Error).name, 'AbortError');
  });

  test('a start through a via context that never answers fails with ConnectTimeoutError soon after connectTimeout', async () => {
    const via = await router.local({ name: 'silent-via' });
    await silence(via, CONNECT);
    const start = await settlement(router.local({ via, connectTimeout: 500 }));
    assert.equal(start.outcome, 'rejected');
    assert.ok(start.error instanceof ConnectTimeoutError, String(start.error));
    assert.match((start.error as Error).message, /silent-via/);
    // connectTimeout and the 2 s the master gives the via context to say so itself; a hang is 20 s.
    assert.ok(start.ms < HANG / 2, `${start.ms} ms`);
    assert.equal(await via.call(() => 'the via context is fine'), 'the via context is fine');
    await via.shutdown();
  });

  test('pool.acquire: its timeout ends the wait for a start that hangs in its via; the start ends too', async () => {
    const via = await router.local({ name: 'silent-pool-via' });
    await silence(via, CONNECT);
    const acquired = await settlement(
      router.pool.acquire({ method: 'local', name: 'behind-silence', via, connectTimeout: 500 }, { timeout: 300 }),
    );
    assert.equal(acquired.outcome, 'rejected');
    assert.ok(acquired.error instanceof TimeoutError, String(acquired.error));
    // The start itself fails past connectTimeout and its grace, so it holds no place in the pool for ever.
    const again = await settlement(
      router.pool.acquire({ method: 'local', name: 'behind-silence', via, connectTimeout: 500 }),
    );
    assert.equal(again.outcome, 'rejected');
    assert.ok(again.error instanceof ConnectTimeoutError, String(again.error));
    await via.shutdown();
  });

  test('router.fleet: a target whose function never returns fails at its timeout, and the fleet ends', async () => {
    const fleet = router.fleet([child], (context) => context.call(never), { timeout: 300 });
    const summary = await settlement(fleet.summary());
    assert.equal(summary.outcome, 'resolved');
    const result = await fleet.summary();
    assert.equal(result.failed.length, 1);
    assert.ok(result.failed[0]?.error.cause instanceof TimeoutError, String(result.failed[0]?.error.cause));
  });

  test('Receiver, Channel and Select: get(timeout) rejects with TimeoutError when nothing comes', async () => {
    const receiver = router.receiver();
    const select = new Select([router.receiver()]);
    // Each wait starts when it is awaited: one rejecting while another is awaited would be unhandled a moment.
    for (const get of [() => receiver.get(200), () => select.get(200)]) {
      const waited = await settlement(get());
      assert.ok(waited.error instanceof TimeoutError, String(waited.error));
    }
    receiver.close();
  });
});

describe("a worker's acquire settles when the master never answers", { timeout: 60_000 }, () => {
  let scratch: string;
  let server: Server;
  const sockets = new Set<Socket>();

  before(async () => {
    scratch = mkdtempSync(join(tmpdir(), 'tendril-silent-master-'));
    // A listener that welcomes the worker as a master would, then never answers anything.
    server = createServer((socket) => {
      sockets.add(socket);
      socket.on('close', () => sockets.delete(socket));
      socket.on('error', () => undefined);
      const frames = new FrameDecoder(1024 * 1024);
      socket.on('data', (data: Buffer) => {
        frames.push(data, (message) => {
          if (message.handle !== BOOT) return;
          const welcome = {
            id: 4242,
            name: 'worker-4242',
            maxMessageSize: 1024 * 1024,
            masterName: 'silent-master',
            masterInfo: {
              pid: process.pid,
              nodeVersion: process.version,
              hostname: 'here',
              platform: 'linux',
              arch: 'x64',
            },
          };
          for (const piece of encodeFrame(
            new Message({ dst: 4242, src: 0, auth: 0, handle: BOOT, replyTo: 0, flags: 0 }, encode(welcome)),
          ))
            socket.write(piece);
        });
      });
    });
    await new Promise<void>((resolve) => server.listen(join(scratch, 'master.sock'), resolve));
  });
  after(async () => {
    for (const socket of sockets) socket.destroy();
    await new Promise<void>((resolve) => server.close(() => resolve()));
    rmSync(scratch, { recursive: true, force: true });
  });

  test('acquire({ timeout }) rejects with TimeoutError shortly after its timeout', async () => {
    const worker = await joinListener(join(scratch, 'master.sock'));
    try {
      const acquired = await settlement(worker.acquire({ method: 'local' }, { timeout: 300 }));
      assert.equal(acquired.outcome, 'rejected');
      assert.ok(acquired.error instanceof TimeoutError, String(acquired.error));
      const controller = new AbortController();
      setTimeout(() => controller.abort(), 100);
      const aborted = await settlement(worker.acquire({ method: 'local' }, { signal: controller.signal }));
      assert.equal((aborted.error as Error).name, 'AbortError');
    } finally {
      await worker.close();
    }
  });
});
