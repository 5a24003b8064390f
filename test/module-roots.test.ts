import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdirSync, mkdtempSync, realpathSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { format } from 'node:util';
import createDebug from 'debug';
import { type Context, InvalidOptionError, type LogRecord, Router, type RouterWarning } from 'tendril';

/**
 * What module roots serve, attacked from a child: a program's directory
 * holds secrets beside its script (`.git/config`, `.aws/credentials`, an
 * extensionless `token`, `id_rsa`, `.env`, a `.pem` key...), and a child
 * holding its own code asks the master for them, by raw GET_MODULE
 * requests and by plain `require()`. Only what a module system loads may
 * come back, and no secret may appear in a reply, an error, a warning or
 * the master's debug output.
 */

/** A marker unique to this run and this file, so finding it anywhere proves a leak. */
const marker = (name: string) => `SECRET_${name.replace(/\W/g, '_')}_${randomBytes(6).toString('hex')}`;

/** Files beside the program's script that no module system loads, each holding its marker. */
const SECRETS: Record<string, (secret: string) => string> = {
  '.git/config': (s) => `[remote "origin"]\n\turl = https://deploy:${s}@git.example.com/app.git\n`,
  '.aws/credentials': (s) => `[default]\naws_access_key_id = AKIAIOSFODNN7EXAMPLE\naws_secret_access_key = ${s}\n`,
  // Valid JSON: nothing about its syntax keeps it from being shipped.
  '.docker/config.json': (s) => `{"auths":{"registry.example.com":{"auth":"${s}"}}}\n`,
  // Parses as JavaScript: an extensionless file is what Node loads as a program.
  token: (s) => `${s}\n`,
  id_rsa: (s) => `-----BEGIN OPENSSH PRIVATE KEY-----\n${s}\n-----END OPENSSH PRIVATE KEY-----\n`,
  '.env': (s) => `DATABASE_URL=postgres://app:${s}@db/app\n`,
  '.npmrc': (s) => `//registry.npmjs.org/:_authToken=${s}\n`,
  'key.pem': (s) => `-----BEGIN PRIVATE KEY-----\n${s}\n-----END PRIVATE KEY-----\n`,
  '.ssh/config.js': (s) => `module.exports = "${s}";\n`,
  // Scripts for other interpreters, with a #! line: Node would never run them, yet the first parses as JavaScript.
  'rotate-keys': (s) => `#!/usr/bin/env python3\nAPI_TOKEN = "${s}"\nprint(API_TOKEN)\n`,
  backup: (s) => `#!/bin/bash\nexport PGPASSWORD=${s}\npg_dump app > /tmp/app.sql\n`,
};

/** Programs without an extension, each a #! line and a module exporting its name: those Node (or a TypeScript runner) runs. */
const NODE_PROGRAMS: Record<string, string> = {
  'bin/direct': '#!/usr/local/bin/node',
  'bin/nodejs': '#!/usr/bin/nodejs --max-old-space-size=512',
  'bin/env': '#! /usr/bin/env node',
  'bin/env-split': '#!/usr/bin/env -S node --enable-source-maps',
  'bin/env-options': '#!/usr/bin/env -i -u LANG TZ=UTC node',
  'bin/tsx': '#!/usr/bin/env tsx',
  'bin/ts-node': '#!/usr/bin/env -S ts-node --transpile-only',
  'bin/ts-node-esm': '#!/opt/tools/bin/ts-node-esm',
  'bin/crlf': '#!/usr/bin/env node\r',
};

/** Programs without an extension for other interpreters, each a valid module after its #! line. */
const OTHER_PROGRAMS: Record<string, string> = {
  'bin/python': '#!/usr/bin/python3',
  'bin/env-deno': '#!/usr/bin/env -S deno run',
  'bin/nodemon': '#!/usr/bin/env nodemon',
  'bin/node-like': '#!/usr/bin/node-evil',
  'bin/sh': '#!/bin/sh',
  'bin/empty': '#!',
  // The interpreter is past the first 256 bytes: not read, so not known to be Node.
  'bin/far': `#!/usr/bin/env ${'A=1 '.repeat(70)}node`,
};

