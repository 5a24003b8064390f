// The UNIX listener: other processes of this user join the master's tree,
// call the contexts it holds, and are kept apart from it and each other.
import assert from 'node:assert/strict';
import { type ChildProcess, spawn } from 'node:child_process';
import { chmodSync, existsSync, mkdirSync, mkdtempSync, rmSync, statSync } from 'node:fs';
import { connect as connectRaw } from 'node:net';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { joinListener, type Listener, ListenerError, Router, type RouterWarning, serviceName } from 'tendril';
import {
  BOOT,
  CALL_FUNCTION,
  Context,
  encodeFrame,
  Message,
  ROUTER_SWITCH,
  type MessageSwitch as Switch,
} from '#dist/internal.js';

const ROOT = join(dirname(fileURLToPath(import.meta.url)), '..', '..');
const WORKER = join(ROOT, 'build', 'test', 'fixtures', 'listener-worker.js');

/** Runs the worker fixture; resolves with the JSON lines it printed once it exits. */
function runWorker(
  args: string[],
  options: { uid?: number; gid?: number; env?: NodeJS.ProcessEnv } = {},
): Promise<unknown[]> {
  const child = spawn(process.execPath, [WORKER, ...args], { stdio: ['ignore', 'pipe', 'inherit'], ...options });
  return collect(child);
}

function collect(child: ChildProcess): Promise<unknown[]> {
  return new Promise((resolve, reject) => {
    let out = '';
    child.stdout?.setEncoding('utf8').on('data', (text: string) => {
      out += text;
    });
    child.on('error', reject);
    child.on('close', () =>
      resolve(
        out
          .split('\n')
          .filter(Boolean)
          .map((line) => JSON.parse(line)),
      ),
    );
  });
}

/** Starts the worker fixture and resolves with its first printed line, leaving it running. */
function startWorker(args: string[]): Promise<{ child: ChildProcess; first: Record<string, unknown> }> {
  const child = spawn(process.execPath, [WORKER, ...args], { stdio: ['ignore', 'pipe', 'inherit'] });
  return new Promise((resolve, reject) => {
    let out = '';
    child.stdout?.setEncoding('utf8').on('data', (text: string) => {
      out += text;
      const line = out.split('\n')[0];
      if (out.includes('\n') && line) resolve({ child, first: JSON.parse(line) });
    });
    child.on('error', reject);
    child.on('exit', (code) => reject(new Error(`the worker exited (${code}) before printing`)));
  });
}

function exited(child: ChildProcess): Promise<void> {
  return new Promise((resolve) => {
    if (child.exitCode !== null || child.signalCode !== null) resolve();
    else child.on('exit', () => resolve());
  });
}

