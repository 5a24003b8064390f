import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { mkdirSync, mkdtempSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { CallError, type Context, type LocalOptions, Router, type RouterWarning } from 'tendril';
import { ROOT } from './support/procs.js';

const FIXTURES = join(ROOT, 'test', 'fixtures', 'modules');
const fixture = (name: string) => join(FIXTURES, name);

/**
 * A target that has nothing of the master's: an empty working directory,
 * an empty HOME and no NODE_PATH, so every module must be shipped.
 */
function bareTarget(scratch: string[]): LocalOptions {
  const cwd = mkdtempSync(join(tmpdir(), 'tendril-cwd-'));
  const home = mkdtempSync(join(tmpdir(), 'tendril-home-'));
  scratch.push(cwd, home);
  return {
    cwd,
    env: { PATH: process.env.PATH, HOME: home, TENDRIL_TEST_RUN: process.env.TENDRIL_TEST_RUN },
  };
}

describe('module forwarding', () => {
  let router: Router;
  let child: Context;
  const scratch: string[] = [];
  const warnings: RouterWarning[] = [];

  before(async () => {
    router = new Router();
    router.on('warning', (warning) => warnings.push(warning));
    child = await router.local({ name: 'bare', ...bareTarget(scratch) });
  });
  after(async () => {
    await router.shutdown();
    for (const dir of scratch) rmSync(dir, { recursive: true, force: true });
  });

  test('the target really lacks the packages: Node cannot find them there', async () => {
    const found = await child.call(() => {
      const { createRequire } = require('node:module') as typeof import('node:module');
      const native = createRequire(`${process.cwd()}/`);
      return ['chalk', 'p-queue', 'uuid'].map((name) => {
        try {
          return native.resolve(name);
        } catch {
          return null;
        }
      });
    });
    assert.deepEqual(found, [null, null, null]);
    assert.equal(await child.call(() => process.env.NODE_PATH), undefined);
  });

  test('a CommonJS npm package with dependencies loads remotely in one round trip', async () => {
    const before = await child.moduleStats();
    const red = await child.call(() => (require('chalk') as typeof import('chalk')).red('alarm'));
    assert.match(red, /alarm/);
    const after = await child.moduleStats();
    assert.equal(after.requestsSent - before.requestsSent, 1, 'one round trip for the whole graph');
    assert.equal(after.syncRequests, before.syncRequests, 'fetched before the function ran, not while it blocked');
    // chalk, ansi-styles, color-convert (3 files), color-name, supports-color, has-flag, and their package files.
    assert.ok(after.filesReceived - before.filesReceived >= 8, `${after.filesReceived - before.filesReceived} files`);
  });

  test('an ESM-only npm package with dependencies loads with import()', async () => {
    const result = await child.call(async () => {
      const { default: PQueue } = await import('p-queue');
      const queue = new PQueue({ concurrency: 1 });
      return Promise.all([queue.add(async () => 'a'), queue.add(async () => 'b')]);
    });
    assert.deepEqual(result, ['a', 'b']);
  });

  test('exports conditions are honoured: uuid resolves to its node build', async () => {
    const kind = await child.call(async () => {
      const uuid = await import('uuid');
      return { valid: uuid.validate(uuid.v4()), file: require.resolve('uuid') };
    });
    assert.equal(kind.valid, true);
    assert.match(kind.file, /node_modules\/uuid\/dist-node\//);
  });

  test('a typed module proxy runs exports remotely: ESM, relative imports and an ESM-only package', async () => {
    const tasks = child.import<typeof import('./fixtures/tasks.js')>(new URL('./fixtures/tasks.js', import.meta.url));
    const result = await tasks.deploy({ version: '1.2.3' });
    assert.deepEqual(result.steps, [2, 4, 6]);
    assert.equal(result.version, '1.2.3');
    assert.equal(await tasks.pid(), child.info.pid);
    // Not a function: not callable through the proxy, and it says so.
    const untyped = tasks as unknown as Record<string, () => Promise<unknown>>;
    await assert.rejects(
      (untyped.label as () => Promise<unknown>)(),
      (error: unknown) =>
        error instanceof CallError && /export 'label' of module .* is a string, not a function/.test(error.message),
    );
    await assert.rejects((untyped.nope as () => Promise<unknown>)(), /export 'nope' .* does not exist/);
    assert.equal((tasks as unknown as { then?: unknown }).then, undefined, 'the proxy is not a thenable');
  });

  test('a module proxy also takes a package name, resolved from the base', async () => {
    const uuid = child.import<typeof import('uuid')>('uuid');
    assert.equal(await uuid.validate('not a uuid'), false);
    assert.equal(await uuid.version('6ba7b810-9dad-11d1-80b4-00c04fd430c8'), 1);
  });

  test('ESM and CommonJS user modules, #imports, JSON, and a computed import() served lazily', async () => {
    const main = child.import<{
      summary(): { helper: string; data: unknown; legacy: string; chalkType: string };
      plugin(name: string): Promise<string>;
      whereAmI(): { url: string; filename: string };
    }>(fixture('main.js'));
    const summary = await main.summary();
    assert.deepEqual(summary, {
      helper: 'helped',
      data: { answer: 42, list: [1, 2, 3] },
      legacy: 'legacy 42',
      chalkType: 'function',
    });
    const before = await child.moduleStats();
    assert.equal(await main.plugin('alpha'), 'alpha ran');
    const after = await child.moduleStats();
    assert.equal(after.requestsSent - before.requestsSent, 1, 'the computed import is one more round trip');
    assert.deepEqual(await main.whereAmI(), { url: `file://${fixture('main.js')}`, filename: fixture('main.js') });
  });

  test('a computed require() outside the static closure is served synchronously', async () => {
    const legacy = child.import<{ load(name: string): string }>(fixture('legacy.cjs'));
    const before = await child.moduleStats();
    assert.equal(await legacy.load('beta'), 'beta loaded');
    const after = await child.moduleStats();
    assert.equal(after.syncRequests - before.syncRequests, 1);
    // The context keeps working normally afterwards.
    assert.equal(await child.call(() => 'still fine'), 'still fine');
  });

  test('a package requiring its own subpaths, and require/import conditions of one specifier', async () => {
    const check = child.import<{ viaRequire(): string; viaImport(): Promise<string> }>(fixture('selfref/check.cjs'));
    assert.equal(await check.viaRequire(), 'require');
    assert.equal(await check.viaImport(), 'import');
  });

  test('functions resolve require() from the base they are given', async () => {
    const value = await child.callWith({ base: FIXTURES }, () =>
      (require('./util.cjs') as { twice(n: number): number }).twice(4),
    );
    assert.equal(value, 8);
    const self = await child.callWith({ base: FIXTURES }, () => require('./selfref/index.cjs'));
    assert.deepEqual(self, { kind: 'require', util: 'selfref util' });
  });

  test('a syntax error in shipped code rejects with a CallError naming the file and line', async () => {
    const broken = child.import<{ fine(): number }>(fixture('broken.js'));
    await assert.rejects(broken.fine(), (error: unknown) => {
      assert.ok(error instanceof CallError);
      assert.equal(error.remoteName, 'SyntaxError');
      assert.match(error.remoteMessage, new RegExp(`${fixture('broken.js')}:6:\\d+`));
      return true;
    });
  });

  test('a missing module rejects with MODULE_NOT_FOUND naming the requiring file', async () => {
    const loader = child.import<{ default(): unknown }>(fixture('throws-at-load.cjs'));
    await assert.rejects(loader.default(), (error: unknown) => {
      assert.ok(error instanceof CallError);
      assert.equal(error.remoteCode, 'MODULE_NOT_FOUND');
      assert.match(error.remoteMessage, /not-here\.cjs/);
      assert.match(error.remoteMessage, /throws-at-load\.cjs/);
      assert.match(error.remoteStack, /throws-at-load\.cjs:1/);
      return true;
    });
  });

  test('native addons are never shipped; requiring one names the package and the remedy', async () => {
    const user = child.import<{ default(): unknown }>(fixture('uses-native.cjs'));
    await assert.rejects(user.default(), (error: unknown) => {
      assert.ok(error instanceof CallError);
      assert.equal(error.remoteName, 'NativeModuleError');
      assert.match(error.remoteMessage, /native addon of package 'nativepkg'.*Install 'nativepkg' on the target/);
      return true;
    });
  });

  test('built-in modules are never shipped', async () => {
    const before = router.moduleStats().filesSent;
    // biome-ignore lint/style/useNodejsImportProtocol: both spellings of a built-in are the point here.
    const same = await child.call(() => require('node:os') === require('os'));
    assert.equal(same, true);
    assert.equal(router.moduleStats().filesSent, before);
  });
});

describe('module responder safety', () => {
  let router: Router;
  let child: Context;
  let outside: string;
  const warnings: RouterWarning[] = [];

  before(async () => {
    // A trusted root holding a symlink that points out of it.
    outside = mkdtempSync(join(tmpdir(), 'tendril-root-'));
    writeFileSync(join(outside, 'package.json'), '{"name":"rooted"}');
    mkdirSync(join(outside, 'inside'));
    writeFileSync(join(outside, 'inside', 'ok.cjs'), 'module.exports = "ok";');
    symlinkSync('/etc', join(outside, 'escape'));
    router = new Router({ moduleRoots: [outside] });
    router.on('warning', (warning) => warnings.push(warning));
    child = await router.local({ name: 'curious' });
  });
  after(async () => {
    await router.shutdown();
    rmSync(outside, { recursive: true, force: true });
  });

  for (const [label, spec] of [
    ['an absolute path outside every root', '/etc/shadow'],
    ['a relative path climbing out of the root', '../../../../../../etc/hostname'],
    ['a symlink that escapes a root', './escape/hostname'],
  ] as const) {
    test(`${label} is refused with a logged reason and a clear error`, async () => {
      warnings.length = 0;
      const message = await child.callWith(
        { base: outside },
        (s: string) => {
          try {
            require(s);
            return 'served';
          } catch (error) {
            return `${(error as { code?: string }).code}: ${(error as Error).message}`;
          }
        },
        spec,
      );
      assert.match(message, /^ERR_TENDRIL_MODULE_REFUSED: the master refused to serve/);
      assert.ok(warnings.some((w) => w.code === 'module-refused' && w.message.includes(spec)));
    });
  }

  test('a file inside the root is served', async () => {
    assert.equal(await child.callWith({ base: outside }, () => require('./inside/ok.cjs')), 'ok');
  });
});

describe('module caching through an intermediate', () => {
  let router: Router;
  const scratch: string[] = [];
  before(() => {
    router = new Router();
  });
  after(async () => {
    await router.shutdown();
    for (const dir of scratch) rmSync(dir, { recursive: true, force: true });
  });

  test('five grandchildren importing one package: the master reads and sends each file once', async () => {
    const middle = await router.local({ name: 'middle', ...bareTarget(scratch) });
    const grandchildren: Context[] = [];
    for (let i = 0; i < 5; i++)
      grandchildren.push(await router.local({ name: `leaf${i}`, via: middle, ...bareTarget(scratch) }));
    const masterBefore = router.moduleStats();
    const middleBefore = await middle.moduleStats();
    // Starting children made the middle context fetch tendril's connection layer by module forwarding.
    assert.ok(middleBefore.requestsSent >= 1 && middleBefore.filesReceived >= 1 && middleBefore.modulesLoaded >= 1);
    for (const leaf of grandchildren) {
      assert.equal(await leaf.call(() => typeof (require('chalk') as { red: unknown }).red), 'function');
    }
    const masterAfter = router.moduleStats();
    const middleAfter = await middle.moduleStats();
    const files = masterAfter.filesSent - masterBefore.filesSent;
    assert.ok(files >= 8);
    assert.equal(masterAfter.requests - masterBefore.requests, 1, 'the master was asked once');
    assert.equal(masterAfter.filesRead - masterBefore.filesRead, files, 'each file read from disk once');
    assert.equal(middleAfter.requestsServed - middleBefore.requestsServed, 5);
    assert.equal(middleAfter.servedFromCache - middleBefore.servedFromCache, 4);
    assert.equal(middleAfter.filesSent - middleBefore.filesSent, 5 * files, 'each leaf got each file once');
    for (const leaf of grandchildren) {
      const stats = await leaf.moduleStats();
      assert.equal(stats.filesReceived, files);
      assert.equal(stats.requestsSent, 1);
    }
  });

  test('preferTargetModules loads a package installed on the target instead of shipping it', async () => {
    const cwd = mkdtempSync(join(tmpdir(), 'tendril-target-'));
    scratch.push(cwd);
    mkdirSync(join(cwd, 'node_modules', 'chalk'), { recursive: true });
    writeFileSync(join(cwd, 'node_modules', 'chalk', 'package.json'), '{"name":"chalk","main":"index.js"}');
    writeFileSync(join(cwd, 'node_modules', 'chalk', 'index.js'), 'module.exports = { installedOnTarget: true };');
    const env = { PATH: process.env.PATH, TENDRIL_TEST_RUN: process.env.TENDRIL_TEST_RUN };
    const preferring = await router.local({ name: 'prefers', cwd, env, preferTargetModules: true });
    const defaulting = await router.local({ name: 'defaults', cwd, env });
    assert.deepEqual(await preferring.call(() => require('chalk')), { installedOnTarget: true });
    assert.equal(
      await defaulting.call(() => typeof require('chalk').red),
      'function',
      "by default the master's copy wins",
    );
    await Promise.all([preferring.shutdown(), defaulting.shutdown()]);
  });
});

describe('require.cache in a context', () => {
  let router: Router;
  let child: Context;
  let dir: string;

  before(async () => {
    dir = mkdtempSync(join(tmpdir(), 'tendril-cache-'));
    writeFileSync(join(dir, 'package.json'), '{"name":"cached"}');
    // Counts its evaluations in a global, and reports what require.cache says about itself.
    writeFileSync(
      join(dir, 'counter.cjs'),
      'globalThis.__evaluations = (globalThis.__evaluations || 0) + 1;\n' +
        'module.exports = { evaluation: globalThis.__evaluations, isCached: require.cache[__filename] === module, cache: require.cache };',
    );
    writeFileSync(join(dir, 'data.json'), '{"answer":42}');
    router = new Router();
    child = await router.local({ name: 'cache' });
  });
  after(async () => {
    await router.shutdown();
    rmSync(dir, { recursive: true, force: true });
  });

  test('require.cache[__filename] is the module, and every require shares one cache', async () => {
    const result = await child.callWith({ base: dir }, () => {
      const counter = require('./counter.cjs') as { evaluation: number; isCached: boolean; cache: unknown };
      const data = require('./data.json') as unknown;
      const path = require.resolve('./counter.cjs');
      return {
        isCached: counter.isCached,
        shared: counter.cache === require.cache,
        exportsInCache: require.cache[path]?.exports === counter,
        jsonInCache: require.cache[require.resolve('./data.json')]?.exports === data,
        evaluation: counter.evaluation,
      };
    });
    assert.deepEqual(result, { isCached: true, shared: true, exportsInCache: true, jsonInCache: true, evaluation: 1 });
  });

  test('deleting a require.cache entry makes the next require() evaluate the file again', async () => {
    const evaluations = await child.callWith({ base: dir }, () => {
      const first = (require('./counter.cjs') as { evaluation: number }).evaluation;
      const again = (require('./counter.cjs') as { evaluation: number }).evaluation;
      delete require.cache[require.resolve('./counter.cjs')];
      const fresh = require('./counter.cjs') as { evaluation: number; isCached: boolean };
      return [first, again, fresh.evaluation, fresh.isCached];
    });
    assert.deepEqual(evaluations, [1, 1, 2, true]);
  });
});

describe('module replies larger than maxMessageSize', () => {
  const maxMessageSize = 64 * 1024;
  let router: Router;
  let dir: string;
  const scratch: string[] = [];

  /** A CommonJS file of about `bytes` bytes exporting `value`, padded with comments that barely compress. */
  const padded = (value: string, bytes: number) =>
    `module.exports = ${JSON.stringify(value)};\n${Array.from({ length: Math.ceil(bytes / 80) }, () => `// ${randomBytes(57).toString('base64')}\n`).join('')}`;

  before(() => {
    dir = mkdtempSync(join(tmpdir(), 'tendril-large-'));
    writeFileSync(join(dir, 'package.json'), '{"name":"large"}');
    // Four files, 90 KB in all: more than one 64 KiB message, though each fits in one.
    writeFileSync(
      join(dir, 'index.cjs'),
      'module.exports = [require("./a.cjs"), require("./b.cjs"), require("./c.cjs")].join(" ");',
    );
    for (const name of ['a', 'b', 'c']) writeFileSync(join(dir, `${name}.cjs`), padded(name, 30_000));
    // One file larger than a message can be.
    writeFileSync(join(dir, 'huge.cjs'), padded('huge', 200_000));
    writeFileSync(join(dir, 'uses-huge.cjs'), 'module.exports = require("./huge.cjs");');
    router = new Router({ maxMessageSize });
  });
  after(async () => {
    await router.shutdown();
    for (const path of [dir, ...scratch]) rmSync(path, { recursive: true, force: true });
  });

  test('a context started via another answers calls (the connection layer reaches it)', async () => {
    const middle = await router.local({ name: 'small-middle' });
    const leaf = await router.local({ name: 'small-leaf', via: middle });
    assert.equal(await leaf.call(() => process.ppid), middle.info.pid);
    await middle.shutdown();
  });

  test('a closure larger than maxMessageSize loads, each file sent once, over several replies', async () => {
    const child = await router.local({ name: 'large', ...bareTarget(scratch) });
    const masterBefore = router.moduleStats();
    const before = await child.moduleStats();
    assert.equal(await child.callWith({ base: dir }, () => require('./index.cjs')), 'a b c');
    const after = await child.moduleStats();
    assert.equal(after.filesReceived - before.filesReceived, 4);
    assert.ok(after.requestsSent - before.requestsSent >= 2, 'the reply was split');
    assert.equal(router.moduleStats().filesSent - masterBefore.filesSent, 4, 'each file sent once');
    await child.shutdown();
  });

  test('a computed require() of such a closure is fetched synchronously, over several replies', async () => {
    const child = await router.local({ name: 'large-sync', ...bareTarget(scratch) });
    const before = await child.moduleStats();
    assert.equal(await child.callWith({ base: dir }, (spec: string) => require(spec), './index.cjs'), 'a b c');
    const after = await child.moduleStats();
    assert.ok(after.syncRequests - before.syncRequests >= 2, 'the reply was split');
    assert.equal(after.filesReceived - before.filesReceived, 4);
    await child.shutdown();
  });

  test('an intermediate serves such a closure to its children from its cache, split the same way', async () => {
    const middle = await router.local({ name: 'large-middle', ...bareTarget(scratch) });
    const leaves = [
      await router.local({ name: 'large-leaf1', via: middle, ...bareTarget(scratch) }),
      await router.local({ name: 'large-leaf2', via: middle, ...bareTarget(scratch) }),
    ];
    const masterBefore = router.moduleStats();
    for (const leaf of leaves) {
      assert.equal(await leaf.callWith({ base: dir }, () => require('./index.cjs')), 'a b c');
      const stats = await leaf.moduleStats();
      assert.equal(stats.filesReceived, 4);
      assert.ok(stats.requestsSent >= 2, 'the reply from the intermediate was split');
    }
    assert.equal(router.moduleStats().filesSent - masterBefore.filesSent, 4, 'the master sent each file once');
    await middle.shutdown();
  });

  test('a single file larger than maxMessageSize fails with a message naming it, its size and the limit', async () => {
    const child = await router.local({ name: 'huge' });
    for (const spec of ['./huge.cjs', './uses-huge.cjs']) {
      const result = await child.callWith(
        { base: dir },
        (s: string) => {
          try {
            return require(s);
          } catch (error) {
            return `${(error as { code?: string }).code}: ${(error as Error).message}`;
          }
        },
        spec,
      );
      assert.match(
        result,
        /^ERR_TENDRIL_MODULE_TOO_LARGE: \/.*\/huge\.cjs is \d{6} bytes compressed, too large to send in one message \(maxMessageSize is 65536 bytes\); raise the master Router's maxMessageSize/,
      );
    }
    assert.equal(await child.callWith({ base: dir }, () => require('./a.cjs')), 'a');
    await child.shutdown();
  });
});