/** Served files that do not parse, each with a marker exactly where the parser stops. */
const UNPARSABLE: Record<string, (secret: string) => string> = {
  'broken.js': (s) => `const key = 1;\nconst AKIAIOSFODNN7EXAMPLE ${s} = 2;\n`,
  'broken.cjs': (s) => `module.exports = {\n  password: ${s} ${s}\n};\n`,
  'broken.mjs': (s) => `export const token = "a" ${s};\n`,
  'broken.ts': (s) => `const key: string = ${s} ${s};\nexport default key;\n`,
  'broken.json': (s) => `{"password": ${s}}\n`,
};

/** Shipped to a child: its own GET_MODULE request to the master, the whole reply as text, sources inflated. */
async function askMaster(from: string, specs: string[], kind: 'require' | 'import'): Promise<string> {
  const core = require('tendril:core') as {
    contextRuntime(): { router: { request(dst: number, handle: number, payload: Uint8Array): Promise<unknown> } };
    encode(value: unknown): Uint8Array;
    decode(bytes: Uint8Array): unknown;
    GET_MODULE: number;
  };
  const { inflateRawSync } = require('node:zlib') as typeof import('node:zlib');
  const router = core.contextRuntime().router;
  const replies: unknown[] = [];
  for (let round = 0; round < 50; round++) {
    const reply = (await router.request(0, core.GET_MODULE, core.encode({ from, specs, kind }))) as {
      data: Uint8Array;
    };
    const value = core.decode(reply.data) as [number, { partial?: boolean }];
    replies.push(value);
    if (!(value[0] === 0 && value[1].partial)) break;
  }
  return JSON.stringify(replies, (_key, value: unknown) =>
    value instanceof Uint8Array ? inflateRawSync(value).toString('utf8') : value,
  );
}

/** Shipped to a child: what `require(spec)` does there, as `code: message` or `value: ...`. */
function tryRequire(spec: string): string {
  try {
    return `value: ${JSON.stringify(require(spec))}`;
  } catch (error) {
    return `${(error as { code?: string }).code ?? (error as Error).name}: ${(error as Error).message}`;
  }
}

/** Writes `files` (relative path -> text) under `dir`. */
function writeTree(dir: string, files: Record<string, string>): void {
  for (const [path, text] of Object.entries(files)) {
    mkdirSync(dirname(join(dir, path)), { recursive: true });
    writeFileSync(join(dir, path), text);
  }
}

