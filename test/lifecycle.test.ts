import assert from 'node:assert/strict';
import { execFile, spawn } from 'node:child_process';
import { chmodSync, existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { promisify } from 'node:util';
import { BootstrapError, ContextDisconnectedError, Router } from 'tendril';
import { switchOf } from './support/internals.js';
import { RUN_MARK } from './support/leak-check.js';
import { isAlive, ROOT, waitFor, waitGone } from './support/procs.js';

const fixture = (name: string) => join(ROOT, 'build', 'test', 'fixtures', name);

/** Live processes started by this test run (they inherit its mark), other than this one. */
function ourProcesses(): number[] {
  const needle = `TENDRIL_TEST_RUN=${RUN_MARK}`;
  const pids: number[] = [];
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry) || Number(entry) === process.pid) continue;
    try {
      if (readFileSync(`/proc/${entry}/environ`, 'latin1').split('\0').includes(needle) && isAlive(Number(entry))) {
        pids.push(Number(entry));
      }
    } catch {
      // Ended while being read, or not ours to read.
    }
  }
  return pids;
}

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

  describe('router.shutdown() while contexts are starting', () => {
    let dir: string;
    let slowNode: string;
    let pidFile: string;
    before(() => {
      dir = mkdtempSync(join(tmpdir(), 'tendril-slow-start-'));
      pidFile = join(dir, 'pid');
      slowNode = join(dir, 'slow-node');
      // A real interpreter wrapper that takes a minute to start: it records its pid, sleeps in
      // that same process (so killing that pid kills all of it), then becomes Node.
      writeFileSync(
        slowNode,
        [
          '#!/usr/bin/python3',
          'import os, sys, time',
          `with open(${JSON.stringify(pidFile)}, "w") as f: f.write(str(os.getpid()))`,
          'time.sleep(60)',
          `os.execv(${JSON.stringify(process.execPath)}, ["node"] + sys.argv[1:])`,
          '',
        ].join('\n'),
      );
      chmodSync(slowNode, 0o755);
    });
    after(() => rmSync(dir, { recursive: true, force: true }));

    /** The pid of the slow wrapper once it runs. */
    async function slowPid(): Promise<number> {
      await waitFor(() => existsSync(pidFile) && readFileSync(pidFile, 'utf8') !== '', 10_000);
      const pid = Number(readFileSync(pidFile, 'utf8'));
      rmSync(pidFile);
      return pid;
    }

    test('a local() just begun rejects with a BootstrapError, and no process is left', async () => {
      const existing = new Set(ourProcesses());
      const router = new Router({ name: 'stopping' });
      const starting = router.local();
      await router.shutdown();
      await assert.rejects(starting, (error: unknown) => {
        assert.ok(error instanceof BootstrapError, String(error));
        assert.match(error.message, /router 'stopping' was shut down/);
        return true;
      });
      assert.deepEqual(
        ourProcesses().filter((pid) => !existing.has(pid)),
        [],
      );
    });

    test('a slow local() rejects, its process is reaped before shutdown() resolves', async () => {
      const router = new Router({ name: 'stopping-slow' });
      const starting = router.local({ nodePath: slowNode });
      const rejected = assert.rejects(starting, (error: unknown) => {
        assert.ok(error instanceof BootstrapError, String(error));
        assert.match(
          error.message,
          /router 'stopping-slow' was shut down while starting it, so its process was stopped/,
        );
        return true;
      });
      const pid = await slowPid();
      assert.ok(isAlive(pid));
      await router.shutdown();
      assert.ok(!isAlive(pid), `the starting process ${pid} outlived shutdown()`);
      await rejected;
    });

    test('through via: the intermediate aborts the start when the master stops it, and neither is left', async () => {
      const router = new Router();
      const middle = await router.local({ name: 'middle' });
      const starting = router.local({ via: middle, nodePath: slowNode });
      // The intermediate answers with its BootstrapError when its reply beats its exit, else its stream's end is what the master sees.
      const rejected = assert.rejects(starting, (error: unknown) => {
        if (error instanceof BootstrapError) {
          assert.match(error.message, /context 'middle' was shut down while starting it, so its process was stopped/);
        } else {
          assert.ok(error instanceof ContextDisconnectedError, String(error));
        }
        return true;
      });
      const pid = await slowPid();
      await router.shutdown();
      assert.ok(!isAlive(pid), `the process ${pid} being started through via outlived shutdown()`);
      assert.ok(!isAlive(middle.info.pid));
      await rejected;
    });

    test('a connect begun after the broker started shutting down rejects at once, starting nothing', async () => {
      const router = new Router({ name: 'closing' });
      const existing = new Set(ourProcesses());
      // The broker of any context (the via case): shutting down, while its router still takes requests.
      const closing = (switchOf(router) as unknown as { broker: { shutdown(): Promise<void> } }).broker.shutdown();
      await assert.rejects(
        router.local({ nodePath: slowNode, connectTimeout: 5000 }),
        /router 'closing' was shut down, so it was not started/,
      );
      assert.ok(!existsSync(pidFile), 'the wrapper never ran');
      assert.deepEqual(
        ourProcesses().filter((pid) => !existing.has(pid)),
        [],
      );
      await closing;
      await router.shutdown();
      await assert.rejects(router.local(), /has been shut down/);
    });
  });

  test('a child that ignores SHUTDOWN and SIGTERM is killed with SIGKILL after the grace periods', async () => {
    const router = new Router({ shutdownGrace: 200 });
    const stubborn = await router.local({ name: 'stubborn' });
    const terminable = await router.local({ name: 'terminable' });
    const busy = (ignoreTerm: boolean) => {
      // In the call that keeps running: a listener a call added is removed when it returns.
      if (ignoreTerm) process.on('SIGTERM', () => {});
      const end = Date.now() + 60_000;
      while (Date.now() < end) {}
    };
    stubborn.callNoReply(busy, true);
    terminable.callNoReply(busy, false);
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

  test('a call to a context that has gone rejects without being sent, naming the context and why it went', async () => {
    await using router = new Router();
    const child = await router.local({ name: 'departed' });
    const pending = child.call(() => new Promise((resolve) => setTimeout(resolve, 10_000)));
    process.kill(child.info.pid, 'SIGKILL');
    await assert.rejects(pending, ContextDisconnectedError);
    const core = switchOf(router) as unknown as { handlers: { size: number }; holds: { count: number } };
    const before = { handlers: core.handlers.size, holds: core.holds.count };
    // No timeout and no signal: if the request were sent into the void it would never settle.
    const error = await child
      .call(() => 1)
      .then(
        () => assert.fail('a call to a departed context resolved'),
        (caught: unknown) => caught,
      );
    assert.ok(error instanceof ContextDisconnectedError, String(error));
    assert.equal(error.contextName, 'departed');
    assert.match(error.message, /departed/);
    // Refused before a reply handler was registered or the event loop held.
    assert.deepEqual({ handlers: core.handlers.size, holds: core.holds.count }, before);
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

  test("esbuild's helper process is reaped by router.shutdown(), and ends with a master that never calls it", async () => {
    const run = async (mode: string) =>
      JSON.parse(
        (await promisify(execFile)(process.execPath, [fixture('esbuild-helper.js'), mode], { timeout: 20_000 })).stdout,
      ) as { answer: number; running: number[]; after: number[] };
    const shut = await run('shutdown');
    assert.equal(shut.answer, 42);
    assert.equal(shut.running.length, 1, 'module analysis started one helper');
    assert.deepEqual(shut.after, [], 'nothing left after shutdown, not even a zombie');
    const ended = await run('exit');
    assert.equal(ended.running.length, 1);
    // Reparented once the master is gone: it must stop running (a zombie no init reaps is not running).
    await waitFor(() => ended.running.every((pid) => !isAlive(pid)), 2000);
  });

  test('a program that never calls shutdown() still exits, and its children follow', async () => {
    const { stdout } = await promisify(execFile)(process.execPath, [fixture('natural-exit.js')], { timeout: 10_000 });
    const pids = JSON.parse(stdout) as number[];
    assert.ok((await waitGone(pids, 1000)) <= 1000);
  });

  test('a program whose last call timed out exits at once, though the timeout ended its last request from a timer', async () => {
    const master = spawn(process.execPath, [fixture('natural-exit.js'), 'timeout'], {
      stdio: ['ignore', 'pipe', 'inherit'],
    });
    let out = '';
    let printed = 0;
    master.stdout.on('data', (chunk: Buffer) => {
      out += chunk;
      printed ||= Date.now();
    });
    const code = await new Promise<number | null>((resolve) => master.on('exit', resolve));
    assert.equal(code, 0);
    const lingered = Date.now() - printed;
    // The streams to its children kept the event loop alive until some I/O came (the next one about 8 s later).
    assert.ok(lingered < 3000, `it exited ${lingered} ms after its last line`);
    assert.ok((await waitGone(JSON.parse(out) as number[], 1000)) <= 1000);
  });
});

describe('shutdownOnSignal', () => {
  /** Starts test/fixtures/signal-master.js; resolves with it and its context's PID once the long call runs. */
  async function startMaster(mode = '') {
    const master = spawn(process.execPath, [fixture('signal-master.js'), mode], {
      stdio: ['ignore', 'pipe', 'inherit'],
    });
    let stdout = '';
    master.stdout.on('data', (chunk: Buffer) => {
      stdout += chunk.toString();
    });
    const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) =>
      master.once('exit', (code, signal) => resolve({ code, signal })),
    );
    await Promise.race([
      waitFor(() => stdout.includes('\n'), 20_000),
      exited.then(() => Promise.reject(new Error(`the master exited early: ${stdout}`))),
    ]);
    const { pid } = JSON.parse(stdout.split('\n')[0] as string) as { pid: number };
    return { master, pid, exited, output: () => stdout };
  }

  /** True while a process `pid` exists (a zombie counts: it was not reaped). */
  const exists = (pid: number) => {
    try {
      process.kill(pid, 0);
      return true;
    } catch {
      return false;
    }
  };

  test('SIGINT shuts the router down: the call in flight rejects, finally runs, the status is 130, the context is gone', async () => {
    const { master, pid, exited, output } = await startMaster();
    assert.ok(exists(pid));
    master.kill('SIGINT');
    assert.deepEqual(await exited, { code: 130, signal: null }, output());
    assert.match(output(), /\ncaught ContextDisconnectedError\nfinally ran\n$/);
    assert.equal(exists(pid), false, 'the context was reaped');
  });

  test('a second signal ends the master at once, while the shutdown still waits for a context that does not answer', async () => {
    const { master, pid, exited, output } = await startMaster('busy');
    try {
      master.kill('SIGTERM');
      // The busy context cannot answer the shutdown, which would take the fixture's 10 s shutdownGrace.
      await new Promise((resolve) => setTimeout(resolve, 300));
      const second = Date.now();
      master.kill('SIGINT');
      // Status of the second signal: 130 for SIGINT.
      assert.deepEqual(await exited, { code: 130, signal: null }, output());
      assert.ok(Date.now() - second < 2000, `exited ${Date.now() - second} ms after the second signal`);
      assert.doesNotMatch(output(), /finally ran/);
    } finally {
      if (exists(pid)) process.kill(pid, 'SIGKILL');
    }
  });

  test('one process listener per signal serves every router; it is removed when they have shut down', async () => {
    const signals = ['SIGINT', 'SIGTERM', 'SIGHUP'] as const;
    const count = () => signals.map((signal) => process.listenerCount(signal));
    const before = count();
    const warnings: Error[] = [];
    const onWarning = (warning: Error) => warnings.push(warning);
    process.on('warning', onWarning);
    try {
      const routers = Array.from({ length: 20 }, () => new Router({ shutdownOnSignal: true }));
      assert.deepEqual(count(), [before[0] + 1, before[1] + 1, before[2]]);
      const hangup = new Router({ shutdownOnSignal: ['SIGHUP'] });
      const none = new Router({ shutdownOnSignal: false });
      assert.deepEqual(count(), [before[0] + 1, before[1] + 1, before[2] + 1]);
      await Promise.all(routers.slice(1).map((router) => router.shutdown()));
      assert.deepEqual(count(), [before[0] + 1, before[1] + 1, before[2] + 1], 'one router still wants them');
      await Promise.all([routers[0], hangup, none].map((router) => router?.shutdown()));
      assert.deepEqual(count(), before);
      await new Promise((resolve) => setImmediate(resolve));
      assert.deepEqual(
        warnings.filter((warning) => warning.name === 'MaxListenersExceededWarning'),
        [],
      );
    } finally {
      process.off('warning', onWarning);
    }
  });
});