describe('router.listen() and connect()', () => {
  let scratch: string;
  let router: Router;
  let held: Context;
  let listener: Listener;
  let socket: string;

  before(async () => {
    scratch = mkdtempSync(join(tmpdir(), 'tendril-listener-'));
    socket = join(scratch, 'run', 'tendril.sock');
    router = new Router({ name: 'listening-master' });
    held = await router.local({ name: 'held' });
    listener = await router.listen(socket);
  });

  after(async () => {
    await router.shutdown();
    rmSync(scratch, { recursive: true, force: true });
  });

  test('the socket is 0600 in a 0700 directory the listener created', () => {
    assert.equal(statSync(dirname(socket)).mode & 0o777, 0o700);
    assert.equal(statSync(socket).mode & 0o777, 0o600);
    assert.ok(statSync(socket).isSocket());
  });

  test('workers get their own context IDs and call a context the master holds', async () => {
    const joined: number[] = [];
    const onJoin = (peer: { id: number }) => joined.push(peer.id);
    listener.on('join', onJoin);
    try {
      const outcomes = await Promise.all([1, 2, 3].map(() => runWorker([socket, 'calls', String(held.id), '5'])));
      const reports = outcomes.map((lines) => lines[0] as { id: number; name: string; pids: number[] });
      const ids = reports.map((report) => report.id);
      assert.equal(new Set(ids).size, 3, 'each worker has an ID of its own');
      for (const id of ids) assert.ok(id !== held.id && id > 0);
      assert.deepEqual(joined.sort(), [...ids].sort());
      for (const report of reports) {
        assert.match(report.name, /^worker-\d+$/);
        assert.deepEqual(report.pids, Array(5).fill(held.info.pid), 'every call ran in the held context');
      }
    } finally {
      listener.off('join', onJoin);
    }
  });

  test("workers share the master's pool: one context per target, released when they leave", async () => {
    const target = { method: 'local', name: 'pooled-by-workers' };
    const before = router.pool.stats();
    let left = 0;
    const allLeft = new Promise<void>((resolve) => {
      const onLeave = () => {
        if (++left < 4) return;
        listener.off('leave', onLeave);
        resolve();
      };
      listener.on('leave', onLeave);
    });
    const outcomes = await Promise.all(
      [1, 2, 3, 4].map(() => runWorker([socket, 'acquire', JSON.stringify(target), '3'])),
    );
    const reports = outcomes.map(
      (lines) => lines[0] as { contextId: number; label: string; pids: number[]; listed: number[] },
    );
    const contextIds = new Set(reports.map((report) => report.contextId));
    assert.equal(contextIds.size, 1, 'every worker got the same context');
    const after = router.pool.stats();
    assert.equal(after.misses - before.misses, 1, 'one start for four workers');
    assert.equal(after.hits - before.hits, 3);
    for (const report of reports) {
      assert.equal(report.label, 'local name=pooled-by-workers');
      assert.equal(new Set(report.pids).size, 1);
      assert.ok(report.listed.includes(report.contextId), 'contexts() lists what the master holds');
      assert.ok(report.listed.includes(held.id));
    }
    // The workers left without releasing: the master released their leases when they left.
    await allLeft;
    assert.equal(router.pool.stats().contexts, before.contexts + 1);
    assert.equal(router.pool.stats().idle, before.idle + 1, 'no lease holds the context any more');
    const lease = await router.pool.acquire(target as never);
    try {
      assert.equal(lease.context.id, [...contextIds][0], 'the master reuses it too');
      assert.equal(router.pool.stats().contexts, after.contexts);
    } finally {
      lease.release();
    }
  });

  test("the master calls a worker's service; a worker cannot use another's listener service", async () => {
    const { child, first } = await startWorker([socket, 'serve']);
    try {
      const workerId = first.id as number;
      const worker = listener.peers.find((peer) => peer.id === workerId);
      assert.ok(worker);
      const echo = serviceName<{ echo(text: string): string }>('echo');
      const context = new Context(router, workerId, worker.name, 0, {
        pid: worker.pid,
        nodeVersion: '',
        hostname: '',
        platform: '',
        arch: '',
      });
      assert.equal(await context.callService(echo, 'echo', 'hi'), `${worker.name} says hi`);
      const [stolen] = (await runWorker([socket, 'steal', String(workerId)])) as [{ code: string; message: string }];
      assert.equal(stolen.code, 'ERR_TENDRIL_SERVICE_REFUSED', JSON.stringify(stolen));
      assert.match(stolen.message, /refused by policy/);
    } finally {
      child.kill('SIGKILL');
      await exited(child);
    }
  });

  test('a worker that never closes its connection still exits when its work is done', { timeout: 30_000 }, async () => {
    const [report] = (await runWorker([socket, 'forget', String(held.id)])) as [{ id: number }];
    assert.equal(typeof report.id, 'number');
  });

  test('a worker that dies takes only its own context with it', async () => {
    const { child, first } = await startWorker([socket, 'hold', String(held.id)]);
    const id = first.id as number;
    const gone = new Promise<string>((resolve) =>
      router.on('disconnect', (contextId, reason) => {
        if (contextId === id) resolve(reason);
      }),
    );
    child.kill('SIGKILL');
    await exited(child);
    assert.match(await gone, /.+/);
    assert.equal(await held.call(() => 'still here'), 'still here');
    assert.ok(!listener.peers.some((peer) => peer.id === id));
  });

  test('a worker cannot claim another context ID', async () => {
    const warnings: RouterWarning[] = [];
    const onWarning = (warning: RouterWarning) => warnings.push(warning);
    router.on('warning', onWarning);
    try {
      // The fixture cannot forge; a hand-made peer stream can: it joins, then sends as the held context.
      const worker = await joinListener(socket, { name: 'forger' });
      const core = (worker as unknown as { [ROUTER_SWITCH]: Switch })[ROUTER_SWITCH];
      core.parentStream?.send(
        Message.encoded({ dst: held.id, src: held.id, auth: held.id, handle: CALL_FUNCTION, replyTo: 0 }, {}),
      );
      // A round trip after it: the forged message was handled (dropped) by then.
      assert.equal(await worker.context(held.id).call(() => 7), 7);
      await worker.close();
      assert.ok(
        warnings.some((warning) => warning.code === 'forged-id' && warning.message.includes(`src ID ${held.id}`)),
        JSON.stringify(warnings),
      );
    } finally {
      router.off('warning', onWarning);
    }
  });

  test('a live socket is refused, and the first listener keeps working', async () => {
    const second = new Router({ name: 'second-master' });
    try {
      await assert.rejects(second.listen(socket), (error: unknown) => {
        assert.ok(error instanceof ListenerError);
        assert.equal(error.code, 'ERR_TENDRIL_LISTENER_IN_USE');
        assert.match(error.message, /another process is listening there/);
        return true;
      });
    } finally {
      await second.shutdown();
    }
    const [report] = (await runWorker([socket, 'calls', String(held.id), '1'])) as [{ pids: number[] }];
    assert.deepEqual(report.pids, [held.info.pid]);
  });

  test('a shared directory is refused', async () => {
    const shared = join(scratch, 'shared');
    mkdirSync(shared, { mode: 0o755 });
    chmodSync(shared, 0o755);
    await assert.rejects(router.listen(join(shared, 'x.sock')), (error: unknown) => {
      assert.ok(error instanceof ListenerError);
      assert.match(error.message, /must be private to this user \(mode 0700\), but its mode is 0755/);
      return true;
    });
  });

  test('a stale socket is replaced', async () => {
    const stale = join(scratch, 'stale', 'tendril.sock');
    mkdirSync(dirname(stale), { mode: 0o700 });
    // A process that listened and died without closing leaves the socket file behind.
    await collect(
      spawn(
        process.execPath,
        ['-e', `require('net').createServer().listen(${JSON.stringify(stale)}, () => process.exit(0))`],
        { stdio: 'ignore' },
      ),
    );
    assert.ok(existsSync(stale) && statSync(stale).isSocket());
    const other = new Router({ name: 'stale-master' });
    try {
      const second = await other.listen(stale);
      const context = await other.local({ name: 'stale-held' });
      const [report] = (await runWorker([stale, 'calls', String(context.id), '1'])) as [{ pids: number[] }];
      assert.deepEqual(report.pids, [context.info.pid]);
      await second.close();
      assert.ok(!existsSync(stale), 'close() removes the socket');
    } finally {
      await other.shutdown();
    }
  });

  test('a process of another user is refused by its credentials, not only by file modes', async () => {
    const open = join(scratch, 'open', 'tendril.sock');
    mkdirSync(dirname(open), { mode: 0o700 });
    const other = new Router({ name: 'open-master' });
    try {
      const opened = await other.listen(open);
      const refusals: string[] = [];
      opened.on('refuse', (reason) => refusals.push(reason));
      // Misconfigured on purpose: the modes would let anyone in.
      chmodSync(dirname(open), 0o711);
      chmodSync(open, 0o666);
      chmodSync(scratch, 0o711);
      // The worker agrees to join root's master, so that the master's own check is what refuses it.
      const env = { ...process.env, ALLOW_UIDS: '[0]' };
      const [outcome] = (await runWorker([open, 'join'], { uid: 65534, gid: 65534, env })) as [
        { code: string; message: string },
      ];
      assert.equal(outcome.code, 'ERR_TENDRIL_LISTENER_REFUSED', JSON.stringify(outcome));
      assert.match(outcome.message, /runs as uid 65534; the listener of 'open-master' at .* admits only uid 0/);
      assert.equal(refusals.length, 1);
      assert.equal(opened.peers.length, 0);
    } finally {
      chmodSync(scratch, 0o700);
      await other.shutdown();
    }
  });

  test('a worker does not join a process of another user listening at the path', async () => {
    const shared = join(scratch, 'impostor');
    mkdirSync(shared, { mode: 0o777 });
    chmodSync(shared, 0o777);
    chmodSync(scratch, 0o711);
    const path = join(shared, 'tendril.sock');
    const impostor = spawn(
      process.execPath,
      ['-e', `require('net').createServer(() => {}).listen(${JSON.stringify(path)}, () => console.log('listening'))`],
      { uid: 65534, gid: 65534, stdio: ['ignore', 'pipe', 'inherit'] },
    );
    try {
      await new Promise((resolve, reject) => {
        impostor.stdout?.once('data', resolve);
        impostor.once('exit', (code) => reject(new Error(`the impostor exited (${code})`)));
      });
      const [outcome] = (await runWorker([path, 'join'])) as [{ code: string; message: string }];
      assert.equal(outcome.code, 'ERR_TENDRIL_LISTENER_UNTRUSTED', JSON.stringify(outcome));
      assert.match(outcome.message, /it runs as uid 65534, not as this process's user \(uid 0\)/);
    } finally {
      impostor.kill('SIGKILL');
      await exited(impostor);
      chmodSync(scratch, 0o700);
    }
  });

  test('without perl to read credentials, listen() fails at once and says so', async () => {
    const script = `import('tendril').then(async ({ Router }) => {
      const router = new Router();
      try { await router.listen(${JSON.stringify(join(scratch, 'noperl', 'x.sock'))}); console.log('listening'); }
      catch (error) { console.log(error.code + ': ' + error.message); }
      await router.shutdown();
    })`;
    const child = spawn(process.execPath, ['--input-type=module', '-e', script], {
      cwd: ROOT,
      env: { ...process.env, PATH: '/nonexistent' },
      stdio: ['ignore', 'pipe', 'inherit'],
    });
    let out = '';
    child.stdout?.setEncoding('utf8').on('data', (text: string) => {
      out += text;
    });
    await exited(child);
    assert.match(
      out,
      /^ERR_TENDRIL_LISTENER: cannot listen on .*: perl is not installed; the listener reads its peers' credentials/,
    );
  });

  test('a malformed hello is refused and the listener carries on', async () => {
    const refusals: string[] = [];
    const onRefuse = (reason: string) => refusals.push(reason);
    listener.on('refuse', onRefuse);
    try {
      await new Promise<void>((resolve, reject) => {
        const raw = connectRaw(socket);
        raw.on('error', reject);
        raw.on('connect', () =>
          raw.write(
            Buffer.concat(encodeFrame(Message.encoded({ dst: 0, src: 0, auth: 0, handle: BOOT, replyTo: 0 }, 'hi'))),
          ),
        );
        raw.resume();
        raw.on('close', () => resolve());
      });
      assert.equal(refusals.length, 1);
      assert.match(refusals[0] as string, /its hello is not \[version, name\]/);
      const [report] = (await runWorker([socket, 'calls', String(held.id), '1'])) as [{ pids: number[] }];
      assert.deepEqual(report.pids, [held.info.pid]);
    } finally {
      listener.off('refuse', onRefuse);
    }
  });

  test('closing the listener drops the workers and leaves the master its own contexts', async () => {
    const waiting = join(scratch, 'closing', 'tendril.sock');
    const closing = await router.listen(waiting);
    const { child, first } = await startWorker([waiting, 'wait']);
    assert.equal(typeof first.id, 'number');
    const rest = collect(child);
    await closing.close();
    const [last] = (await rest) as [{ disconnected: string }];
    assert.match(last.disconnected, /closed/);
    assert.ok(!existsSync(waiting));
    assert.equal(await held.call(() => 'unaffected'), 'unaffected');
    await assert.rejects(
      runWorker([waiting, 'join']).then(([outcome]) => {
        throw Object.assign(new Error((outcome as { message: string }).message), outcome);
      }),
      /there is no socket there/,
    );
  });
});
