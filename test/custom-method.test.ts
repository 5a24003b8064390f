// A user's own ConnectionMethod, written as docs/connection-methods.md
// shows (test/fixtures/user-method/), used directly and `via` other
// contexts: the master finds the module that defines the method, the via
// context loads it through module forwarding and takes its export of that
// name. What goes wrong says so: a module that cannot be told, is gone, is
// the main program, is refused by the master, or does not export the
// method. And the path grants a hostile child nothing: it cannot make the
// master or a sibling load a module, nor its own child one the master does
// not serve.
import assert from 'node:assert/strict';
import { existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { hostname, tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { CallError, type ConnectionMethod, Router, type RouterWarning } from 'tendril';
import { makeHidden } from './fixtures/user-method/hidden.js';
import { jail } from './fixtures/user-method/jail.js';
import { made } from './fixtures/user-method/made.js';
import { local as shadowedLocal } from './fixtures/user-method/shadow.js';
import shellModule from './fixtures/user-method/shell.cjs';
import { twinA } from './fixtures/user-method/twin-a.js';
import { twinB } from './fixtures/user-method/twin-b.js';
import { startTestbed, type Testbed } from './support/testbed.js';

const fixture = (name: string) => fileURLToPath(new URL(`./fixtures/user-method/${name}`, import.meta.url));

/** What a context started by one of the fixtures' methods sees of itself. */
const identity = () => ({
  uid: process.getuid?.() ?? -1,
  ppid: process.ppid,
  env: {
    SHELL_METHOD: process.env.SHELL_METHOD,
    SHADOWED: process.env.SHADOWED,
    TWIN: process.env.TWIN,
    MADE: process.env.MADE,
  },
});

/** The error `promise` rejects with (it must reject). */
async function rejection(promise: Promise<unknown>): Promise<Error> {
  return promise.then(
    () => assert.fail('it started'),
    (error: Error) => error,
  );
}

describe("a user's own connection method", () => {
  let bed: Testbed;
  let scratch: string;
  before(async () => {
    bed = await startTestbed();
    scratch = mkdtempSync(join(tmpdir(), 'tendril-custom-method-'));
  });
  after(async () => {
    await bed?.stop();
    rmSync(scratch, { recursive: true, force: true });
  });

  test('used directly: named by its start, as another account where it says so', async () => {
    await using router = new Router();
    const self = await router.connect(jail, {});
    assert.equal(self.name, `jail:self@${hostname()}`);
    assert.equal((await self.call(identity)).ppid, process.pid, 'setpriv exec-ed into Node, the master’s child');
    const nobody = await router.connect(jail, { user: 'nobody', group: 'nogroup' });
    assert.equal(nobody.name, `jail:nobody@${hostname()}`);
    assert.equal((await nobody.call(identity)).uid, 65534);
  });

  test('via a local context: the via context loads the module and runs the method (ESM, CommonJS, a tendril name)', async () => {
    await using router = new Router();
    const middle = await router.local({ name: 'method-host' });
    const before = (await middle.moduleStats()).filesReceived;
    const jailed = await router.connect(jail, { user: 'nobody', group: 'nogroup', via: middle });
    assert.equal(jailed.name, `jail:nobody@${hostname()}`);
    const seen = await jailed.call(identity);
    assert.equal(seen.uid, 65534);
    assert.equal(seen.ppid, middle.info.pid, 'the via context ran setpriv');
    assert.ok((await middle.moduleStats()).filesReceived > before, 'the module reached the via context by forwarding');

    const shell = await router.connect(shellModule.shell, { via: middle });
    assert.equal((await shell.call(identity)).env.SHELL_METHOD, '1', 'a CommonJS module’s export');
    // Named 'local' like tendril's own method: the user's still runs.
    const shadowed = await router.connect(shadowedLocal, { via: middle });
    assert.equal((await shadowed.call(identity)).env.SHADOWED, 'yes');
    // Two start functions of the same text, in two modules: each method is loaded from its own.
    const [a, b] = [await router.connect(twinA, { via: middle }), await router.connect(twinB, { via: middle })];
    assert.deepEqual([(await a.call(identity)).env.TWIN, (await b.call(identity)).env.TWIN], ['a', 'b']);
  });

  test('via sudo: a context as another account loads the method through forwarding and runs it', async () => {
    await using router = new Router();
    const target = bed.accounts.target.name;
    const other = await router.sudo({ username: target });
    const uid = await other.call(() => process.getuid?.());
    assert.notEqual(uid, 0);
    const shell = await router.connect(shellModule.shell, { via: other });
    const seen = await shell.call(identity);
    assert.deepEqual([seen.uid, seen.env.SHELL_METHOD], [uid, '1']);
    const jailed = await router.connect(jail, { via: other });
    assert.equal((await jailed.call(identity)).uid, uid);
    assert.equal((await jailed.exec('id', ['-un'])).stdout, target);
  });

  test("what cannot be loaded says so: no module file, a removed one, the main program's, not exported, refused", async () => {
    await using router = new Router();
    const middle = await router.local({ name: 'loader' });

    // Made from a string (as eval would): no module file defines it.
    const evaluated = new Function(
      "return { name: 'evaluated', defaultNode: () => undefined, start: () => { throw new Error('no'); } }",
    )();
    let error = await rejection(router.connect(evaluated as ConnectionMethod<object>, { via: middle }));
    assert.ok(error instanceof TypeError, String(error));
    assert.match(
      error.message,
      /cannot tell which module defines connection method 'evaluated' .* so context 'loader' cannot load it: define the method in a module file of its own and export it/,
    );

    // A module loaded, then removed: said by the master before the via context is asked.
    const gone = join(scratch, 'gone.mjs');
    writeFileSync(
      gone,
      "export const gone = { name: 'gone', defaultNode: () => undefined, start() { throw new Error('no'); } };\n",
    );
    const { gone: goneMethod } = await import(pathToFileURL(gone).href);
    rmSync(gone);
    error = await rejection(router.connect(goneMethod, { via: middle }));
    assert.ok(error instanceof TypeError, String(error));
    assert.match(error.message, /connection method 'gone' is defined in .*gone\.mjs, which is no longer a file/);

    // Defined in the program itself (this file is the test process's main module): never run in the via context.
    const inline: ConnectionMethod<object> = {
      name: 'inline',
      defaultNode: () => undefined,
      start: () => {
        throw new Error('not to be called');
      },
    };
    error = await rejection(router.connect(inline, { via: middle }));
    assert.ok(error instanceof TypeError, String(error));
    assert.match(
      error.message,
      /connection method 'inline' is defined in the main module .*custom-method\.test\.js: context 'loader' would have to run the whole program to load it; move the method into a module of its own/,
    );

    // Defined in a module that does not export it; made by another module's function.
    for (const [method, module] of [
      [makeHidden(), 'hidden.js'],
      [made, 'transport.cjs'],
    ] as const) {
      error = await rejection(router.connect(method, { via: middle }));
      assert.ok(error instanceof CallError, String(error));
      assert.equal(error.remoteName, 'TypeError');
      assert.equal(error.contextName, 'loader');
      assert.ok(
        error.message.includes(
          `module ${fixture(module)}, where connection method '${method.name}' is defined (its start function), exports no connection method named '${method.name}': export the method object from that module`,
        ),
        error.message,
      );
    }
    assert.equal(await middle.call(() => 'still serving'), 'still serving');
  });

  test("a module the master's moduleFilter refuses is never sent: the via context says it could not load it", async () => {
    const refusals: RouterWarning[] = [];
    await using router = new Router({ moduleFilter: (path, verdict) => !path.endsWith('/jail.js') && verdict.served });
    router.on('warning', (warning) => warning.code === 'module-refused' && refusals.push(warning));
    const middle = await router.local({ name: 'filtered' });
    const error = await rejection(router.connect(jail, { via: middle }));
    assert.ok(error instanceof CallError, String(error));
    assert.match(
      error.message,
      /context 'filtered' could not load module .*jail\.js, which defines connection method 'jail': the master refused to serve .* the Router's moduleFilter refused it/,
    );
    assert.equal(refusals.length, 1);
  });

  test('a hostile child cannot make the master or a sibling load a module, nor its own child one the master does not serve', async () => {
    await using router = new Router();
    const [attacker, sibling] = await Promise.all([
      router.local({ name: 'attacker' }),
      router.local({ name: 'sibling' }),
    ]);
    const grandchild = await router.local({ name: 'attackers-child', via: attacker });
    // A module outside every root the master serves; loading it would leave a mark.
    const outside = mkdtempSync(join(tmpdir(), 'tendril-outside-roots-'));
    const evil = join(outside, 'evil.mjs');
    const mark = join(outside, 'it-ran');
    writeFileSync(evil, `import { writeFileSync } from 'node:fs';\nwriteFileSync(${JSON.stringify(mark)}, 'yes');\n`);
    const refusals: RouterWarning[] = [];
    router.on('warning', (warning) => warning.code === 'module-refused' && refusals.push(warning));
    try {
      const siblingBefore = await sibling.moduleStats();
      // The attacker holds its router and sends CONNECT requests of its own, each naming a module.
      const answers = await attacker.call(
        async (targets: number[], modules: string[]) => {
          const core = require('tendril:core') as {
            contextRuntime(): { router: unknown };
            ask(router: unknown, dst: number, spec: unknown, request: unknown, options: object): Promise<unknown>;
            CONNECT_SPEC: unknown;
          };
          const { router } = core.contextRuntime();
          return Promise.all(
            targets.map((dst, i) =>
              core
                .ask(
                  router,
                  dst,
                  core.CONNECT_SPEC,
                  { method: 'jail', options: {}, module: modules[i] },
                  { what: 'a forged CONNECT', timeout: 10_000 },
                )
                .then(
                  () => 'started',
                  (error: Error) => `${error.name}: ${error.message}`,
                ),
            ),
          );
        },
        [0, sibling.id, grandchild.id],
        [fixture('jail.js'), fixture('jail.js'), evil],
      );
      // The master serves no CONNECT; the sibling admits it only from its ancestors.
      assert.match(answers[0] as string, /^ChannelError: .*no handle \d+ in context 'master'/);
      assert.match(answers[1] as string, /^ChannelError: .*refused by policy of CONNECT in context 'sibling'/);
      const siblingAfter = await sibling.moduleStats();
      assert.deepEqual(
        [siblingAfter.requestsSent, siblingAfter.modulesLoaded],
        [siblingBefore.requestsSent, siblingBefore.modulesLoaded],
        'the sibling asked for no module and loaded none',
      );
      // Its own child obeys it (it is the parent), but the master does not serve the module.
      assert.match(
        answers[2] as string,
        /context 'attackers-child' could not load module .*evil\.mjs, which defines connection method 'jail': the master refused to resolve '.*evil\.mjs' .*: that location is outside the module roots it serves/,
      );
      assert.ok(
        refusals.some((warning) => warning.message.includes(evil)),
        refusals.map((w) => w.message).join('\n'),
      );
      assert.equal(existsSync(mark), false, 'the module outside the roots never ran anywhere');
      assert.equal(await sibling.call(() => 'unharmed'), 'unharmed');
    } finally {
      rmSync(outside, { recursive: true, force: true });
    }
  });
});
