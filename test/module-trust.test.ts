import assert from 'node:assert/strict';
import { mkdirSync, mkdtempSync, realpathSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { type Context, Router, type RouterWarning } from 'tendril';
import { encode, GET_MODULE, MAX_SPECS_PER_REQUEST, MAX_WAITING_MODULE_REQUESTS } from '#dist/internal.js';
import { frameBytes, writeBytes } from './support/frames.js';

/**
 * Module forwarding as seen by a child that lies: the child writes raw
 * GET_MODULE frames on its stream to the parent (fd 4), with payloads of
 * its choosing, or makes ordinary require() calls naming what it likes.
 * The parent must answer or refuse, and never crash, grow without bound,
 * or serve a file outside what it was told to serve.
 */

/** GET_MODULE frames from `child` to `dst` (default the master), one per payload, each expecting a reply. */
function getModuleFrames(child: Context, payloads: unknown[], dst = 0): Buffer {
  return Buffer.concat(
    payloads.map((value) => frameBytes({ dst, src: child.id, handle: GET_MODULE, replyTo: 4000 }, encode(value))),
  );
}

/** Shipped to a child: what `require(spec)` does there, as `code: message` or `value: ...`. */
function tryRequire(spec: string): string {
  try {
    return `value: ${JSON.stringify(require(spec))}`;
  } catch (error) {
    return `${(error as { code?: string }).code}: ${(error as Error).message}`;
  }
}

const THIS_FILE = fileURLToPath(import.meta.url);
/** Names that are properties of every plain object: a responder keying replies by them must not break. */
const PROTOTYPE_NAMES = ['__proto__', 'constructor', 'toString', 'hasOwnProperty', '__defineGetter__'];

describe('a lying child cannot crash its parent through GET_MODULE', () => {
  let router: Router;
  let liar: Context;
  let bystander: Context;
  const warnings: RouterWarning[] = [];

  before(async () => {
    router = new Router();
    router.on('warning', (warning) => warnings.push(warning));
    [liar, bystander] = await Promise.all([router.local({ name: 'liar' }), router.local({ name: 'bystander' })]);
  });
  after(() => router.shutdown());

  test('specifiers named like Object.prototype properties are answered, from inside and outside the roots', async () => {
    const before = router.moduleStats();
    const payloads: unknown[] = [];
    // From outside the roots (refused, so the responder writes a refusal under each name) and from a served file.
    for (const from of ['/etc/x.js', THIS_FILE]) {
      for (const kind of ['require', 'import']) payloads.push({ from, specs: PROTOTYPE_NAMES, kind });
    }
    await liar.call(writeBytes, getModuleFrames(liar, payloads));
    await waitUntil(() => router.moduleStats().requests - before.requests === payloads.length);
    await waitUntil(() => router.moduleStats().refused - before.refused >= 2 * PROTOTYPE_NAMES.length);
    assert.ok(warnings.some((w) => w.code === 'module-refused' && w.message.includes("'__proto__' from /etc/x.js")));
    // The master is alive and serving: the liar and its sibling still get answers.
    assert.equal(await bystander.call(() => 'still served'), 'still served');
    assert.equal(await liar.call(() => typeof (require('chalk') as { red: unknown }).red), 'function');
  });

  test('an ordinary require() of such a name fails as missing, and nothing else is affected', async () => {
    for (const name of PROTOTYPE_NAMES) {
      const result = await liar.call(tryRequire, name);
      assert.match(result, new RegExp(`^MODULE_NOT_FOUND: Cannot find module '${name.replace(/\$/g, '\\$')}'`));
    }
    const imported = await liar.call(async (name: string) => {
      try {
        await import(name);
        return 'loaded';
      } catch (error) {
        return (error as { code?: string }).code;
      }
    }, 'constructor');
    assert.equal(imported, 'MODULE_NOT_FOUND');
  });

  test('malformed requests are answered with an error, and the master carries on', async () => {
    const before = router.moduleStats();
    const payloads: unknown[] = [
      null,
      'tendril:connection',
      ['tendril:connection'],
      { from: THIS_FILE, specs: 'chalk', kind: 'require' },
      { from: THIS_FILE, specs: [42], kind: 'require' },
      { from: THIS_FILE, specs: ['chalk'], kind: 'eval' },
      { from: 7, specs: ['chalk'], kind: 'require' },
      { from: THIS_FILE, specs: Array.from({ length: MAX_SPECS_PER_REQUEST + 1 }, (_, i) => `p${i}`), kind: 'require' },
      { from: THIS_FILE, specs: ['x'.repeat(5000)], kind: 'require' },
    ];
    const frames = Buffer.concat([
      getModuleFrames(liar, payloads),
      // And one that is not msgpack at all.
      frameBytes({ dst: 0, src: liar.id, handle: GET_MODULE, replyTo: 4000 }, Buffer.from([0xc1])),
    ]);
    await liar.call(writeBytes, frames);
    assert.equal(await bystander.call(() => 'still served'), 'still served');
    assert.equal(router.moduleStats().requests, before.requests, 'malformed requests are not resolved');
    assert.equal(await liar.call(() => typeof require('chalk').red), 'function');
  });

  test('a child writing requests from the IDs of its subtree costs the master one record, not one per ID', async () => {
    const middle = await router.local({ name: 'many-ids' });
    const leaves = await Promise.all([1, 2, 3].map((n) => router.local({ name: `many-ids-${n}`, via: middle })));
    const before = router.moduleStats();
    const middleBefore = before.byContext[middle.id]?.requests ?? 0;
    // The middle context speaks as each context below it, which it may: they are routed through its stream.
    const frames = Buffer.concat(
      leaves.map((leaf) =>
        frameBytes(
          { dst: 0, src: leaf.id, handle: GET_MODULE, replyTo: 4000 },
          encode({ from: THIS_FILE, specs: ['chalk'], kind: 'require' }),
        ),
      ),
    );
    await middle.call(writeBytes, frames);
    await waitUntil(() => router.moduleStats().requests - before.requests === leaves.length);
    const byContext = router.moduleStats().byContext;
    for (const leaf of leaves) assert.equal(byContext[leaf.id], undefined, `nothing is kept for ${leaf.name}`);
    assert.equal(
      (byContext[middle.id]?.requests ?? 0) - middleBefore,
      leaves.length,
      'the requests count for the child they came through',
    );
    assert.equal(await middle.call(() => 'middle alive'), 'middle alive');
    await middle.shutdown();
  });

  test('an intermediate sends a closure once to a child that writes requests as each context of its subtree', async () => {
    const middle = await router.local({ name: 'serving-middle' });
    const leaf = await router.local({ name: 'asking-leaf', via: middle });
    const below = await Promise.all([1, 2, 3].map((n) => router.local({ name: `below-leaf-${n}`, via: leaf })));
    const request = (src: number) =>
      frameBytes(
        { dst: middle.id, src, handle: GET_MODULE, replyTo: 4000 },
        encode({ from: THIS_FILE, specs: ['chalk'], kind: 'require' }),
      );
    const stats = () => middle.moduleStats();
    const servedUntil = async (count: number) => {
      const deadline = Date.now() + 30_000;
      while ((await stats()).requestsServed < count) {
        assert.ok(Date.now() < deadline, 'the intermediate answered every request');
        await new Promise((resolve) => setTimeout(resolve, 20));
      }
    };
    const start = await stats();
    await leaf.call(writeBytes, request(leaf.id));
    await servedUntil(start.requestsServed + 1);
    const closure = (await stats()).filesSent - start.filesSent;
    assert.ok(closure > 0, 'the first request brought the closure');
    // As each context below it: everything was sent to the leaf already, whatever ID asks.
    await leaf.call(writeBytes, Buffer.concat(below.map((context) => request(context.id))));
    await servedUntil(start.requestsServed + 1 + below.length);
    assert.equal((await stats()).filesSent - start.filesSent, closure, 'no file is sent twice to one child');
    await middle.shutdown();
  });

  test('an intermediate context serving its own child survives the same requests', async () => {
    const middle = await router.local({ name: 'middle' });
    const leaf = await router.local({ name: 'leaf', via: middle });
    const payloads: unknown[] = [];
    for (const kind of ['require', 'import']) payloads.push({ from: THIS_FILE, specs: PROTOTYPE_NAMES, kind });
    payloads.push({ from: THIS_FILE, specs: [1, 2], kind: 'require' }, null);
    await leaf.call(writeBytes, getModuleFrames(leaf, payloads, middle.id));
    assert.equal(await middle.call(() => 'middle alive'), 'middle alive');
    for (const name of PROTOTYPE_NAMES) assert.match(await leaf.call(tryRequire, name), /^MODULE_NOT_FOUND: /);
    assert.equal(await leaf.call(() => typeof require('chalk').red), 'function');
    await middle.shutdown();
  });
});

describe('what a package name may reach', () => {
  // scratch/
  //   package.json              a workspace around the program
  //   app/package.json          the program's package, app/main.cjs its base
  //   node_modules/dep/         a package found by name from app/
  //   node_modules/evil/        its package.json's main points outside it, at ../../secret/index.js
  //   node_modules/bare/        a package without package.json
  //   secret/index.js, secret/other.js
  //   outside.js
  let scratch: string;
  let router: Router;
  let child: Context;
  let base: string;
  const warnings: RouterWarning[] = [];

  before(async () => {
    scratch = realpathSync(mkdtempSync(join(tmpdir(), 'tendril-trust-')));
    const write = (path: string, text: string) => {
      mkdirSync(dirname(join(scratch, path)), { recursive: true });
      writeFileSync(join(scratch, path), text);
    };
    write('package.json', '{"name":"workspace","private":true}');
    write('app/package.json', '{"name":"app"}');
    write('app/main.cjs', 'module.exports = "main";');
    write('app/sibling.cjs', 'module.exports = "sibling";');
    write('node_modules/dep/package.json', '{"name":"dep","main":"lib/index.js"}');
    write('node_modules/dep/lib/index.js', 'module.exports = "dep " + require("./util.js");');
    write('node_modules/dep/lib/util.js', 'module.exports = "util";');
    write('node_modules/evil/package.json', '{"name":"evil","main":"../../secret/index.js"}');
    write('node_modules/bare/index.js', 'module.exports = "bare";');
    write('secret/index.js', 'module.exports = "secret";');
    write('secret/other.js', 'module.exports = "other secret";');
    write('outside.js', 'module.exports = "outside";');
    base = join(scratch, 'app', 'main.cjs');
    router = new Router({ base });
    router.on('warning', (warning) => warnings.push(warning));
    child = await router.local({ name: 'reader' });
  });
  after(async () => {
    await router.shutdown();
    rmSync(scratch, { recursive: true, force: true });
  });

  test("the base's package is served, but not the directory around it", async () => {
    assert.equal(await child.call(tryRequire, './sibling.cjs'), 'value: "sibling"');
    assert.match(await child.call(tryRequire, '../outside.js'), /^ERR_TENDRIL_MODULE_REFUSED: /);
  });

  test('a package found by name is served, and only its own directory becomes servable', async () => {
    assert.equal(await child.call(tryRequire, 'dep'), 'value: "dep util"');
    assert.equal(await child.call(tryRequire, 'bare'), 'value: "bare"');
    // Trusting those packages (one without a package.json of its own) did not make the
    // workspace around them, or anything else above them, servable.
    assert.match(await child.call(tryRequire, '../outside.js'), /^ERR_TENDRIL_MODULE_REFUSED: /);
    assert.match(await child.call(tryRequire, '../secret/other.js'), /^ERR_TENDRIL_MODULE_REFUSED: /);
  });

  for (const spec of [
    'dep/../../secret/index.js',
    'dep/lib/../../../secret/index.js',
    'dep/%2e%2e/%2e%2e/secret/index.js',
    'dep/..%2F..%2Fsecret/index.js',
    'dep/./lib/index.js',
  ]) {
    test(`'${spec}': a package specifier with . or .. segments is refused`, async () => {
      warnings.length = 0;
      const result = await child.call(tryRequire, spec);
      assert.match(result, /^ERR_TENDRIL_MODULE_REFUSED: .*may not have '\.' or '\.\.' path segments/);
      assert.ok(warnings.some((w) => w.code === 'module-refused' && w.message.includes(spec)));
    });
  }

  test('a package whose main points outside its directory is refused, and what it points at stays unserved', async () => {
    warnings.length = 0;
    const result = await child.call(tryRequire, 'evil');
    assert.match(result, /^ERR_TENDRIL_MODULE_REFUSED: .*not inside the directory of package 'evil'/);
    assert.ok(warnings.some((w) => w.code === 'module-refused' && w.message.includes("'evil'")));
    assert.match(await child.call(tryRequire, '../secret/other.js'), /^ERR_TENDRIL_MODULE_REFUSED: /);
    assert.match(await child.call(tryRequire, '../secret/index.js'), /^ERR_TENDRIL_MODULE_REFUSED: /);
  });
});

describe('bases with no package of their own', () => {
  let scratch: string;
  let home: string;
  const savedHome = process.env.HOME;
  const routers: Router[] = [];

  before(() => {
    scratch = realpathSync(mkdtempSync(join(tmpdir(), 'tendril-home-')));
    home = join(scratch, 'home');
    mkdirSync(join(home, 'project'), { recursive: true });
    // A dotfile holding a token that parses as JavaScript (a comment): refused here for lying outside the roots.
    writeFileSync(join(home, '.npmrc'), '//registry.example/:_authToken=secret-token\n');
    writeFileSync(join(home, 'script.cjs'), 'exports.hello = () => "hello from the script";');
    writeFileSync(join(home, 'lib.cjs'), 'module.exports = "lib";');
    writeFileSync(join(home, 'project', 'run.cjs'), 'module.exports = "run";');
    writeFileSync(join(home, 'project', 'helper.cjs'), 'module.exports = "helper";');
    process.env.HOME = home;
  });
  after(async () => {
    process.env.HOME = savedHome;
    await Promise.all(routers.map((router) => router.shutdown()));
    rmSync(scratch, { recursive: true, force: true });
  });

  test('a script directly in a home directory is served alone, never the home directory', async () => {
    const router = new Router({ base: join(home, 'script.cjs') });
    routers.push(router);
    const child = await router.local({ name: 'home-script' });
    const script = child.import<{ hello(): string }>(join(home, 'script.cjs'));
    assert.equal(await script.hello(), 'hello from the script');
    for (const spec of ['./.npmrc', './lib.cjs', '../home/.npmrc', './project/run.cjs'])
      assert.match(await child.call(tryRequire, spec), /^ERR_TENDRIL_MODULE_REFUSED: /, spec);
  });

  test("a package.json in the home directory does not make the home a root: the script's own directory is", async () => {
    writeFileSync(join(home, 'package.json'), '{"name":"home"}');
    try {
      const router = new Router({ base: join(home, 'project', 'run.cjs') });
      routers.push(router);
      const child = await router.local({ name: 'home-project' });
      assert.equal(await child.call(tryRequire, './helper.cjs'), 'value: "helper"');
      for (const spec of ['../.npmrc', '../lib.cjs'])
        assert.match(await child.call(tryRequire, spec), /^ERR_TENDRIL_MODULE_REFUSED: /, spec);
    } finally {
      rmSync(join(home, 'package.json'));
    }
  });

  test('a base of / serves nothing', async () => {
    const router = new Router({ base: '/' });
    routers.push(router);
    const child = await router.local({ name: 'rooted' });
    for (const spec of ['./etc/hostname', '/etc/hostname', `.${join(home, '.npmrc')}`])
      assert.match(await child.call(tryRequire, spec), /^ERR_TENDRIL_MODULE_REFUSED: /, spec);
  });
});

describe('module requests in flight are bounded per child', () => {
  let router: Router;
  let flooder: Context;
  let bystander: Context;

  before(async () => {
    router = new Router();
    [flooder, bystander] = await Promise.all([router.local({ name: 'flooder' }), router.local({ name: 'calm' })]);
  });
  after(() => router.shutdown());

  test('a flood of unique specifiers is answered at once past the bound, and the master carries on', async () => {
    const count = 5000;
    const before = router.moduleStats();
    const payloads = Array.from({ length: count }, (_, i) => ({
      from: THIS_FILE,
      specs: [`no-such-package-${i}`],
      kind: 'require',
    }));
    // The flood, then (behind it on the same stream) ordinary requires until one is refused for the bound.
    const refusal = await flooder.call(
      (frames: Uint8Array) => {
        (require('./support/frames.js') as typeof import('./support/frames.js')).writeBytes(frames);
        for (let i = 0; i < 100; i++) {
          try {
            require(`also-missing-${i}`);
          } catch (error) {
            const { code, message } = error as { code?: string; message: string };
            if (code !== 'MODULE_NOT_FOUND') return `${(error as Error).name} ${code}: ${message}`;
          }
        }
        return 'never refused';
      },
      getModuleFrames(flooder, payloads),
    );
    assert.match(
      refusal,
      new RegExp(
        `^ModuleRequestError ERR_TENDRIL_MODULE_REQUEST: context 'flooder' has too many module requests waiting .*${MAX_WAITING_MODULE_REQUESTS} requests`,
      ),
    );
    await waitUntil(() => router.moduleStats().requests - before.requests >= count);
    const stats = router.moduleStats();
    assert.ok(stats.busy - before.busy > count / 2, `${stats.busy - before.busy} of ${count} refused at once`);
    assert.equal(await bystander.call(() => 'calm'), 'calm');
    // Once the flood is answered, the same child is served again.
    assert.equal(
      await flooder.call(async (name: string) => {
        for (;;) {
          try {
            // A computed require: fetched when it runs, so it retries while the flood drains.
            return typeof (require(name) as { red: unknown }).red;
          } catch (error) {
            if ((error as { code?: string }).code !== 'ERR_TENDRIL_MODULE_REQUEST') throw error;
            await new Promise((resolve) => setTimeout(resolve, 100));
          }
        }
      }, 'chalk'),
      'function',
    );
  });
});

describe('a child that asks only through its importer', () => {
  let router: Router;
  before(() => {
    router = new Router();
  });
  after(() => router.shutdown());

  test('is never refused for being busy, however many imports it starts at once', async () => {
    const child = await router.local({ name: 'eager' });
    const count = 4 * MAX_WAITING_MODULE_REQUESTS;
    const codes = await child.call(async (n: number) => {
      const results = await Promise.all(
        Array.from({ length: n }, (_, i) =>
          import(`not-installed-${i}`).then(
            () => 'loaded',
            (error: { code?: string }) => error.code,
          ),
        ),
      );
      return [...new Set(results)];
    }, count);
    assert.deepEqual(codes, ['MODULE_NOT_FOUND']);
    assert.equal(router.moduleStats().busy, 0);
  });
});

/** Polls `condition` every 20 ms until it holds; fails after a generous 60 s. */
async function waitUntil(condition: () => boolean): Promise<void> {
  const deadline = Date.now() + 60_000;
  while (!condition()) {
    if (Date.now() > deadline) throw new Error('condition not met within 60 s');
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}
