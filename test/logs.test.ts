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
    router = new Router();
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

  test('remote output appears under the debug namespace tendril:<context name>', async () => {
    const { stderr } = await promisify(execFile)(
      process.execPath,
      [join(ROOT, 'build', 'test', 'fixtures', 'log-master.js')],
      {
        env: { ...process.env, DEBUG: 'tendril:chatty' },
      },
    );
    assert.match(stderr, /tendril:chatty hello from the chatty child/);
  });
});