describe('module roots serve only what a module system loads', () => {
  // project/                    the program's package (package.json with bins), main.cjs its base
  //   .git/config .aws/credentials .docker/config.json token id_rsa .env .npmrc key.pem .ssh/config.js
  //   broken.* (unparsable, a secret where parsing stops), leaky.cjs / leaky.mjs (require or import them)
  //   tool (a bin, no extension, no shebang), run (no extension, a shebang), lib.cjs, data.json
  //   node_modules/dep -> .pnpm/dep@1.0.0/node_modules/dep (pnpm's layout), node_modules/.prisma/client
  let scratch: string;
  let project: string;
  let base: string;
  let router: Router;
  // The attacker writes its own requests, so its importer's view of what it was sent is wrong; the other child only require()s.
  let attacker: Context;
  let child: Context;
  const secrets = new Map<string, string>();
  const warnings: RouterWarning[] = [];
  const logs: LogRecord[] = [];
  const debugLines: string[] = [];
  const debugState = { log: createDebug.log, namespaces: '' };

  before(async () => {
    scratch = realpathSync(mkdtempSync(join(tmpdir(), 'tendril-roots-')));
    project = join(scratch, 'project');
    base = join(project, 'main.cjs');
    const files: Record<string, string> = {
      'package.json': JSON.stringify({ name: 'project', bin: { 'project-tool': 'tool', 'project-run': './run' } }),
      'main.cjs': 'module.exports = "main";\n',
      'lib.cjs': 'module.exports = "lib";\n',
      'data.json': '{"answer": 42}\n',
      tool: 'module.exports = "tool";\n',
      run: '#!/usr/bin/env node\nmodule.exports = "run";\n',
      'leaky.cjs':
        'exports.env = () => require("./.env");\nexports.token = () => require("./token");\nexports.git = () => require("./.git/config");\n',
      'leaky.mjs': 'import token from "./token";\nimport key from "./key.pem";\nexport default [token, key];\n',
      'node_modules/.pnpm/dep@1.0.0/node_modules/dep/package.json': '{"name":"dep","main":"index.js"}',
      'node_modules/.pnpm/dep@1.0.0/node_modules/dep/index.js':
        'module.exports = "dep " + require("./.internal/x.js");',
      'node_modules/.pnpm/dep@1.0.0/node_modules/dep/.internal/x.js': 'module.exports = "internal";',
      'node_modules/.prisma/client/index.js': 'module.exports = "generated client";',
      'node_modules/@prisma/client/package.json': '{"name":"@prisma/client","main":"index.js"}',
      'node_modules/@prisma/client/index.js': 'module.exports = require("../../.prisma/client/index.js");',
    };
    for (const [path, shebang] of Object.entries({ ...NODE_PROGRAMS, ...OTHER_PROGRAMS })) {
      files[path] = `${shebang}\nmodule.exports = ${JSON.stringify(path)};\n`;
    }
    for (const [path, text] of Object.entries({ ...SECRETS, ...UNPARSABLE })) {
      secrets.set(path, marker(path));
      files[path] = text(secrets.get(path) as string);
    }
    writeTree(project, files);
    symlinkSync('.pnpm/dep@1.0.0/node_modules/dep', join(project, 'node_modules', 'dep'));
    // Named as modules, but what they lead to is not one.
    symlinkSync('id_rsa', join(project, 'key.js'));
    symlinkSync('.env', join(project, 'env.cjs'));
    execFileSync('mkfifo', [join(project, 'pipe.js')]);
    // Everything the master says about modules, at every level of detail.
    debugState.namespaces = createDebug.disable();
    createDebug.enable('tendril:*');
    createDebug.log = (...args: unknown[]) => debugLines.push(format(...(args as [string, ...unknown[]])));
    router = new Router({ base });
    router.on('warning', (warning) => warnings.push(warning));
    router.on('log', (record) => logs.push(record));
    [attacker, child] = await Promise.all([router.local({ name: 'attacker' }), router.local({ name: 'curious' })]);
  });
  after(async () => {
    await router.shutdown();
    createDebug.log = debugState.log;
    createDebug.enable(debugState.namespaces);
    rmSync(scratch, { recursive: true, force: true });
  });

  /** The secrets (by file) whose marker appears in `text`. */
  const leaked = (text: string) => [...secrets].filter(([, secret]) => text.includes(secret)).map(([path]) => path);

  for (const path of Object.keys(SECRETS)) {
    test(`a raw GET_MODULE for ./${path} is refused, and its content is in no reply`, async () => {
      for (const kind of ['require', 'import'] as const) {
        const reply = await attacker.call(askMaster, base, [`./${path}`, join(project, path)], kind);
        assert.deepEqual(leaked(reply), [], reply);
        assert.match(reply, /the master refused to serve/, reply);
      }
    });

    test(`a require() of ./${path} throws ERR_TENDRIL_MODULE_REFUSED naming the rule and moduleFilter`, async () => {
      const result = await child.call(tryRequire, `./${path}`);
      assert.match(result, /^ERR_TENDRIL_MODULE_REFUSED: the master refused to serve/);
      assert.match(result, /moduleFilter/);
      assert.deepEqual(leaked(result), []);
    });
  }

  test('a require() or import written in a served module does not bring the file it names', async () => {
    for (const [spec, kind] of [
      ['./leaky.cjs', 'require'],
      ['./leaky.mjs', 'import'],
    ] as const) {
      const reply = await attacker.call(askMaster, base, [spec], kind);
      assert.deepEqual(leaked(reply), [], reply);
    }
    const leaky = child.import<{ env(): unknown; token(): unknown; git(): unknown }>(join(project, 'leaky.cjs'));
    for (const get of [leaky.env, leaky.token, leaky.git]) {
      await assert.rejects(get(), (error: Error) => {
        assert.match(error.message, /the master refused to serve/);
        assert.deepEqual(leaked(error.message), []);
        return true;
      });
    }
    const imported = await child.call(
      async (spec: string) => {
        try {
          return `value: ${JSON.stringify(await import(spec))}`;
        } catch (error) {
          return `${(error as { code?: string }).code}: ${(error as Error).message}`;
        }
      },
      join(project, 'leaky.mjs'),
    );
    assert.match(imported, /^ERR_TENDRIL_MODULE_REFUSED: /);
    assert.deepEqual(leaked(imported), []);
  });

  test('a literal require() in a shipped function (its preload list) is refused', async () => {
    await assert.rejects(
      child.call(() => [require('./.env'), require('./key.pem')]),
      (error: Error & { code?: string }) => {
        assert.match(error.message, /the master refused to serve '\.\/\.env'/);
        assert.deepEqual(leaked(error.message), []);
        return true;
      },
    );
  });

  test('a symlink named like a module is judged by the file it leads to', async () => {
    for (const spec of ['./key.js', './env.cjs']) {
      const result = await child.call(tryRequire, spec);
      assert.match(result, /^ERR_TENDRIL_MODULE_REFUSED: /, result);
      assert.deepEqual(leaked(result), []);
    }
  });

  test('a named pipe inside the roots is refused, and the master never opens it', async () => {
    assert.match(await child.call(tryRequire, './pipe.js'), /^ERR_TENDRIL_MODULE_REFUSED: .*not a regular file/);
    assert.equal(await child.call(tryRequire, './lib.cjs'), 'value: "lib"');
  });

  test('context.import() of a secret file is refused', async () => {
    // (A module the program names in a dot-directory, such as .ssh/config.js, is served: see the last describe.)
    for (const path of ['token', 'id_rsa', '.env', 'key.pem']) {
      const proxy = child.import<{ anything(): unknown }>(join(project, path));
      await assert.rejects(proxy.anything(), (error: Error) => {
        assert.match(error.message, /the master refused to serve/);
        assert.deepEqual(leaked(error.message), []);
        return true;
      });
    }
  });

  for (const path of Object.keys(UNPARSABLE)) {
    test(`an unparsable ${path} fails with file:line:column and the kind of error, never its text`, async () => {
      const result = await child.call(tryRequire, `./${path}`);
      assert.match(result, new RegExp(`^SyntaxError: ${join(project, path).replace(/\./g, '\\.')}:\\d+:\\d+: `));
      assert.deepEqual(leaked(result), [], result);
      const reply = await attacker.call(askMaster, base, [`./${path}`], 'require');
      assert.deepEqual(leaked(reply), [], reply);
    });
  }

  test('legitimate modules are still served: a bin without extension, a shebang script, .cjs, JSON, pnpm and .prisma', async () => {
    assert.equal(await child.call(tryRequire, './tool'), 'value: "tool"');
    assert.equal(await child.call(tryRequire, './run'), 'value: "run"');
    assert.equal(await child.call(tryRequire, './lib.cjs'), 'value: "lib"');
    assert.equal(await child.call(tryRequire, './data.json'), 'value: {"answer":42}');
    assert.equal(await child.call(tryRequire, 'dep'), 'value: "dep internal"');
    assert.equal(await child.call(tryRequire, '@prisma/client'), 'value: "generated client"');
  });

  test('a file with a #! line for another interpreter (python3, bash, deno) is not served: Node would not run it as a program; one naming node, nodejs, tsx or ts-node (directly or through env) is', async () => {
    for (const path of Object.keys(NODE_PROGRAMS)) {
      assert.equal(await child.call(tryRequire, `./${path}`), `value: ${JSON.stringify(path)}`, path);
    }
    for (const path of Object.keys(OTHER_PROGRAMS)) {
      const result = await child.call(tryRequire, `./${path}`);
      assert.match(result, /^ERR_TENDRIL_MODULE_REFUSED: .*a #! line naming node/, `${path}: ${result}`);
    }
  });

  test("no secret appears in the master's warnings, debug output or log records", () => {
    assert.ok(warnings.some((warning) => warning.code === 'module-refused'));
    assert.ok(debugLines.some((line) => line.includes('tendril:responder')));
    const everything = [
      ...warnings.map((warning) => warning.message),
      ...debugLines,
      ...logs.map((record) => record.text),
    ].join('\n');
    assert.deepEqual(leaked(everything), []);
  });
});

describe('moduleFilter', () => {
  let scratch: string;
  let project: string;
  const routers: Router[] = [];

  before(() => {
    scratch = realpathSync(mkdtempSync(join(tmpdir(), 'tendril-filter-')));
    project = join(scratch, 'project');
    writeTree(project, {
      'package.json': '{"name":"filtered"}',
      'main.cjs': 'module.exports = "main";',
      'lib.cjs': 'module.exports = "lib";',
      'fixtures/sample.cjs': 'module.exports = "sample";',
      'scripts/deploy': 'module.exports = "deploy script";',
      'templates/page.es6': 'module.exports = "es6";',
      '.env': 'SECRET=1',
      'native/addon.node': 'not really an addon',
    });
    writeTree(scratch, { 'outside.cjs': 'module.exports = "outside";' });
  });
  after(async () => {
    await Promise.all(routers.map((router) => router.shutdown()));
    rmSync(scratch, { recursive: true, force: true });
  });

  async function start(moduleFilter: (path: string, verdict: { served: boolean; reason?: string }) => boolean) {
    const router = new Router({ base: join(project, 'main.cjs'), moduleFilter });
    routers.push(router);
    const warnings: RouterWarning[] = [];
    router.on('warning', (warning) => warnings.push(warning));
    return { router, warnings, child: await router.local({ name: 'filtered' }) };
  }

  test('is checked: anything but a function is an InvalidOptionError', () => {
    for (const value of ['*.js', true, {}])
      assert.throws(() => new Router({ moduleFilter: value as never }), InvalidOptionError);
  });

  test('sees every file inside the roots with the default verdict, and may serve more or fewer', async () => {
    const seen = new Map<string, { served: boolean; reason?: string }>();
    const { child } = await start((path, verdict) => {
      seen.set(path, verdict);
      if (path.endsWith('.es6') || path === join(project, 'scripts/deploy')) return true;
      if (path.includes('/fixtures/')) return false;
      return verdict.served;
    });
    assert.equal(await child.call(tryRequire, './lib.cjs'), 'value: "lib"');
    assert.equal(await child.call(tryRequire, './scripts/deploy'), 'value: "deploy script"');
    assert.equal(await child.call(tryRequire, './templates/page.es6'), 'value: "es6"');
    assert.match(await child.call(tryRequire, './fixtures/sample.cjs'), /^ERR_TENDRIL_MODULE_REFUSED: .*moduleFilter/);
    assert.deepEqual(seen.get(join(project, 'lib.cjs')), { served: true });
    assert.equal(seen.get(join(project, 'scripts/deploy'))?.served, false);
    assert.match(seen.get(join(project, 'scripts/deploy'))?.reason ?? '', /extension/);
  });

  test('cannot widen the roots, nor ship a native addon', async () => {
    const { child } = await start(() => true);
    assert.match(
      await child.call(tryRequire, '../outside.cjs'),
      /^ERR_TENDRIL_MODULE_REFUSED: .*outside the module roots/,
    );
    assert.match(await child.call(tryRequire, '/etc/hostname'), /^ERR_TENDRIL_MODULE_REFUSED: /);
    assert.match(await child.call(tryRequire, './native/addon.node'), /^ERR_TENDRIL_NATIVE_MODULE: /);
  });

  test('a filter that throws refuses the file, and the master carries on', async () => {
    const { child, warnings } = await start((path) => {
      if (path.endsWith('lib.cjs')) throw new Error('filter bug');
      return true;
    });
    assert.match(await child.call(tryRequire, './lib.cjs'), /^ERR_TENDRIL_MODULE_REFUSED: .*moduleFilter threw/);
    assert.ok(warnings.some((warning) => warning.code === 'module-refused' && warning.message.includes('filter bug')));
    assert.equal(await child.call(tryRequire, './main.cjs'), 'value: "main"');
  });
});

describe('a module the program names itself, in a dot-directory of its package', () => {
  // project/                  the program's package (type: module), main.mjs its base
  //   .output/server/         a build (Nuxt/Nitro style): tasks.mjs, chunk.mjs, chunks/deep.mjs, legacy.cjs, helper.cjs
  //   .output/server/.env .output/server/.cache/x.js .output/public/leak.js .git/config.js   secrets
  let scratch: string;
  let project: string;
  let server: string;
  let base: string;
  const routers: Router[] = [];
  let router: Router;
  let attacker: Context;
  const secrets = new Map<string, string>();
  const leaked = (text: string) => [...secrets].filter(([, secret]) => text.includes(secret)).map(([path]) => path);

  before(async () => {
    scratch = realpathSync(mkdtempSync(join(tmpdir(), 'tendril-dot-roots-')));
    project = join(scratch, 'project');
    server = join(project, '.output', 'server');
    base = join(project, 'main.mjs');
    for (const path of [
      '.output/server/.env',
      '.output/server/.cache/x.js',
      '.output/public/leak.js',
      '.git/config.js',
    ])
      secrets.set(path, marker(path));
    writeTree(project, {
      'package.json': JSON.stringify({ name: 'project', type: 'module' }),
      'main.mjs': 'export default "main";\n',
      '.output/server/tasks.mjs':
        "import { helper } from './chunk.mjs';\nimport { deep } from './chunks/deep.mjs';\nexport function hello() { return 'hello ' + helper() + ', ' + deep; }\n",
      '.output/server/chunk.mjs': "export const helper = () => 'from .output';\n",
      '.output/server/chunks/deep.mjs': "export const deep = 'deep';\n",
      '.output/server/legacy.cjs': 'module.exports = "legacy";\n',
      '.output/server/helper.cjs': 'module.exports = "helper";\n',
      ...Object.fromEntries([...secrets].map(([path, secret]) => [path, `module.exports = "${secret}";\n`])),
    });
    router = new Router({ base });
    routers.push(router);
    attacker = await router.local({ name: 'dot-attacker' });
  });
  after(async () => {
    await Promise.all(routers.map((r) => r.shutdown()));
    rmSync(scratch, { recursive: true, force: true });
  });

  test('nothing a child names makes a dot-directory served: before the program names a module in it, it is refused', async () => {
    const reply = await attacker.call(askMaster, base, ['./.output/server/tasks.mjs'], 'import');
    assert.match(reply, /the master refused to serve .*in the dot-directory '\.output'/, reply);
    const from = await attacker.call(askMaster, join(server, 'tasks.mjs'), ['./chunk.mjs'], 'import');
    assert.match(from, /the master refused to serve/, from);
    assert.doesNotMatch(from, /from \.output/, from);
  });

  test('context.import() of a module the program names (a build in .output/server) is served, with what lies beside and below it', async () => {
    const child = await router.local({ name: 'dot-importer' });
    const tasks = child.import<{ hello(): string }>(join(server, 'tasks.mjs'));
    assert.equal(await tasks.hello(), 'hello from .output, deep');
  });

  test('what a child names beside or above that directory, or in a dot-directory below it, stays refused', async () => {
    for (const [from, specs] of [
      [base, ['./.output/public/leak.js', './.output/server/.env', './.output/server/.cache/x.js', './.git/config.js']],
      [join(server, 'tasks.mjs'), ['../public/leak.js', './.env', './.cache/x.js', '../../.git/config.js']],
    ] as const) {
      for (const spec of specs) {
        const reply = await attacker.call(askMaster, from, [spec], 'require');
        assert.deepEqual(leaked(reply), [], reply);
        assert.match(reply, /the master refused to serve/, `${spec} from ${from}: ${reply}`);
      }
    }
  });

  test("a call's base, or the Router's base, in a dot-directory of its package is served the same way", async () => {
    const child = await router.local({ name: 'dot-caller' });
    assert.equal(
      await child.callWith({ base: join(server, 'legacy.cjs') }, tryRequire, './helper.cjs'),
      'value: "helper"',
    );
    const based = new Router({ base: join(server, 'legacy.cjs') });
    routers.push(based);
    const other = await based.local({ name: 'dot-based' });
    assert.equal(await other.call(tryRequire, './helper.cjs'), 'value: "helper"');
    assert.match(await other.call(tryRequire, './.env'), /^ERR_TENDRIL_MODULE_REFUSED: /);
  });
});
