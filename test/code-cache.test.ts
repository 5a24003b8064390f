// How the core reaches a child (as source on this machine, deflated
// elsewhere) and the V8 code cache of it that children keep in their
// account's cache directory on the target (src/core/target-code-cache.ts,
// bootstrap/first-stage.js): written once, used by the next child, and
// never taken from a file someone else could have written. It is kept only
// when the program asks (the Router's targetCodeCache): tendril writes
// nothing on a target to start a context unless asked.
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import {
  chmodSync,
  chownSync,
  copyFileSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  rmSync,
  statSync,
  utimesSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { type Context, Router } from 'tendril';
import shellModule from './fixtures/user-method/shell.cjs';
import { nodeBinary } from './support/nodes.js';
import { plantedCoreCache } from './support/planted-cache.js';

const NOBODY = 65534;

/**
 * How the child's first stage says the core came, `[bytes, deflated]`, and
 * whether it is the variant that looks for a code cache on the target.
 */
async function delivery(context: Context): Promise<{ bytes: number; deflated: number; looksForCache: boolean }> {
  const [bytes, deflated, looksForCache] = await context.call(() => {
    const stage = process.execArgv[process.execArgv.indexOf('-e') + 1] ?? '';
    const found = /=\[(\d+),([01])\]/.exec(stage);
    return [Number(found?.[1]), Number(found?.[2]), stage.includes('cacheFile')] as const;
  });
  return { bytes, deflated, looksForCache };
}

describe("the core's code cache on targets", () => {
  let router: Router;
  let work: string;
  before(() => {
    router = new Router({ targetCodeCache: true });
    work = mkdtempSync(join(tmpdir(), 'tendril-code-cache-'));
    chmodSync(work, 0o755);
  });
  after(async () => {
    await router.shutdown();
    rmSync(work, { recursive: true, force: true });
  });

  let homes = 0;
  /** A fresh home of this account's. */
  const newHome = (): string => {
    const home = join(work, `home${++homes}`);
    mkdirSync(home, { mode: 0o700 });
    return home;
  };
  const cacheDir = (home: string) => join(home, '.cache', 'tendril');
  const cacheFiles = (home: string): string[] => {
    try {
      return readdirSync(cacheDir(home)).filter((name) => name.endsWith('.v8'));
    } catch {
      return [];
    }
  };
  /**
   * A context with `home` as HOME and a Node that is not the master's very
   * binary by name (`node` from PATH), so the parent sends no code cache of
   * its own and the child looks in its cache directory; it answers a call
   * and stops.
   */
  const startIn = async (home: string, on: Router = router, nodePath = 'node'): Promise<void> => {
    const env: NodeJS.ProcessEnv = { ...process.env, HOME: home };
    delete env.XDG_CACHE_HOME;
    const context = await on.local({ env, nodePath });
    assert.equal(await context.call(() => 6 * 7), 42);
    await context.shutdown();
  };
  /** The one cache file in `home`, with its inode (a rewrite renames a new file into place). */
  const theCache = (home: string) => {
    const files = cacheFiles(home);
    assert.equal(files.length, 1, `one cache file in ${cacheDir(home)}: ${files.join(', ')}`);
    const path = join(cacheDir(home), files[0] as string);
    return { path, stats: statSync(path) };
  };

  test('children on this machine get the core as source, others deflated, and a child started either way starts the other', async () => {
    const local = await router.local();
    const { bytes: sourceBytes, deflated: localDeflated } = await delivery(local);
    assert.equal(localDeflated, 0, 'a local child gets the source');
    // A user's method says nothing about where its stream goes: deflated.
    const far = await router.connect(shellModule.shell, { via: local });
    const { bytes: deflatedBytes, deflated: farDeflated } = await delivery(far);
    assert.equal(farDeflated, 1, 'a child started through a method of unknown reach gets it deflated');
    assert.ok(deflatedBytes < sourceBytes / 2, `${deflatedBytes} bytes deflated, ${sourceBytes} as source`);
    // That child came from one that had only the source: it deflated the core itself; and from the deflated one, the source again.
    const near = await router.local({ via: far });
    const again = await delivery(near);
    assert.deepEqual([again.bytes, again.deflated], [sourceBytes, 0]);
    await local.shutdown();
  });

  test('the first context writes the cache (0600, in a 0700 directory); the next takes it; one V8 turns down is replaced', async () => {
    const home = newHome();
    await startIn(home);
    const first = theCache(home);
    assert.match(first.path, /\/core-[0-9a-f]{16}-v\d+\.\d+\.\d+-[a-z0-9]+-[a-z0-9]+\.v8$/);
    assert.equal(first.stats.mode & 0o777, 0o600);
    assert.equal(statSync(cacheDir(home)).mode & 0o777, 0o700);
    assert.ok(first.stats.size > 50_000, `${first.stats.size} bytes of code cache`);

    await startIn(home);
    assert.equal(theCache(home).stats.ino, first.stats.ino, 'the second context took the cache and left it as it was');

    // Garbage of the same size, as a truncated or foreign write would leave: V8 refuses it, and a good one replaces it.
    writeFileSync(first.path, Buffer.alloc(first.stats.size, 7), { mode: 0o600 });
    const garbage = statSync(first.path);
    await startIn(home);
    const replaced = theCache(home);
    assert.notEqual(replaced.stats.ino, garbage.ino, 'the refused cache was replaced');
    await startIn(home);
    assert.equal(theCache(home).stats.ino, replaced.stats.ino, 'and the new one is taken');
  });

  test('a cache file another account owns, or others may write, or a FIFO in its place, is never taken', async () => {
    const home = newHome();
    await startIn(home);
    const good = theCache(home);
    const copy = join(work, 'good.v8');
    copyFileSync(good.path, copy);

    // The very bytes that were taken above, but owned by nobody: replaced, so not taken.
    copyFileSync(copy, good.path);
    chownSync(good.path, NOBODY, NOBODY);
    await startIn(home);
    let now = theCache(home).stats;
    assert.equal(now.uid, process.getuid?.(), 'a file of nobody’s was not taken, and this account’s replaced it');
    assert.equal(now.mode & 0o777, 0o600);

    // Ours, but anyone may write it.
    copyFileSync(copy, good.path);
    chmodSync(good.path, 0o666);
    const open = statSync(good.path);
    await startIn(home);
    now = theCache(home).stats;
    assert.notEqual(now.ino, open.ino, 'a world-writable file was not taken');
    assert.equal(now.mode & 0o777, 0o600);

    // A FIFO would block a plain open until a writer came: the start goes on, and a file replaces it.
    rmSync(good.path);
    execFileSync('mkfifo', ['-m', '600', good.path]);
    await startIn(home);
    assert.ok(theCache(home).stats.isFile(), 'the FIFO was replaced by the cache');
  });

  test('a cache planted where another account may write never runs, though the file is this account’s and V8 would take it', async () => {
    // What a user could leave for a root context whose HOME still names the user's home: a code
    // cache of other code, of the core's length (all V8 compares of the source), that marks when it runs.
    const marker = join(work, 'planted-cache-ran');
    const { data: planted, name } = plantedCoreCache(marker);

    const foreign = newHome();
    mkdirSync(cacheDir(foreign), { recursive: true, mode: 0o700 });
    writeFileSync(join(cacheDir(foreign), name), planted, { mode: 0o600 });
    for (const dir of [foreign, join(foreign, '.cache'), cacheDir(foreign)]) chownSync(dir, NOBODY, NOBODY);
    await startIn(foreign);
    assert.ok(!existsSync(marker), 'the planted cache ran');

    // The same file in a home of this account's is taken (so the test above can fail): the start fails, having run it.
    const own = newHome();
    mkdirSync(cacheDir(own), { recursive: true, mode: 0o700 });
    writeFileSync(join(cacheDir(own), name), planted, { mode: 0o600 });
    await assert.rejects(startIn(own));
    assert.ok(existsSync(marker), 'a cache in this account’s own directory is taken as it is');
  });

  test('Node 12 writes and takes the cache too', async () => {
    const home = newHome();
    const node12 = nodeBinary(12);
    await startIn(home, router, node12);
    const first = theCache(home);
    assert.match(first.path, /-v12\./);
    await startIn(home, router, node12);
    assert.equal(theCache(home).stats.ino, first.stats.ino, 'the second context took it');
  });

  test('nothing is written into a home this account does not own, nor into a cache directory others may write', async () => {
    const foreign = newHome();
    chownSync(foreign, NOBODY, NOBODY);
    await startIn(foreign);
    assert.deepEqual(readdirSync(foreign), [], 'nothing was created in a home of nobody’s');

    const shared = newHome();
    mkdirSync(cacheDir(shared), { recursive: true });
    chmodSync(cacheDir(shared), 0o777);
    await startIn(shared);
    assert.deepEqual(cacheFiles(shared), [], 'nothing was written into a directory anyone may write');
  });

  test('by default, and with targetCodeCache: false, nothing is written nor looked for, in every descendant', async () => {
    for (const options of [{}, { targetCodeCache: false }]) {
      await using quiet = new Router(options);
      const home = newHome();
      await startIn(home, quiet);
      assert.deepEqual(readdirSync(home), [], `no cache directory with ${JSON.stringify(options)}`);
      const middle = await quiet.local();
      const below = await quiet.local({ via: middle });
      assert.equal((await delivery(below)).looksForCache, false, 'a grandchild does not look for one either');
    }
    // And when asked, a grandchild is told to use one too.
    const middle = await router.local();
    assert.equal((await delivery(await router.local({ via: middle }))).looksForCache, true);
    await middle.shutdown();
    assert.throws(() => new Router({ targetCodeCache: 'no' as unknown as boolean }), /targetCodeCache/);
  });

  test('old caches are pruned: the directory keeps the eight newest', async () => {
    const home = newHome();
    mkdirSync(cacheDir(home), { recursive: true, mode: 0o700 });
    const old = Date.now() / 1000 - 86_400;
    for (let i = 0; i < 10; i++) {
      const path = join(cacheDir(home), `core-0000000000000${i.toString().padStart(3, '0')}-v1.0.0-x64-old.v8`);
      writeFileSync(path, 'stale', { mode: 0o600 });
      utimesSync(path, old + i, old + i);
    }
    await startIn(home);
    const left = cacheFiles(home);
    assert.equal(left.length, 8, left.join(', '));
    assert.ok(
      left.some((name) => !name.endsWith('-old.v8')),
      'the new cache is among them',
    );
    assert.ok(!left.includes('core-0000000000000000-v1.0.0-x64-old.v8'), 'the oldest went first');
  });
});
