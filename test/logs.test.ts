import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { promisify } from 'node:util';
import { type Context, type LogRecord, Router } from 'tendril';
import { ROOT, waitFor } from './support/procs.js';

describe('output of remote code', () => {
  let router: Router;
  let child: Context;
  const logs: LogRecord[] = [];
  const linesOf = (name: string) => logs.filter((r) => r.contextName === name).map((r) => r.text);

  before(async () => {
    // Events only: the 1 MiB below would else be printed on the test's stderr.
    router = new Router({ output: 'events' });
    router.on('log', (record) => logs.push(record));
    child = await router.local({ name: 'writer' });
  });
  after(() => router.shutdown());

  test('console.log, process.stdout.write and console.error arrive as log records, in order', async () => {
    await child.call(() => {
      console.log('one');
      process.stdout.write('two\n');
      console.error('three');
      return null;
    });
    await waitFor(() => linesOf('writer').includes('three'));
    const lines = linesOf('writer');
    assert.deepEqual(lines.slice(lines.indexOf('one'), lines.indexOf('one') + 3), ['one', 'two', 'three']);
    assert.ok(logs.every((r) => r.contextName !== 'writer' || r.contextId === child.id));
  });

  test('1 MiB written by a spawned process with inherited stdio arrives, and the stream stays intact', async () => {
    const before = logs.length;
    await child.call(
      () =>
        new Promise((resolve) => {
          const cp = require('node:child_process') as typeof import('node:child_process');
          const script =
            'const line = "y".repeat(99) + "\\n"; process.stdout.write(line.repeat(5243)); process.stderr.write(line.repeat(5243));';
          cp.spawn(process.execPath, ['-e', script], { stdio: 'inherit' }).on('exit', resolve);
        }),
    );
    // stdout and stderr share one pipe, so writes over PIPE_BUF may interleave mid-line;
    // every byte must still arrive, and nothing else.
    const expected = 2 * 5243 * 99;
    const ys = () =>
      logs
        .slice(before)
        .reduce((n, r) => n + (r.contextName === 'writer' && /^y+$/.test(r.text) ? r.text.length : 0), 0);
    await waitFor(() => ys() >= expected);
    assert.equal(ys(), expected);
    assert.ok(expected + 2 * 5243 >= 1024 * 1024, 'at least 1 MiB including newlines');
    assert.deepEqual(await child.call((b: Buffer) => b, Buffer.from('intact')), Buffer.from('intact'));
  });

  test('output of a grandchild is forwarded to the master under its own name', async () => {
    const grandchild = await router.local({ name: 'deep-writer', via: child });
    await grandchild.call(() => console.log('from below'));
    await waitFor(() => linesOf('deep-writer').includes('from below'));
    assert.equal(logs.find((r) => r.text === 'from below')?.contextId, grandchild.id);
    await grandchild.shutdown();
  });
});

describe('remote output in the master process', () => {
  const HOSTILE = '\x1b]0;pwned\x07\x1b[2Jhostile\u009b31m red\rover\x00 written\x0b';
  const FORGED = 'forged\n[web2] rm -rf /';

  /** The control characters in `text` but tab and newline, as their codes. */
  const controlCharacters = (text: string) =>
    [...text]
      .map((char) => char.charCodeAt(0))
      .filter((code) => (code < 0x20 && code !== 0x09 && code !== 0x0a) || (code >= 0x7f && code <= 0x9f));

  /** Runs test/fixtures/log-master.js with `output` (none: the default); its stderr, and the texts of the log events it got. */
  async function runMaster(
    output?: string,
    env: NodeJS.ProcessEnv = {},
  ): Promise<{ stderr: string; texts: Record<string, string[]> }> {
    const { stdout, stderr } = await promisify(execFile)(
      process.execPath,
      [join(ROOT, 'build', 'test', 'fixtures', 'log-master.js'), ...(output === undefined ? [] : [output])],
      { env: { ...process.env, DEBUG: '', ...env }, timeout: 20_000 },
    );
    return { stderr, texts: JSON.parse(stdout) as Record<string, string[]> };
  }

  test("is printed on the master's stderr by default, one line per record prefixed with the context name, and still emitted", async () => {
    const { stderr, texts } = await runMaster();
    assert.deepEqual(texts.chatty, ['hello from the chatty child', HOSTILE, FORGED]);
    assert.match(stderr, /^\[chatty\] hello from the chatty child$/m);
  });

  test('what a start writes before the context runs (a banner, a prompt) is only emitted, and not glued to its first line', async () => {
    const { stderr, texts } = await runMaster();
    assert.deepEqual(texts.wrapped, ['a login banner', 'Password: ', 'first words']);
    assert.match(stderr, /^\[wrapped\] first words$/m);
    assert.doesNotMatch(stderr, /banner|Password/);
  });

  test('a hostile line is printed with its control characters escaped: it cannot drive the terminal or forge a line', async () => {
    const { stderr } = await runMaster();
    // Of C0, DEL and C1, nothing but tab and the newline ending each line.
    assert.deepEqual(controlCharacters(stderr), []);
    assert.ok(
      stderr.includes('[chatty] \\x1b]0;pwned\\x07\\x1b[2Jhostile\\x9b31m red\\rover\\x00 written\\x0b\n'),
      stderr,
    );
    assert.ok(stderr.includes('[chatty] forged\\n[web2] rm -rf /\n'), stderr);
    assert.doesNotMatch(stderr, /^\[web2\]/m);
  });

  test("with output: 'events', nothing is printed and the log event still fires", async () => {
    const { stderr, texts } = await runMaster('events');
    assert.deepEqual(texts, {
      chatty: ['hello from the chatty child', HOSTILE, FORGED],
      wrapped: ['a login banner', 'Password: ', 'first words'],
    });
    assert.doesNotMatch(stderr, /chatty|hello|hostile|forged|wrapped|first words/);
  });

  test("with output: 'events', remote output appears under the debug namespace tendril:<context name>, escaped", async () => {
    const { stderr } = await runMaster('events', { DEBUG: 'tendril:chatty' });
    assert.match(stderr, /tendril:chatty hello from the chatty child/);
    assert.match(stderr, /tendril:chatty \\x1b\]0;pwned/);
    assert.deepEqual(controlCharacters(stderr), []);
  });

  test('printed by default, a line is not shown again under the debug namespace', async () => {
    const { stderr } = await runMaster(undefined, { DEBUG: 'tendril:chatty' });
    assert.equal(stderr.match(/hello from the chatty child/g)?.length, 1, stderr);
  });
});
