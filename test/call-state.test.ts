// A context is one interpreter reused for every call: calls that stop
// when asked, leave the process as they found it, and survive what a call
// leaves behind (issue 25). Each behaviour from a local context and over
// ssh; the resolver in a private mount namespace, as root.
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { CallError, type CallThis, type Context, type LogRecord, Router, TimeoutError } from 'tendril';
import { nodeBinary } from './support/nodes.js';
import { sleep, waitFor, waitGone } from './support/procs.js';
import { sshLogin, startTestbed, type Testbed } from './support/testbed.js';

/** Writes `path` after `ms`, unless the call's signal aborts first; then writes `<path>.stopped` with the reason's name. */
async function writeLater(this: CallThis, path: string, ms: number): Promise<string> {
  // biome-ignore lint/style/useNodejsImportProtocol: runs on Node 12.
  const fs = require('fs') as typeof import('node:fs');
  const signal = this.signal;
  try {
    await new Promise<void>((resolve, reject) => {
      const timer = setTimeout(resolve, ms);
      signal.addEventListener('abort', () => {
        clearTimeout(timer);
        reject(signal.reason);
      });
    });
  } catch (error) {
    fs.writeFileSync(`${path}.stopped`, String((error as Error).name));
    throw error;
  }
  fs.writeFileSync(path, 'written');
  return 'written';
}

/** What a call finds of the process it runs in. */
function processState() {
  return {
    cwd: process.cwd(),
    env: { ...process.env },
    argv: process.argv.slice(),
    umask: process.umask(),
    exitCode: process.exitCode,
    title: process.title,
    listeners: ['uncaughtException', 'unhandledRejection', 'exit', 'beforeExit', 'SIGUSR2', 'SIGTERM', 'warning'].map(
      (event) => process.listenerCount(event),
    ),
  };
}

/** Changes everything `processState` looks at; `n` makes each call's changes its own. */
function mutate(n: number): number {
  const os = require('node:os') as typeof import('node:os');
  process.chdir(os.tmpdir());
  process.env.TENDRIL_CALL_STATE = String(n);
  process.env.PATH = `/nowhere-${n}`;
  delete process.env.HOME;
  // A name every object has: the put-back must not take it for one the environment had.
  Reflect.set(process.env, 'toString', `env-${n}`);
  process.argv.push(`--flag-${n}`);
  process.umask(0o077);
  process.exitCode = 3;
  process.title = `mutated-${n}`;
  process.on('uncaughtException', () => {});
  process.once('unhandledRejection', () => {});
  process.on('exit', () => {});
  process.prependListener('SIGUSR2', () => {});
  process.on('warning', () => {});
  // Tendril's own listener, removed: it must come back.
  process.removeAllListeners('uncaughtException');
  return n;
}

interface Opened {
  router: Router;
  context: Context;
  scratch: string;
  cleanup?: () => void;
}

