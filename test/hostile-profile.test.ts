/**
 * Issue 40, finding 1, as the red team played it: a target account whose
 * login profile prints MiBs of "password" without a colon, reached with
 * the real `su -l` from the master. The account is the test's own,
 * made for this run and removed after it (the shared test bed's accounts
 * and files are never touched). Needs root.
 */
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { type LogRecord, Router } from 'tendril';
import { longestStall } from './support/hostile-text.js';

describe('a target account whose login profile prints 4 MiB of "password" (issue 40, finding 1)', () => {
  const account = `tendril-hp${randomBytes(4).toString('hex')}`;
  let router: Router;
  const logs: LogRecord[] = [];

  before(() => {
    if (process.getuid?.() !== 0) {
      throw new Error(
        'this file makes an account of its own and becomes it with su and sudo: run it as root (CI does)',
      );
    }
    execFileSync('useradd', ['--create-home', '--shell', '/bin/bash', account]);
    const home = (execFileSync('getent', ['passwd', account], { encoding: 'utf8' }).split(':')[5] as string).trim();
    // 4 MiB of "password" on stderr, no colon and no newline, then on with the login.
    const profile = join(home, '.bash_profile');
    writeFileSync(profile, `yes password | tr -d '\\n' | head -c ${4 * 1024 * 1024} >&2\necho >&2\n`);
    execFileSync('chown', [`${account}:`, profile]);
    router = new Router({ output: 'events' });
    router.on('log', (record) => logs.push(record));
  });
  after(async () => {
    await router?.shutdown();
    execFileSync('userdel', ['--remove', '--force', account], { stdio: 'ignore' });
  });

  test('su -l: the context starts, and the master never stalls', async (t) => {
    const started = Date.now();
    const { value: context, stall } = await longestStall(() =>
      router.su({ username: account, login: true, connectTimeout: 60_000 }),
    );
    const ms = Date.now() - started;
    t.diagnostic(`ready after ${ms} ms; the master's longest stall ${stall} ms`);
    assert.equal(await context.call(() => require('node:os').userInfo().username), account);
    // The profile ran: its text came as log records of at most 64 KiB.
    assert.ok(logs.some((record) => record.text.startsWith('passwordpassword')));
    // Generous: a loaded machine or a collection can stall a second; the quadratic pattern froze it for minutes.
    assert.ok(stall < 3000, `the master's event loop stalled for ${stall} ms`);
    assert.ok(ms < 30_000, `the start took ${ms} ms`);
    await context.shutdown();
  });
});
