// context.copy / fetch, file streams and router.copy, on real contexts:
// local, a Node 12 child, ssh, sudo through ssh; and the receiving side
// fed by hand, as an untrusted child could.
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { createHash, randomBytes } from 'node:crypto';
import {
  chmodSync,
  chownSync,
  existsSync,
  createReadStream as localReadStream,
  lstatSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  readlinkSync,
  rmSync,
  statSync,
  symlinkSync,
  utimesSync,
  watch,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Readable, Writable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { after, before, describe, test } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { Channel, type Context, FileTransferError, Router, type SshOptions, type TransferProgress } from 'tendril';
import { CALL_TOOLKIT, fetchedFrom, receiveInto, type SinkOptions } from '#dist/internal.js';
import { heapAfterGc } from './support/heap.js';
import { switchOf } from './support/internals.js';
import { nodeBinary } from './support/nodes.js';
import { waitFor } from './support/procs.js';
import { sshLogin, startTestbed, type Testbed } from './support/testbed.js';

const MiB = 1024 * 1024;

/** Resident set size of a local process, from /proc, in bytes. */
function rssOf(pid: number): number {
  const match = /^VmRSS:\s+(\d+) kB$/m.exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
  if (!match) throw new Error(`no VmRSS for process ${pid}`);
  return Number(match[1]) * 1024;
}

function sha256(path: string): string {
  return createHash('sha256').update(readFileSync(path)).digest('hex');
}

/** Writes `size` random bytes (in 1 MiB pieces) at `path`. */
function randomFile(path: string, size: number): void {
  writeFileSync(path, '');
  for (let written = 0; written < size; written += MiB) {
    writeFileSync(path, randomBytes(Math.min(MiB, size - written)), { flag: 'a' });
  }
}

/** Names in `dir` that look like a transfer's temporary files. */
function temps(dir: string): string[] {
  return readdirSync(dir).filter((name) => name.endsWith('.tendril-tmp'));
}

/** A small tree: files with modes and mtimes, a nested directory, a relative and an absolute symlink. */
function makeTree(root: string): void {
  mkdirSync(join(root, 'sub', 'deeper'), { recursive: true });
  writeFileSync(join(root, 'a.txt'), 'alpha\n');
  writeFileSync(join(root, 'sub', 'b.bin'), randomBytes(3 * MiB + 17));
  writeFileSync(join(root, 'sub', 'deeper', 'empty'), '');
  chmodSync(join(root, 'sub', 'b.bin'), 0o640);
  chmodSync(join(root, 'sub'), 0o750);
  symlinkSync('a.txt', join(root, 'link'));
  symlinkSync('/etc', join(root, 'outside'));
  utimesSync(join(root, 'a.txt'), new Date('2020-01-02T03:04:05Z'), new Date('2020-01-02T03:04:05Z'));
  utimesSync(join(root, 'sub'), new Date('2019-05-06T07:08:09Z'), new Date('2019-05-06T07:08:09Z'));
}

/** Asserts `copy` is a faithful copy of the tree made by makeTree. */
function assertSameTree(copy: string): void {
  assert.equal(readFileSync(join(copy, 'a.txt'), 'utf8'), 'alpha\n');
  assert.equal(statSync(join(copy, 'a.txt')).mtime.toISOString(), '2020-01-02T03:04:05.000Z');
  assert.equal(statSync(join(copy, 'sub')).mtime.toISOString(), '2019-05-06T07:08:09.000Z');
  assert.equal(statSync(join(copy, 'sub')).mode & 0o777, 0o750);
  assert.equal(statSync(join(copy, 'sub', 'b.bin')).mode & 0o777, 0o640);
  assert.equal(statSync(join(copy, 'sub', 'b.bin')).size, 3 * MiB + 17);
  assert.equal(statSync(join(copy, 'sub', 'deeper', 'empty')).size, 0);
  assert.ok(lstatSync(join(copy, 'link')).isSymbolicLink());
  assert.equal(readlinkSync(join(copy, 'link')), 'a.txt');
  assert.ok(
    lstatSync(join(copy, 'outside')).isSymbolicLink(),
    'a link out of the tree is copied as a link, not followed',
  );
  assert.equal(readlinkSync(join(copy, 'outside')), '/etc');
}

describe('files: copy, fetch, streams, fan-out', { timeout: 300_000 }, () => {
  let router: Router;
  let child: Context;
  let scratch: string;

  before(async () => {
    router = new Router();
    child = await router.local({ name: 'files-worker' });
    scratch = mkdtempSync(join(tmpdir(), 'tendril-files-'));
    chmodSync(scratch, 0o755);
  });
  after(async () => {
    await router.shutdown();
    rmSync(scratch, { recursive: true, force: true });
  });

  test('a file goes there and back whole: size, SHA-256, mode and mtime kept; into a directory under its name', async () => {
    const source = join(scratch, 'one.bin');
    randomFile(source, 5 * MiB + 3);
    chmodSync(source, 0o604);
    utimesSync(source, new Date('2021-03-04T05:06:07Z'), new Date('2021-03-04T05:06:07Z'));
    const copied = await child.copy(source, join(scratch, 'one.copy'));
    assert.equal(copied.files, 1);
    assert.equal(copied.bytes, 5 * MiB + 3);
    assert.equal(copied.sha256, sha256(source));
    assert.ok(copied.durationMs >= 0);
    assert.equal(statSync(join(scratch, 'one.copy')).mode & 0o777, 0o604);
    assert.equal(statSync(join(scratch, 'one.copy')).mtime.toISOString(), '2021-03-04T05:06:07.000Z');
    const fetched = await child.fetch(join(scratch, 'one.copy'), join(scratch, 'one.back'), { mode: 0o600 });
    assert.equal(fetched.sha256, sha256(source));
    assert.equal(statSync(join(scratch, 'one.back')).mode & 0o777, 0o600);
    mkdirSync(join(scratch, 'into'));
    await child.copy(source, join(scratch, 'into'));
    assert.equal(sha256(join(scratch, 'into', 'one.bin')), sha256(source));
    assert.deepEqual(temps(scratch), []);
  });

  test('a tree goes there and back: modes, mtimes, symlinks as links (never followed); a second copy merges', async () => {
    const tree = join(scratch, 'tree');
    makeTree(tree);
    const grandchild = await router.local({ name: 'files-grandchild', via: child });
    const copied = await grandchild.copy(tree, join(scratch, 'tree.copy'));
    assert.deepEqual(
      { files: copied.files, directories: copied.directories, links: copied.links, bytes: copied.bytes },
      { files: 3, directories: 3, links: 2, bytes: 6 + 3 * MiB + 17 },
    );
    assert.equal(copied.sha256, undefined);
    assertSameTree(join(scratch, 'tree.copy'));
    writeFileSync(join(scratch, 'tree.copy', 'kept'), 'mine');
    await grandchild.copy(tree, join(scratch, 'tree.copy'));
    assert.equal(readFileSync(join(scratch, 'tree.copy', 'kept'), 'utf8'), 'mine', 'merged into, not replaced');
    await grandchild.fetch(join(scratch, 'tree.copy'), join(scratch, 'tree.back'), { recursive: true });
    assertSameTree(join(scratch, 'tree.back'));
  });

  test('a fetch takes a file unless asked for a tree; a tree lands at a new path or under its own name, and merges into a directory there only with merge: true', async () => {
    const site = join(scratch, 'site');
    mkdirSync(join(site, 'css'), { recursive: true });
    writeFileSync(join(site, 'index.html'), 'v1');
    writeFileSync(join(site, 'css', 'main.css'), 'h1 {}');
    await assert.rejects(child.fetch(site, join(scratch, 'site.file')), (error: FileTransferError) => {
      assert.equal(error.code, 'EISDIR');
      assert.equal(error.contextName, 'files-worker');
      assert.match(error.message, /recursive/);
      return true;
    });
    assert.equal(existsSync(join(scratch, 'site.file')), false);
    // Nothing there: the tree is the new path.
    await child.fetch(site, join(scratch, 'site.new'), { recursive: true });
    assert.deepEqual(readdirSync(join(scratch, 'site.new')).sort(), ['css', 'index.html']);
    // An existing directory: the tree goes in it, under the name of the path fetched.
    const backups = join(scratch, 'backups');
    mkdirSync(backups);
    const result = await child.fetch(site, backups, { recursive: true });
    assert.deepEqual([result.files, result.directories], [2, 2]);
    assert.deepEqual(readdirSync(backups), ['site']);
    assert.equal(readFileSync(join(backups, 'site', 'index.html'), 'utf8'), 'v1');
    // Again: it is there, and is not merged into unless asked; nothing is written.
    writeFileSync(join(site, 'index.html'), 'v2');
    writeFileSync(join(backups, 'site', 'mine'), 'kept');
    await assert.rejects(child.fetch(site, `${backups}/`, { recursive: true }), (error: FileTransferError) => {
      assert.equal(error.code, 'EEXIST');
      assert.equal(error.path, join(backups, 'site'));
      assert.match(error.message, /merge: true/);
      return true;
    });
    assert.equal(readFileSync(join(backups, 'site', 'index.html'), 'utf8'), 'v1');
    await child.fetch(site, backups, { recursive: true, merge: true });
    assert.equal(readFileSync(join(backups, 'site', 'index.html'), 'utf8'), 'v2');
    assert.equal(readFileSync(join(backups, 'site', 'mine'), 'utf8'), 'kept');
    assert.deepEqual(temps(join(backups, 'site')), []);
  });

  test('a fetch of a symlink to a file gives the file, as cp and scp do, and so does a read stream; with recursive, a link is written as a link', async () => {
    const links = join(scratch, 'links');
    mkdirSync(links);
    writeFileSync(join(links, 'real.conf'), 'port = 8080\n');
    symlinkSync('real.conf', join(links, 'current.conf'));
    const fetched = await child.fetch(join(links, 'current.conf'), join(scratch, 'current.back'));
    assert.deepEqual([fetched.files, fetched.links, fetched.bytes], [1, 0, 12]);
    assert.ok(lstatSync(join(scratch, 'current.back')).isFile());
    assert.equal(readFileSync(join(scratch, 'current.back'), 'utf8'), 'port = 8080\n');
    // Into a directory, under the name asked for (the link's), not its target's.
    mkdirSync(join(scratch, 'links.into'));
    await child.fetch(join(links, 'current.conf'), join(scratch, 'links.into'));
    assert.deepEqual(readdirSync(join(scratch, 'links.into')), ['current.conf']);
    let streamed = '';
    for await (const chunk of child.createReadStream(join(links, 'current.conf'))) streamed += String(chunk);
    assert.equal(streamed, 'port = 8080\n');
    // A link to a directory is a directory: not without recursive.
    symlinkSync('.', join(links, 'self'));
    await assert.rejects(child.fetch(join(links, 'self'), join(scratch, 'self.back')), { code: 'EISDIR' });
    // Asked for a tree, the path asked for is taken as it is: a link, written as a link.
    const tree = await child.fetch(join(links, 'current.conf'), join(scratch, 'current.link'), { recursive: true });
    assert.deepEqual([tree.files, tree.links], [0, 1]);
    assert.equal(readlinkSync(join(scratch, 'current.link')), 'real.conf');
  });

  test('onProgress reports bytes, total and rate, the last time with everything', async () => {
    const source = join(scratch, 'progress.bin');
    randomFile(source, 24 * MiB);
    const reports: TransferProgress[] = [];
    await child.copy(source, join(scratch, 'progress.copy'), { onProgress: (p) => reports.push(p) });
    const last = reports.at(-1) as TransferProgress;
    assert.deepEqual([last.bytes, last.total], [24 * MiB, 24 * MiB]);
    assert.ok(last.rate > 0);
    for (let i = 1; i < reports.length; i++)
      assert.ok((reports[i] as TransferProgress).bytes >= (reports[i - 1] as TransferProgress).bytes);
    const fetched: TransferProgress[] = [];
    await child.fetch(source, join(scratch, 'progress.back'), { onProgress: (p) => fetched.push(p) });
    assert.deepEqual([fetched.at(-1)?.bytes, fetched.at(-1)?.total], [24 * MiB, 24 * MiB]);
  });

  test('streams: a Writable whose file appears only on end(), destroy() leaves nothing; a Readable under backpressure', async () => {
    const target = join(scratch, 'streamed.txt');
    const writable = child.createWriteStream(target, { mode: 0o640 });
    writable.write('hello ');
    await new Promise<void>((resolve) => writable.write(Buffer.from('world'), () => resolve()));
    assert.equal(existsSync(target), false, 'not under its name before end()');
    await new Promise<void>((resolve, reject) => writable.end(() => resolve()).on('error', reject));
    assert.equal(readFileSync(target, 'utf8'), 'hello world');
    assert.equal(statSync(target).mode & 0o777, 0o640);
    assert.equal(writable.result?.sha256, createHash('sha256').update('hello world').digest('hex'));

    const abandoned = join(scratch, 'abandoned.txt');
    const broken = child.createWriteStream(abandoned);
    await new Promise<void>((resolve) => broken.write('partial', () => resolve()));
    await new Promise<void>((resolve) =>
      broken
        .on('error', () => undefined)
        .on('close', resolve)
        .destroy(new Error('changed my mind')),
    );
    assert.equal(existsSync(abandoned), false);
    assert.deepEqual(temps(scratch), []);

    const big = join(scratch, 'stream.bin');
    randomFile(big, 20 * MiB);
    const piped = join(scratch, 'stream.copy');
    await pipeline(child.createReadStream(big), child.createWriteStream(piped));
    assert.equal(sha256(piped), sha256(big));
    // A reader that does not read holds the remote reader back: far less than the file is buffered here.
    const paused = child.createReadStream(big);
    await new Promise((resolve) => paused.once('readable', resolve));
    await new Promise((resolve) => setTimeout(resolve, 300));
    assert.ok(paused.readableLength < 4 * MiB, `buffered ${paused.readableLength}`);
    const hash = createHash('sha256');
    await pipeline(
      paused,
      new Writable({
        write(chunk, _e, callback) {
          hash.update(chunk);
          callback();
        },
      }),
    );
    assert.equal(hash.digest('hex'), sha256(big));
    await assert.rejects(
      pipeline(child.createReadStream(join(scratch, 'missing')), new Writable({ write: (_c, _e, cb) => cb() })),
      (error: FileTransferError) => error instanceof FileTransferError && error.code === 'ENOENT',
    );
    await pipeline(Readable.from([Buffer.from('x')]), child.createWriteStream(join(scratch, 'x.txt')));
    assert.equal(readFileSync(join(scratch, 'x.txt'), 'utf8'), 'x');
  });

  test('errors name the context and the path: ENOENT both ways, and a local source that is missing', async () => {
    await assert.rejects(child.fetch('/nonexistent/tendril', join(scratch, 'nothing')), (error: FileTransferError) => {
      assert.ok(error instanceof FileTransferError);
      assert.equal(error.code, 'ENOENT');
      assert.equal(error.contextName, 'files-worker');
      assert.equal(error.path, '/nonexistent/tendril');
      assert.match(error.message, /files-worker/);
      return true;
    });
    await assert.rejects(child.copy(join(scratch, 'one.bin'), '/nonexistent/dir/file'), (error: FileTransferError) => {
      assert.equal(error.code, 'ENOENT');
      assert.equal(error.contextName, 'files-worker');
      assert.equal(error.path, '/nonexistent/dir/file');
      return true;
    });
    await assert.rejects(child.copy(join(scratch, 'not-here'), join(scratch, 'x')), (error: FileTransferError) => {
      assert.equal(error.code, 'ENOENT');
      assert.equal(error.contextName, 'master');
      return true;
    });
    assert.equal(existsSync(join(scratch, 'nothing')), false);
  });

  test('ENOSPC on a full tmpfs: the copy fails, its temporary file is gone, a copy in flight beside it succeeds', async () => {
    const mount = join(scratch, 'small');
    mkdirSync(mount);
    execFileSync('mount', ['-t', 'tmpfs', '-o', 'size=2m', 'tmpfs', mount]);
    try {
      const source = join(scratch, 'too-big.bin');
      randomFile(source, 8 * MiB);
      const [full, beside] = await Promise.allSettled([
        child.copy(source, join(mount, 'too-big.bin')),
        child.copy(source, join(scratch, 'beside.bin')),
      ]);
      assert.equal(full.status, 'rejected');
      const error = (full as PromiseRejectedResult).reason as FileTransferError;
      assert.ok(error instanceof FileTransferError, String(error));
      assert.equal(error.code, 'ENOSPC');
      assert.equal(error.path, join(mount, 'too-big.bin'));
      assert.equal(error.contextName, 'files-worker');
      assert.deepEqual(readdirSync(mount), []);
      assert.equal(beside.status, 'fulfilled');
      assert.equal(sha256(join(scratch, 'beside.bin')), sha256(source));
    } finally {
      execFileSync('umount', [mount]);
    }
  });

  test('a hash mismatch is refused and leaves nothing', async () => {
    const channel = new Channel(router);
    const target = join(scratch, 'forged.txt');
    const call = child[CALL_TOOLKIT]('filesReceive', [channel.otherEnd(), target, {}], {}, 'forged copy');
    const data = Buffer.from('the bytes');
    await channel.send({
      t: 'begin',
      kind: 'file',
      name: 'forged.txt',
      files: 1,
      directories: 0,
      links: 0,
      bytes: data.length,
    });
    await channel.send({ t: 'f', p: '', s: data.length, m: 0o644, mt: Date.now() });
    await channel.send(data);
    await channel.send({ t: 'e', n: data.length, h: createHash('sha256').update('other bytes').digest('hex') });
    await channel.send({ t: 'end' });
    channel.close();
    await assert.rejects(call, (error: FileTransferError) => {
      assert.ok(error instanceof FileTransferError);
      assert.equal(error.code, 'ERR_TENDRIL_HASH_MISMATCH');
      assert.equal(error.contextName, 'files-worker');
      assert.equal(error.path, target);
      return true;
    });
    assert.equal(existsSync(target), false);
    assert.deepEqual(temps(scratch), []);
  });

  /** The child sends `values` on a Channel, as its answer to a fetch, and the master's sink writes them at `into`. */
  async function answerFromChild(values: unknown[], into: string, options: SinkOptions) {
    const channel = new Channel<unknown, unknown>(router);
    const sending = child.call(
      async (peer: Channel<unknown, unknown>, list: unknown[]) => {
        for (const value of list) await peer.send(value).catch(() => undefined);
      },
      channel.otherEnd(),
      values,
    );
    try {
      return await receiveInto(channel[Symbol.asyncIterator](), into, 'master', options);
    } finally {
      await sending;
    }
  }

  test('what a child sends is checked: no absolute path, no .., nothing written through a symlink, bounded counts', async () => {
    const dest = join(scratch, 'untrusted');
    const victim = join(scratch, 'victim');
    mkdirSync(victim);
    const begin = { t: 'begin', kind: 'dir', name: 'x', files: 1, directories: 1, links: 1, bytes: 1 };
    const root = { t: 'd', p: '', m: 0o755, mt: Date.now() };
    const file = (p: string) => [
      { t: 'f', p, s: 1, m: 0o644, mt: 0 },
      Buffer.from('!'),
      { t: 'e', n: 1, h: createHash('sha256').update('!').digest('hex') },
    ];
    const attempts: unknown[][] = [
      [begin, root, ...file('/etc/evil')],
      [begin, root, ...file('../victim/evil')],
      [begin, root, ...file('a/./b')],
      [begin, root, { t: 'l', p: 'escape', to: victim, mt: 0 }, ...file('escape/evil')],
      [{ ...begin, files: 2_000_000 }],
      [{ ...begin, kind: 'file', name: '../up' }],
    ];
    for (const values of attempts) {
      await assert.rejects(
        answerFromChild(values, dest, {}),
        (error: FileTransferError) => error instanceof FileTransferError && error.code === 'ERR_TENDRIL_BAD_ENTRY',
      );
    }
    assert.deepEqual(readdirSync(victim), []);
    assert.equal(existsSync('/etc/evil'), false);
    assert.equal(existsSync(join(scratch, 'up')), false);
  });

  test('what a child answers to a fetch cannot pick the file name, set special mode bits or touch the directory fetched into', async () => {
    const home = join(scratch, 'home');
    mkdirSync(home, { mode: 0o750 });
    utimesSync(home, 1_000_000, 1_000_000);
    const data = Buffer.from('echo hello\n');
    const hash = createHash('sha256').update(data).digest('hex');
    const fileEntry = (p: string, m: number) => [
      { t: 'f', p, s: data.length, m, mt: 0 },
      data,
      { t: 'e', n: data.length, h: hash },
    ];
    /** Plays a hostile child answering `fetch(remotePath, into)`, through the options fetch gives its sink. */
    const answer = (remotePath: string, into: string, values: unknown[], recursive = false) =>
      answerFromChild(values, into, fetchedFrom(remotePath, { recursive }));
    // Asked for /etc/hostname into a directory, it names the file .bashrc (CVE-2019-6111's trick).
    const renamed = {
      t: 'begin',
      kind: 'file',
      name: '.bashrc',
      files: 1,
      directories: 0,
      links: 0,
      bytes: data.length,
    };
    await assert.rejects(
      answer('/etc/hostname', `${home}/`, [renamed, ...fileEntry('', 0o644), { t: 'end' }]),
      (error: FileTransferError) => error.code === 'ERR_TENDRIL_BAD_ENTRY' && /\.bashrc/.test(error.message),
    );
    assert.deepEqual(readdirSync(home), []);
    // A tree with setuid and world-writable modes, fetched into the existing home directory: it lands in home/x.
    const tree = { t: 'begin', kind: 'dir', name: 'x', files: 1, directories: 2, links: 0, bytes: data.length };
    await answer(
      '/srv/x',
      home,
      [
        tree,
        { t: 'd', p: '', m: 0o777, mt: 0 },
        { t: 'd', p: 'sub', m: 0o777, mt: 0 },
        ...fileEntry('sub/tool', 0o6777),
        { t: 'end' },
      ],
      true,
    );
    assert.deepEqual(readdirSync(home), ['x']);
    const umask = Number.parseInt(
      /^Umask:\s+([0-7]+)$/m.exec(readFileSync('/proc/self/status', 'utf8'))?.[1] ?? '22',
      8,
    );
    assert.equal(
      statSync(join(home, 'x', 'sub', 'tool')).mode & 0o7777,
      0o777 & ~umask,
      'no setuid, setgid or sticky bit; the umask applies',
    );
    assert.equal(statSync(join(home, 'x', 'sub')).mode & 0o7777, 0o777 & ~umask);
    assert.equal(statSync(home).mode & 0o7777, 0o750, 'the directory fetched into keeps its mode');
    // Writing into it made its time now; the child's (0) was not applied.
    assert.ok(statSync(home).mtimeMs > 1_000_000_000, "it is not given the child's time");
    // File data that does not add up to the total announced is refused.
    const short = { ...renamed, name: 'hostname', bytes: data.length + 1 };
    await assert.rejects(
      answer('/etc/hostname', join(scratch, 'short'), [short, ...fileEntry('', 0o644), { t: 'end' }]),
      (error: FileTransferError) => error.code === 'ERR_TENDRIL_SIZE_MISMATCH',
    );
  });

  test('a read stream destroyed before it is read closes, and the context lets go of the file', async () => {
    const source = join(scratch, 'unread.bin');
    randomFile(source, 64 * MiB);
    const reader = await router.local({ name: 'files-unread' });
    const stream = reader.createReadStream(source);
    const opened = () =>
      readdirSync(`/proc/${reader.info.pid}/fd`).some((fd) => {
        try {
          return readlinkSync(`/proc/${reader.info.pid}/fd/${fd}`) === source;
        } catch {
          return false;
        }
      });
    // Not read: the context fills its window and waits for credit.
    await waitFor(opened, 10_000);
    await sleep(300);
    const closed = new Promise<string>((resolve) => stream.once('close', () => resolve('closed')));
    stream.destroy();
    const stop = new AbortController();
    const hang = sleep(20_000, 'no close 20 s after destroy()', { signal: stop.signal });
    hang.catch(() => undefined);
    try {
      assert.equal(await Promise.race([closed, hang]), 'closed');
    } finally {
      stop.abort();
    }
    await waitFor(() => !opened(), 10_000);
    await reader.shutdown();
  });

  test('a context shut down in the middle of a copy leaves no temporary file', async () => {
    const source = join(scratch, 'cut.bin');
    randomFile(source, 64 * MiB);
    const into = join(scratch, 'cut');
    mkdirSync(into);
    const doomed = await router.local({ name: 'files-doomed' });
    let shutting: Promise<void> | undefined;
    // As soon as the context opens its temporary file: the first progress report (200 ms) can come
    // after the whole copy on a fast machine.
    const watcher = watch(into, () => {
      shutting ??= doomed.shutdown();
    });
    try {
      await assert.rejects(doomed.copy(source, join(into, 'cut.bin')));
      await shutting;
    } finally {
      watcher.close();
    }
    assert.deepEqual(readdirSync(into), []);
  });

  test('an abort signal stops a copy and a fetch: rejected with its reason, no file, no temporary file', async () => {
    const source = join(scratch, 'abort.bin');
    randomFile(source, 64 * MiB);
    for (const direction of ['copy', 'fetch'] as const) {
      const controller = new AbortController();
      const target = join(scratch, `aborted-${direction}`);
      const abort = () => controller.abort();
      // Mid-transfer: at the first progress report, or (a fast machine moves 64 MiB in less than its 200 ms) after 30 ms.
      const early = setTimeout(abort, 30);
      const options = { signal: controller.signal, onProgress: (p: TransferProgress) => p.bytes > 0 && abort() };
      const transfer =
        direction === 'copy' ? child.copy(source, target, options) : child.fetch(source, target, options);
      transfer.finally(() => clearTimeout(early)).catch(() => undefined);
      await assert.rejects(transfer, (error: Error) => error.name === 'AbortError');
      assert.equal(existsSync(target), false);
      assert.deepEqual(temps(scratch), []);
    }
  });

  test('router.copy to three grandchildren under one intermediate crosses the first hop once', async () => {
    const intermediate = await router.local({ name: 'fan-parent' });
    const leaves = await Promise.all([1, 2, 3].map((n) => router.local({ name: `fan-${n}`, via: intermediate })));
    const source = join(scratch, 'fan.bin');
    randomFile(source, 16 * MiB);
    const firstHop = switchOf(router).expectedStream(intermediate.id);
    assert.ok(firstHop);
    const before = firstHop.stats.bytesOut;
    const into = join(scratch, 'fan');
    mkdirSync(into);
    const results = await router.copy(source, `${into}/`, leaves);
    const crossed = firstHop.stats.bytesOut - before;
    console.log(
      `fan-out of ${16 * MiB} bytes to 3 grandchildren: ${crossed} bytes on the first hop (${(crossed / (16 * MiB)).toFixed(3)}x the file)`,
    );
    assert.ok(crossed < 1.1 * 16 * MiB, `${crossed} bytes crossed the first hop`);
    assert.deepEqual(
      results.map((r) => [r.context.name, r.status]),
      leaves.map((leaf) => [leaf.name, 'fulfilled']),
    );
    for (const r of results) assert.equal(r.status === 'fulfilled' && r.value.sha256, sha256(source));
    assert.equal(sha256(join(into, 'fan.bin')), sha256(source));
    assert.deepEqual(await router.copy(source, into, []), []);

    // Every target fails alike, each error naming its own context; a direct child among them too.
    const failed = await router.copy(source, '/nonexistent/fan.bin', [...leaves, child]);
    for (const outcome of failed) {
      assert.equal(outcome.status, 'rejected');
      const reason = (outcome as { reason: Error }).reason as FileTransferError;
      assert.ok(reason instanceof FileTransferError);
      assert.equal(reason.code, 'ENOENT');
      assert.equal(reason.contextName, outcome.context.name);
    }
    await intermediate.shutdown();
  });

  test('owner and group are kept with preserve when the writing side is root', async () => {
    const source = join(scratch, 'owned.txt');
    writeFileSync(source, 'owned');
    chownSync(source, 4321, 4322);
    await child.copy(source, join(scratch, 'owned.plain'));
    assert.equal(statSync(join(scratch, 'owned.plain')).uid, 0);
    await child.copy(source, join(scratch, 'owned.kept'), { preserve: true });
    const kept = statSync(join(scratch, 'owned.kept'));
    assert.deepEqual([kept.uid, kept.gid], [4321, 4322]);
    await child.fetch(source, join(scratch, 'owned.back'), { preserve: { owner: true } });
    assert.equal(statSync(join(scratch, 'owned.back')).uid, 4321);
  });

  test('memory stays flat: 1 GiB each way through master → child → grandchild, RSS sampled from /proc', async () => {
    const middle = await router.local({ name: 'rss-middle' });
    const leaf = await router.local({ name: 'rss-leaf', via: middle });
    const size = 1024 * MiB;
    const source = join(scratch, 'rss.bin');
    randomFile(source, size);
    // A first transfer each way takes each process to its working set (services loaded and compiled,
    // heap and allocator grown: about 40 MiB once, in the first context to move a big file); what is
    // measured is what moving 1 GiB more adds, which would be hundreds of MiB without flow control.
    const warm = join(scratch, 'rss.warm');
    randomFile(warm, 64 * MiB);
    await leaf.copy(warm, join(scratch, 'rss.warm.copy'));
    await leaf.fetch(warm, join(scratch, 'rss.warm.back'));
    rmSync(join(scratch, 'rss.warm.copy'));
    rmSync(join(scratch, 'rss.warm.back'));
    const heapBefore = heapAfterGc();
    const processes: [string, () => number][] = [
      ['master', () => process.memoryUsage.rss()],
      ['middle', () => rssOf(middle.info.pid)],
      ['leaf', () => rssOf(leaf.info.pid)],
    ];
    const start = processes.map(([, rss]) => rss());
    const peak = [...start];
    // Sampled, not asked for by a call: a call would queue behind the transfer.
    const sampler = setInterval(() => {
      processes.forEach(([, rss], i) => {
        peak[i] = Math.max(peak[i] as number, rss());
      });
    }, 20);
    const started = Date.now();
    try {
      await leaf.copy(source, join(scratch, 'rss.copy'));
      await leaf.fetch(join(scratch, 'rss.copy'), join(scratch, 'rss.back'));
    } finally {
      clearInterval(sampler);
    }
    const seconds = (Date.now() - started) / 1000;
    const heapGrowth = (heapAfterGc() - heapBefore) / MiB;
    const growth = processes.map(([name], i) => [name, ((peak[i] as number) - (start[i] as number)) / MiB] as const);
    console.log(
      `RSS growth moving 1 GiB each way in ${seconds.toFixed(1)} s (MiB): ${growth.map(([n, g]) => `${n} ${g.toFixed(1)}`).join(', ')}; master heap after GC ${heapGrowth.toFixed(1)} MiB`,
    );
    assert.equal(sha256(join(scratch, 'rss.back')), sha256(source));
    for (const [name, mib] of growth) assert.ok(mib < 64, `${name} grew by ${mib.toFixed(1)} MiB moving 1 GiB`);
    assert.ok(heapGrowth < 64, `the master's heap after GC grew by ${heapGrowth.toFixed(1)} MiB`);
    for (const name of ['rss.bin', 'rss.copy', 'rss.back']) rmSync(join(scratch, name));
    await middle.shutdown();
  });

  test('Node 12 as the remote side: a file and a tree both ways', async () => {
    const old = await router.local({ name: 'files-node12', nodePath: nodeBinary(12) });
    assert.match(old.info.nodeVersion, /^v12\./);
    const source = join(scratch, 'one.bin');
    const copied = await old.copy(source, join(scratch, 'node12.copy'));
    assert.equal(copied.sha256, sha256(source));
    const fetched = await old.fetch(join(scratch, 'node12.copy'), join(scratch, 'node12.back'));
    assert.equal(fetched.sha256, sha256(source));
    await old.copy(join(scratch, 'tree'), join(scratch, 'tree12'));
    await old.fetch(join(scratch, 'tree12'), join(scratch, 'tree12.back'), { recursive: true });
    assertSameTree(join(scratch, 'tree12.back'));
    const hash = createHash('sha256');
    for await (const chunk of old.createReadStream(source)) hash.update(chunk as Buffer);
    assert.equal(hash.digest('hex'), sha256(source));
    await pipeline(localReadStream(source), old.createWriteStream(join(scratch, 'node12.streamed')));
    assert.equal(sha256(join(scratch, 'node12.streamed')), sha256(source));
    await old.shutdown();
  });
});

describe('files over ssh and sudo (test bed)', { timeout: 300_000 }, () => {
  let bed: Testbed;
  let router: Router;
  let ssh: Context;
  let scratch: string;

  before(async () => {
    bed = await startTestbed();
    router = new Router();
    const options: SshOptions = sshLogin(bed);
    ssh = await router.ssh({ ...options, name: 'files-ssh' });
    scratch = mkdtempSync(join(tmpdir(), 'tendril-files-ssh-'));
    chmodSync(scratch, 0o777);
  });
  after(async () => {
    await router.shutdown();
    await bed.stop();
    rmSync(scratch, { recursive: true, force: true });
  });

  test('copy and fetch over ssh, and through sudo on it', async () => {
    // Each transfer is a few MiB on loopback: past a minute it is stuck, and the step that was says so.
    const step = <T>(what: string, run: (signal: AbortSignal) => Promise<T>): Promise<T> =>
      run(AbortSignal.timeout(60_000)).catch((error: Error) => {
        throw error.name === 'TimeoutError' ? new Error(`${what} did not finish within 60 s`, { cause: error }) : error;
      });
    const source = join(scratch, 'ssh.bin');
    randomFile(source, 6 * MiB + 1);
    chmodSync(source, 0o644);
    const copied = await step('copy over ssh', (signal) => ssh.copy(source, join(scratch, 'ssh.copy'), { signal }));
    assert.equal(copied.sha256, sha256(source));
    assert.equal(
      statSync(join(scratch, 'ssh.copy')).uid,
      Number(execFileSync('id', ['-u', bed.accounts.sudoer.name], { encoding: 'utf8' })),
    );
    const back = await step('fetch over ssh', (signal) =>
      ssh.fetch(join(scratch, 'ssh.copy'), join(scratch, 'ssh.back'), { signal }),
    );
    assert.equal(back.sha256, sha256(source));

    const target = await router.sudo({ via: ssh, username: bed.accounts.target.name, name: 'files-sudo' });
    const viaSudo = await step('copy through sudo', (signal) =>
      target.copy(source, join(scratch, 'sudo.copy'), { signal }),
    );
    assert.equal(viaSudo.sha256, sha256(source));
    assert.equal(
      statSync(join(scratch, 'sudo.copy')).uid,
      Number(execFileSync('id', ['-u', bed.accounts.target.name], { encoding: 'utf8' })),
    );
    const fetched = await step('fetch through sudo', (signal) =>
      target.fetch(join(scratch, 'sudo.copy'), join(scratch, 'sudo.back'), { signal }),
    );
    assert.equal(fetched.sha256, sha256(source));

    // EACCES: the target account may not write into a directory of root's.
    const closed = join(scratch, 'closed');
    mkdirSync(closed, { mode: 0o755 });
    await assert.rejects(target.copy(source, join(closed, 'nope')), (error: FileTransferError) => {
      assert.ok(error instanceof FileTransferError);
      assert.equal(error.code, 'EACCES');
      assert.equal(error.contextName, 'files-sudo');
      assert.equal(error.path, join(closed, 'nope'));
      return true;
    });
    const secret = join(scratch, 'secret');
    writeFileSync(secret, 'root only', { mode: 0o600 });
    await assert.rejects(
      target.fetch(secret, join(scratch, 'secret.back')),
      (error: FileTransferError) => error.code === 'EACCES' && error.contextName === 'files-sudo',
    );
    assert.equal(existsSync(join(scratch, 'secret.back')), false);
  });

  test('router.copy: a target that may not write fails, naming it; the others under the same intermediate are written', async () => {
    const intermediate = await router.local({ name: 'fan3-parent' });
    const leaves = [
      await router.local({ name: 'fan3-root-1', via: intermediate }),
      await router.sudo({ name: 'fan3-target', via: intermediate, username: bed.accounts.target.name }),
      await router.local({ name: 'fan3-root-2', via: intermediate }),
    ];
    const source = join(scratch, 'fan3.bin');
    randomFile(source, 4 * MiB);
    const rootOnly = join(scratch, 'fan3');
    mkdirSync(rootOnly, { mode: 0o755 });
    const results = await router.copy(source, join(rootOnly, 'fan3.bin'), leaves);
    assert.deepEqual(
      results.map((r) => r.status),
      ['fulfilled', 'rejected', 'fulfilled'],
    );
    const reason = (results[1] as { reason: Error }).reason as FileTransferError;
    assert.ok(reason instanceof FileTransferError);
    assert.equal(reason.code, 'EACCES');
    assert.equal(reason.contextName, 'fan3-target');
    assert.equal(sha256(join(rootOnly, 'fan3.bin')), sha256(source));
    await intermediate.shutdown();
  });
});