function suite(name: string, open: () => Promise<Opened>) {
  describe(name, () => {
    let router: Router;
    let context: Context;
    let scratch: string;
    let cleanup: (() => void) | undefined;
    const logs: LogRecord[] = [];
    before(async () => {
      ({ router, context, scratch, cleanup } = await open());
      router.on('log', (record) => logs.push(record));
    });
    after(async () => {
      await router.shutdown();
      cleanup?.();
    });

    test('a timed-out call is stopped through its signal: the file it would write after 1500 ms never appears', async () => {
      const path = join(scratch, `timeout-${Date.now()}`);
      await assert.rejects(context.callWith({ timeout: 1000 }, writeLater, path, 1500), (error: Error) => {
        assert.ok(error instanceof TimeoutError);
        assert.match(error.message, /signal was aborted there.*a busy synchronous loop.*runs on; pass isolate: true/);
        return true;
      });
      await sleep(1000);
      const seen = await context.call((p: string) => {
        const fs = require('node:fs') as typeof import('node:fs');
        return [fs.existsSync(p), fs.existsSync(`${p}.stopped`) && fs.readFileSync(`${p}.stopped`, 'utf8')];
      }, path);
      assert.deepEqual(
        seen,
        [false, 'TimeoutError'],
        'the signal aborted with a TimeoutError and the write never came',
      );
    });

    test("the caller's AbortSignal reaches callSignal() from tendril/child, as an AbortError", async () => {
      const controller = new AbortController();
      const path = join(scratch, `abort-${Date.now()}`);
      const call = context.callWith(
        { signal: controller.signal },
        async (p: string) => {
          const fs = require('node:fs') as typeof import('node:fs');
          const signal = (require('tendril/child') as typeof import('tendril/child')).callSignal();
          await new Promise((resolve) => signal.addEventListener('abort', resolve));
          fs.writeFileSync(p, `${signal.aborted} ${(signal.reason as Error).name}`);
        },
        path,
      );
      await sleep(200);
      controller.abort();
      await assert.rejects(call, { name: 'AbortError' });
      const written = await context.call((p: string) => {
        const fs = require('node:fs') as typeof import('node:fs');
        const deadline = Date.now() + 5000;
        while (!fs.existsSync(p) && Date.now() < deadline)
          Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, 10);
        return fs.readFileSync(p, 'utf8');
      }, path);
      assert.equal(written, 'true AbortError');
    });

    test('this.exec(): a command the call started is killed with its process group when the call times out', async () => {
      const path = join(scratch, `exec-${Date.now()}`);
      const ran = await context.call(async function (this: CallThis) {
        return this.exec('sh', ['-c', 'echo "$1"; exit 3', 'sh', 'with an argument']);
      });
      assert.deepEqual(ran, { stdout: 'with an argument\n', stderr: '', exitCode: 3, signal: null });
      await assert.rejects(
        context.callWith(
          { timeout: 500 },
          async function (this: CallThis, p: string) {
            // A group of two: the shell and a sleep it leaves in the background.
            await this.exec('sh', ['-c', 'echo $$ > "$1"; sleep 60 & sleep 60', 'sh', p]);
          },
          path,
        ),
        TimeoutError,
      );
      const pgid = Number((await context.call((p: string) => require('node:fs').readFileSync(p, 'utf8'), path)).trim());
      const groupGone = () =>
        context.call((group: number) => {
          try {
            process.kill(-group, 0);
            return false;
          } catch {
            return true;
          }
        }, pgid);
      for (let i = 0; i < 100 && !(await groupGone()); i++) await sleep(50);
      assert.equal(await groupGone(), true, `process group ${pgid} is gone`);
    });

    test('callSignal() after the first await says when to call it', async () => {
      await assert.rejects(
        context.call(async () => {
          await null;
          return (require('tendril/child') as typeof import('tendril/child')).callSignal();
        }),
        /callSignal\(\) must be called while a call's function starts, before its first await/,
      );
    });

    test('100 calls that change the process, interleaved with 100 that check: every check sees the original', async () => {
      const original = await context.call(processState);
      assert.deepEqual(original.argv, [original.argv[0], '<call>'], 'argv is the interpreter and <call>');
      for (let n = 0; n < 100; n++) {
        assert.equal(await context.call(mutate, n), n);
        assert.deepEqual(await context.call(processState), original, `after mutation ${n}`);
      }
      // Concurrently too: each change is undone as its call returns, before the next call runs.
      const calls: Promise<unknown>[] = [];
      for (let n = 0; n < 100; n++) calls.push(context.call(mutate, n), context.call(processState));
      const results = await Promise.all(calls);
      for (let i = 1; i < results.length; i += 2) assert.deepEqual(results[i], original);
    });

    test('isolate: true runs the call in a fresh interpreter, a child of the context, that exits after it', async () => {
      const [pid, parent, argv] = await context.callWith({ isolate: true }, () => [
        process.pid,
        process.ppid,
        process.argv,
      ]);
      assert.notEqual(pid, context.info.pid);
      assert.equal(parent, context.info.pid, "started by the context, on the context's host");
      assert.equal((argv as string[])[1], '<call>');
      const alive = (p: number) =>
        context.call((q: number) => {
          try {
            process.kill(q, 0);
            return !/^\S+ \(.*\) Z/.test(require('node:fs').readFileSync(`/proc/${q}/stat`, 'utf8'));
          } catch {
            return false;
          }
        }, p);
      for (let i = 0; i < 100 && (await alive(pid as number)); i++) await sleep(50);
      assert.equal(await alive(pid as number), false, 'the interpreter is gone once the call ended');
      // State it changed stays with it.
      await context.callWith({ isolate: true }, () => {
        (globalThis as Record<string, unknown>).leftBehind = 1;
        process.chdir('/');
      });
      assert.deepEqual(await context.call(() => (globalThis as Record<string, unknown>).leftBehind), undefined);
    });

    test('isolate: true with timeout 1000: a function that ignores its signal is killed, with what it started, before it writes at 1500 ms', async () => {
      const path = join(scratch, `isolated-${Date.now()}`);
      const began = Date.now();
      await assert.rejects(
        context.callWith(
          { isolate: true, timeout: 1000 },
          (p: string) => {
            const fs = require('node:fs') as typeof import('node:fs');
            const child = (require('node:child_process') as typeof import('node:child_process')).spawn('sleep', ['60']);
            fs.writeFileSync(`${p}.child`, String(child.pid));
            // Deaf to its signal: a busy loop, then the write.
            const end = Date.now() + 1500;
            while (Date.now() < end) {}
            fs.writeFileSync(p, 'written');
          },
          path,
        ),
        (error: Error) =>
          error instanceof TimeoutError && /the isolated interpreter running it was killed/.test(error.message),
      );
      assert.ok(Date.now() - began < 1000 + 2000, 'rejected once killed, not when the function would have ended');
      await sleep(1000);
      const seen = await context.call((p: string) => {
        const fs = require('node:fs') as typeof import('node:fs');
        const child = Number(fs.readFileSync(`${p}.child`, 'utf8'));
        let state = 'gone';
        try {
          state = fs.readFileSync(`/proc/${child}/stat`, 'utf8').replace(/^.*\) /, '')[0] as string;
        } catch {}
        return [fs.existsSync(p), state];
      }, path);
      assert.equal(seen[0], false, 'the write at 1500 ms never came');
      assert.ok(seen[1] === 'gone' || seen[1] === 'Z', `the sleep it started was killed (state ${seen[1]})`);
      // The context itself carries on, and the next isolated call gets a new interpreter.
      assert.equal(await context.callWith({ isolate: true }, () => 7), 7);
    });

    test('fresh: true evaluates shipped modules anew; without it, module state persists between calls', async () => {
      const counter = new URL('./fixtures/counter.js', import.meta.url);
      const shared = context.import<typeof import('./fixtures/counter.js')>(counter);
      const fresh = context.import<typeof import('./fixtures/counter.js')>(counter, { fresh: true });
      const first = await shared.next();
      assert.equal(await shared.next(), first + 1, 'the cached module keeps its count');
      assert.equal(await fresh.next(), 1, 'a fresh load starts from the beginning');
      assert.equal(await fresh.next(), 1);
      assert.equal(await shared.next(), first + 2, 'and leaves the cached one alone');
      const viaCall = await context.callWith({ fresh: true }, () => {
        const mod = require('./fixtures/counter.js') as typeof import('./fixtures/counter.js');
        return [mod.next(), mod.next()];
      });
      assert.deepEqual(viaCall, [1, 2]);
    });

    test('context.tmpdir(): one 0700 directory per context run, shared by calls, removed at shutdown', async () => {
      const directory = await context.tmpdir();
      assert.equal(await context.tmpdir(), directory);
      const seen = await context.call((dir: string) => {
        const fs = require('node:fs') as typeof import('node:fs');
        const { thisContext } = require('tendril/child') as typeof import('tendril/child');
        fs.writeFileSync(`${dir}/from-a-call`, 'x');
        return [thisContext().tmpdir(), (fs.statSync(dir).mode & 0o777).toString(8), require('node:os').tmpdir()];
      }, directory);
      assert.equal(seen[0], directory);
      assert.equal(seen[1], '700');
      assert.ok(directory.startsWith(`${seen[2]}/`), `${directory} is under the target's temporary directory`);
      const other = await router.local({ name: `${context.name}-second`, via: context });
      const otherDirectory = await other.tmpdir();
      assert.notEqual(otherDirectory, directory, 'each context has its own');
      await other.shutdown();
      assert.equal(
        await context.call((dir: string) => require('node:fs').existsSync(dir), otherDirectory),
        false,
        'removed when its context shut down',
      );
    });

    test("a throw from a call's stray timer and an unhandled rejection are log records naming the code; later calls go on", async () => {
      const before = logs.length;
      await context.call(() => {
        setTimeout(function strayTimer() {
          throw new Error('thrown after the call returned');
        }, 20);
        Promise.reject(new Error('rejected and never awaited'));
        return null;
      });
      await waitFor(() => logs.slice(before).some((r) => r.text.includes('strayTimer')), 5000);
      await waitFor(() => logs.slice(before).some((r) => r.text.includes('rejected and never awaited')), 5000);
      const texts = logs.slice(before).map((r) => r.text);
      assert.ok(
        texts.some((t) => /an uncaught exception in context .*thrown by a call's code at .*strayTimer/.test(t)),
        texts.join('\n'),
      );
      assert.ok(texts.some((t) => /an unhandled rejection in context .*\(the context carries on\)/.test(t)));
      assert.equal(await context.call((a: number, b: number) => a + b, 2, 3), 5);
    });
  });
}

