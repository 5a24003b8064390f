import assert from 'node:assert/strict';
import { execFile, spawn } from 'node:child_process';
import { join } from 'node:path';
import { describe, test } from 'node:test';
import { promisify } from 'node:util';
import { ContextDisconnectedError, Router } from 'tendril';
import { isAlive, ROOT, waitGone } from './support/procs.js';

const fixture = (name: string) => join(ROOT, 'build', 'test', 'fixtures', name);

describe('lifecycle', () => {
  test('context.shutdown() ends the context and rejects its pending calls', async () => {
    await using router = new Router();
    const child = await router.local({ name: 'short-lived' });
    const pending = assert.rejects(
      child.call(() => new Promise((resolve) => setTimeout(resolve, 10_000))),
      ContextDisconnectedError,
    );
    await child.shutdown();
    assert.ok(!isAlive(child.info.pid), 'process reaped when shutdown() resolves');
    await pending;
    await child.shutdown();
  });

  test('router.shutdown() reaps children and grandchildren before it resolves', async () => {
    const router = new Router();
    const child = await router.local({ name: 'c' });
    const grandchild = await router.local({ name: 'g', via: child });
    await router.shutdown();
    assert.ok(!isAlive(child.info.pid) && !isAlive(grandchild.info.pid));
    await assert.rejects(router.local(), /has been shut down/);
  });

  test('a child that ignores SHUTDOWN and SIGTERM is killed with SIGKILL after the grace periods', async () => {
    const router = new Router({ shutdownGrace: 200 });
    const stubborn = await router.local({ name: 'stubborn' });
    const terminable = await router.local({ name: 'terminable' });
    await stubborn.call(() => {
      process.on('SIGTERM', () => {});
      return null;
    });
    const busy = () => {
      const end = Date.now() + 60_000;
      while (Date.now() < end) {}
    };
    stubborn.callNoReply(busy);
    terminable.callNoReply(busy);
    const started = Date.now();
    await router.shutdown();
    const took = Date.now() - started;
    assert.ok(took >= 400 && took < 5000, `shutdown took ${took} ms`);
    assert.ok(!isAlive(stubborn.info.pid) && !isAlive(terminable.info.pid));
  });

  test('killing a context rejects pending calls promptly', async () => {
    await using router = new Router();
    const child = await router.local({ name: 'doomed' });
    const pending = child.call(() => new Promise((resolve) => setTimeout(resolve, 10_000)));
    const started = Date.now();
    process.kill(child.info.pid, 'SIGKILL');
    await assert.rejects(
      pending,
      (error: unknown) => error instanceof ContextDisconnectedError && error.contextName === 'doomed',
    );
    assert.ok(Date.now() - started < 1000);
  });

  test('killing an intermediate rejects calls below it promptly and its children exit', async () => {
    await using router = new Router();
    const middle = await router.local({ name: 'middle' });
    const below = await router.local({ name: 'below', via: middle });
    const pending = below.call(() => new Promise((resolve) => setTimeout(resolve, 10_000)));
    const started = Date.now();
    process.kill(middle.info.pid, 'SIGKILL');
    await assert.rejects(
      pending,
      (error: unknown) => error instanceof ContextDisconnectedError && error.contextName === 'below',
    );
    assert.ok(Date.now() - started < 1000);
    assert.ok((await waitGone([below.info.pid], 1000)) <= 1000);
  });

  test('when the master is killed with SIGKILL, its children and grandchildren exit within 1 s', async () => {
    const master = spawn(process.execPath, [fixture('orphan-master.js')], { stdio: ['ignore', 'pipe', 'inherit'] });
    const pids = await new Promise<number[]>((resolve, reject) => {
      master.stdout.once('data', (chunk: Buffer) => resolve(JSON.parse(chunk.toString())));
      master.once('exit', () => reject(new Error('the master exited early')));
    });
    const exited = new Promise((resolve) => master.once('exit', resolve));
    master.kill('SIGKILL');
    await exited;
    const took = await waitGone(pids, 1000);
    assert.ok(took <= 1000, `children took ${took} ms`);
  });

  test('a program that never calls shutdown() still exits, and its children follow', async () => {
    const { stdout } = await promisify(execFile)(process.execPath, [fixture('natural-exit.js')], { timeout: 10_000 });
    const pids = JSON.parse(stdout) as number[];
    assert.ok((await waitGone(pids, 1000)) <= 1000);
  });
});
