// What a user's first scripts run into: where remote require() resolves
// from, variables captured from the caller's scope, error classes that keep
// their names and types, and calls on contexts that are gone.
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { cpSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { pathToFileURL } from 'node:url';
import { promisify } from 'node:util';
import {
  CallError,
  CapturedVariableError,
  type Context,
  ContextDisconnectedError,
  Router,
  TimeoutError,
} from 'tendril';
import { ROOT } from './support/procs.js';

// Globals of other runtimes: shipped functions only use them behind a typeof probe.
declare const window: unknown;
declare const Bun: { version: string };

describe('a first script', () => {
  let router: Router;
  let child: Context;

  before(async () => {
    router = new Router();
    child = await router.local({ name: 'first' });
  });
  after(() => router.shutdown());

  test('require() and import() resolve from the module that defines the function, wherever the script is started', async () => {
    const project = mkdtempSync(join(tmpdir(), 'tendril-base-'));
    try {
      cpSync(join(ROOT, 'test', 'fixtures', 'base-project'), project, { recursive: true });
      const pkg = join(project, 'node_modules', 'greeting');
      mkdirSync(pkg, { recursive: true });
      writeFileSync(join(pkg, 'package.json'), '{"name":"greeting","main":"index.js"}');
      writeFileSync(join(pkg, 'index.js'), "module.exports = (name) => 'hello ' + name;");
      // Started from `/`, as cron, systemd or a container's WORKDIR would.
      const { stdout } = await promisify(execFile)(process.execPath, [join(project, 'main.mjs')], {
        cwd: '/',
        env: { ...process.env, TENDRIL_ENTRY: pathToFileURL(join(ROOT, 'dist', 'index.js')).href },
        timeout: 20_000,
      });
      const results = JSON.parse(stdout) as Record<string, string>;
      const helper = join(project, 'lib', 'helper.cjs');
      assert.equal(results.cwd, '/');
      assert.equal(results.relative, `helper at ${helper}`);
      assert.equal(results.imported, `helper at ${helper}`);
      assert.equal(results.pkg, 'hello base');
      assert.equal(results.proxy, `tasks using helper at ${helper}`);
      assert.equal(results.called, `helper at ${helper}`);
      assert.equal(results.defined, 'lib');
      assert.equal(results.inline, 'top');
      assert.match(results.missing ?? '', /Cannot find module '\.\/lib\/missing\.cjs'/);
      assert.match(results.missing ?? '', new RegExp(`as if required from the module ${join(project, 'main.mjs')}`));
      assert.match(results.missing ?? '', /pass `base` to context\.callWith\(\) or to the Router/);
    } finally {
      rmSync(project, { recursive: true, force: true });
    }
  });

  test('started from /, a program without a package is not served the file system; one that asks is', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'tendril-root-'));
    try {
      writeFileSync(join(dir, 'secret.json'), '{"secret":1}');
      const spec = `./${dir.slice(1)}/secret.json`;
      // `node -e` from /: no module of the program, so the working directory is the only base there is.
      const script = `const { Router } = await import(process.env.TENDRIL_ENTRY); const router = new Router();
        const child = await router.local();
        try { await child.call((s) => require(s), ${JSON.stringify(spec)}); console.log('served'); }
        catch (error) { console.log(error.message); } finally { await router.shutdown(); }`;
      const { stdout } = await promisify(execFile)(process.execPath, ['--input-type=module', '-e', script], {
        cwd: '/',
        env: { ...process.env, TENDRIL_ENTRY: pathToFileURL(join(ROOT, 'dist', 'index.js')).href },
        timeout: 20_000,
      });
      assert.match(stdout, /refused to resolve .*outside the module roots.*moduleRoots/);
      // Named explicitly, / is a root like any other, and a base of / resolves from it.
      const everything = new Router({ moduleRoots: ['/'] });
      try {
        const context = await everything.local();
        assert.deepEqual(await context.callWith({ base: '/' }, (s: string) => require(s), spec), { secret: 1 });
      } finally {
        await everything.shutdown();
      }
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  test('a Router-wide base applies to every call that names none', async () => {
    const fixtures = join(ROOT, 'test', 'fixtures', 'modules');
    const based = new Router({ base: pathToFileURL(join(fixtures, 'main.js')) });
    try {
      const context = await based.local();
      assert.deepEqual(await context.call(() => require('./data.json')), { answer: 42, list: [1, 2, 3] });
      // A per-call base still wins.
      const modules = join(ROOT, 'test', 'fixtures');
      assert.deepEqual(await context.callWith({ base: modules }, () => require('./modules/data.json').answer), 42);
    } finally {
      await based.shutdown();
    }
  });

  test('a function that reads a variable of its scope is refused at the sender, naming it', async () => {
    const version = '1.2.3';
    const config = { retries: 2 };
    await assert.rejects(
      child.call(() => {
        // Were the function sent, this would run before the ReferenceError.
        (globalThis as Record<string, unknown>).__capturedRan = true;
        return `${version} ${config.retries}`;
      }),
      (error: unknown) =>
        error instanceof CapturedVariableError &&
        error instanceof TypeError &&
        error.code === 'ERR_TENDRIL_CAPTURED_VARIABLE' &&
        assert.deepEqual(error.names, ['version', 'config']) === undefined &&
        /context 'first'/.test(error.message) &&
        /travel as source text/.test(error.message) &&
        /pass values as arguments/.test(error.message),
    );
    assert.equal(await child.call(() => (globalThis as Record<string, unknown>).__capturedRan), undefined);
    // Beside parameters and local variables, which are the function's own.
    await assert.rejects(
      child.call((prefix: string) => {
        const suffix = '!';
        return `${prefix}${version}${suffix}`;
      }, 'v'),
      (error: unknown) => error instanceof CapturedVariableError && error.names.join() === 'version',
    );
    // The same values as arguments work; so do globals, typeof probes, writes and what a context binds.
    const result = await child.call(
      (v: string, c: { retries: number }) => {
        const shadowed = (version: string) => version;
        (globalThis as Record<string, unknown>).__firstScript = typeof window === 'undefined';
        // A name probed with typeof may be used where the probe guards it.
        const runtime = typeof Bun !== 'undefined' ? Bun.version : process.version;
        return [
          shadowed(v),
          c.retries,
          typeof require('node:os').hostname,
          Buffer.from('x').length,
          runtime === process.version,
        ];
      },
      version,
      config,
    );
    assert.deepEqual(result, ['1.2.3', 2, 'function', 1, true]);
  });

  test('a ReferenceError the sender could not foresee says why', async () => {
    await assert.rejects(
      // eval hides the name from the sender's parser.
      // biome-ignore lint/security/noGlobalEval: the point of the test.
      child.call(() => eval('notDefinedAnywhere')),
      (error: unknown) =>
        error instanceof CallError &&
        error.remoteName === 'ReferenceError' &&
        /notDefinedAnywhere is not defined: functions passed to call\(\) travel as source text/.test(
          error.remoteMessage,
        ),
    );
  });

  test('a custom error class keeps its name, and tendril errors thrown remotely keep their class', async () => {
    await assert.rejects(
      child.call(() => {
        class DeployError extends Error {}
        throw new DeployError('bad release');
      }),
      (error: unknown) =>
        error instanceof CallError && error.remoteName === 'DeployError' && error.remoteMessage === 'bad release',
    );
    await assert.rejects(
      child.call(() => {
        const { TimeoutError: Remote } = require('tendril');
        const error = new Remote('health check', 'web1', 250);
        // Fields its class does not declare are not taken: they could make the error misbehave where it is caught.
        Object.assign(error, { toString: 'not a function', unexpected: 'field' });
        throw error;
      }),
      (error: unknown) =>
        error instanceof TimeoutError &&
        error.timeoutMs === 250 &&
        error.contextName === 'web1' &&
        error.code === 'ERR_TENDRIL_TIMEOUT' &&
        /health check in context 'web1' timed out after 250 ms/.test(error.message) &&
        /raised in context 'first'/.test(error.stack ?? '') &&
        String(error).startsWith('TimeoutError: health check') &&
        !Object.hasOwn(error, 'unexpected') &&
        !Object.hasOwn(error, 'toString'),
    );
  });

  test('a call on a context that was shut down says so', async () => {
    const doomed = await router.local({ name: 'doomed' });
    await doomed.shutdown();
    await assert.rejects(
      doomed.call(() => 1),
      (error: unknown) =>
        error instanceof ContextDisconnectedError &&
        error.contextName === 'doomed' &&
        /it was shut down \(context\.shutdown\(\)\)/.test(error.message),
    );
  });
});