suite('local context', async () => {
  const router = new Router();
  const context = await router.local({ name: 'state-local' });
  const scratch = mkdtempSync(join(tmpdir(), 'tendril-call-state-'));
  return { router, context, scratch, cleanup: () => rmSync(scratch, { recursive: true, force: true }) };
});

describe('over ssh', () => {
  let bed: Testbed;
  before(async () => {
    bed = await startTestbed();
  });
  after(() => bed?.stop());
  suite('ssh context', async () => {
    const router = new Router();
    const context = await router.ssh({ name: 'state-ssh', ...sshLogin(bed) });
    const scratch = await context.call(() => {
      const fs = require('node:fs') as typeof import('node:fs');
      const os = require('node:os') as typeof import('node:os');
      return fs.mkdtempSync(`${os.tmpdir()}/tendril-call-state-`);
    });
    return { router, context, scratch };
  });
});

describe('isolation as a default, through import(), and where it is refused', () => {
  test('new Router({ isolate: true }) isolates every call unless it says isolate: false', async () => {
    await using router = new Router({ isolate: true });
    const context = await router.local({ name: 'isolated-by-default' });
    const pid = () => process.pid;
    assert.notEqual(await context.call(pid), context.info.pid, 'call() runs in a fresh interpreter');
    assert.equal(await context.callWith({ isolate: false }, pid), context.info.pid, 'isolate: false opts out');
    const tasks = context.import<typeof import('./fixtures/tasks.js')>(new URL('./fixtures/tasks.js', import.meta.url));
    assert.notEqual(await tasks.pid(), context.info.pid, 'so do calls through import()');
    assert.throws(() => new Router({ isolate: 'yes' as never }), /isolate.*true or false/);
    // tendril's own calls are never isolated: they keep state in the context itself.
    const directory = await context.tmpdir();
    assert.equal(
      await context.callWith({ isolate: false }, () =>
        (require('tendril/child') as typeof import('tendril/child')).thisContext().tmpdir(),
      ),
      directory,
    );
    assert.equal((await context.exec('sh', ['-c', 'echo $PPID'])).stdout, String(context.info.pid));
  });

  test("an isolated call's own error named TimeoutError is the function's, not the call's timeout", async () => {
    await using router = new Router();
    const context = await router.local({ name: 'own-timeout-error' });
    const error = await context
      .callWith({ isolate: true, timeout: 10_000 }, () => {
        class TimeoutError extends Error {
          event = 'request';
        }
        throw new TimeoutError('the HTTP request timed out');
      })
      .catch((caught: unknown) => caught);
    assert.ok(error instanceof CallError, String(error));
    assert.equal(error.remoteName, 'TimeoutError');
    assert.equal(error.remoteMessage, 'the HTTP request timed out');
    assert.deepEqual(error.remoteFields, { event: 'request' });
  });

  test('a context refuses isolate: true for a call it makes to its parent', async () => {
    await using router = new Router();
    const context = await router.local({ name: 'no-isolation-here' });
    const outcome = await context.call(async () => {
      const { parent } = (require('tendril/child') as typeof import('tendril/child')).thisContext();
      try {
        await parent.callWith({ isolate: true }, () => 1);
        return 'made';
      } catch (error) {
        return String((error as Error).message);
      }
    });
    assert.match(outcome, /isolate.*isolated calls are made from the master/);
  });
});

describe('the temporary directory when the master dies', () => {
  test('a context whose master was killed with SIGKILL removes its directory as it exits', async () => {
    const master = spawn(process.execPath, [fileURLToPath(new URL('./fixtures/tmpdir-master.js', import.meta.url))], {
      stdio: ['ignore', 'pipe', 'inherit'],
    });
    const [pid, directory] = await new Promise<[number, string]>((resolve, reject) => {
      master.stdout.once('data', (chunk: Buffer) => resolve(JSON.parse(chunk.toString())));
      master.once('exit', () => reject(new Error('the master exited early')));
    });
    assert.ok(existsSync(`${directory}/left-by-a-call`));
    const exited = new Promise((resolve) => master.once('exit', resolve));
    master.kill('SIGKILL');
    await exited;
    assert.ok((await waitGone([pid], 3000)) <= 3000, 'the context exited');
    assert.equal(existsSync(directory), false, `${directory} was removed`);
  });
});

describe('Node 12, which has no AbortController', () => {
  test("a shipped function's this.signal aborts on timeout", async () => {
    await using router = new Router();
    const old = await router.local({ name: 'state-node12', nodePath: nodeBinary(12) });
    const scratch = mkdtempSync(join(tmpdir(), 'tendril-call-state-'));
    try {
      const path = join(scratch, 'x');
      await assert.rejects(old.callWith({ timeout: 300 }, writeLater, path, 1500), TimeoutError);
      await waitFor(() => {
        try {
          return readFileSync(`${path}.stopped`, 'utf8') === 'TimeoutError';
        } catch {
          return false;
        }
      }, 5000);
      assert.equal(await old.call(() => process.version.slice(0, 4)), 'v12.');
    } finally {
      rmSync(scratch, { recursive: true, force: true });
    }
  });
});

describe('resolver state, in a private mount namespace', () => {
  test('a rewritten resolv.conf and hosts are seen by the next call', async () => {
    assert.equal(
      process.getuid?.(),
      0,
      'this test mounts files over /etc in a new mount namespace: run the suite as root (CI does)',
    );
    await using router = new Router();
    const scratch = mkdtempSync(join(tmpdir(), 'tendril-resolver-'));
    try {
      const resolv = join(scratch, 'resolv.conf');
      const hosts = join(scratch, 'hosts');
      writeFileSync(resolv, 'nameserver 127.0.0.53\n');
      writeFileSync(hosts, '127.0.0.9 tendril-resolver-test\n');
      // unshare -m makes the new namespace's mounts private: the machine's own /etc is untouched.
      const context = await router.command({
        name: 'resolver',
        argv: [
          'unshare',
          '-m',
          'sh',
          '-c',
          'mount --bind "$1" /etc/resolv.conf && mount --bind "$2" /etc/hosts && shift 2 && exec "$@"',
          'sh',
          resolv,
          hosts,
        ],
      });
      const look = () => {
        const dns = require('node:dns') as typeof import('node:dns');
        return dns.promises.lookup('tendril-resolver-test').then((found) => [dns.getServers(), found.address]);
      };
      assert.deepEqual(await context.call(look), [['127.0.0.53'], '127.0.0.9']);
      // Rewritten in place: a bind mount follows the file, not its name.
      writeFileSync(resolv, 'nameserver 127.0.0.54\n');
      writeFileSync(hosts, '127.0.0.10 tendril-resolver-test\n');
      assert.deepEqual(await context.call(look), [['127.0.0.54'], '127.0.0.10']);
    } finally {
      rmSync(scratch, { recursive: true, force: true });
    }
  });
});
