// examples/fleet-local.ts and examples/fleet-ssh.ts run as written: progress
// bars (cli-progress) to the end, and summaries whose failures name their
// targets. The ssh example logs into the suite's sshd as several accounts,
// through a scratch HOME whose ~/.ssh/config gives the key and known_hosts.
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { cpSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { promisify } from 'node:util';
import { ROOT } from './support/procs.js';
import { startTestbed, type Testbed } from './support/testbed.js';

const example = (name: string) => join(ROOT, 'build', 'examples', `${name}.js`);

async function run(args: string[], env: NodeJS.ProcessEnv = process.env): Promise<string> {
  try {
    const { stdout, stderr } = await promisify(execFile)(process.execPath, args, { cwd: ROOT, env, timeout: 150_000 });
    return stdout + stderr;
  } catch (error) {
    const { stdout, stderr, message } = error as { stdout?: string; stderr?: string; message: string };
    throw new Error(`${message}\n${stdout ?? ''}${stderr ?? ''}`);
  }
}

test('examples/fleet-local runs one function across 50 contexts, twice, the second time from the pool', {
  timeout: 180_000,
}, async () => {
  const output = await run([example('fleet-local')]);
  assert.match(output, /first {2}\[.*\] 50\/50 \| 50 ok, 0 failed, 0 running/, output);
  assert.match(output, /again {2}\[.*\] 50\/50 \| 50 ok, 0 failed, 0 running/, output);
  assert.match(output, /^50 targets in [\d.]+ m?s: 50 succeeded, 0 failed\ntime per target: median \d+ ms/m, output);
  assert.match(output, /50 processes answered the first fleet; 50 of them answered the second again/, output);
  assert.match(output, /pool: 50 contexts, 50 started, 50 reused by the second fleet/, output);
});

describe('examples/fleet-ssh', { timeout: 180_000 }, () => {
  let bed: Testbed;
  let home: string;
  let env: NodeJS.ProcessEnv;

  before(async () => {
    bed = await startTestbed();
    home = mkdtempSync(join(tmpdir(), 'tendril-fleet-ssh-'));
    mkdirSync(join(home, '.ssh'), { mode: 0o700 });
    cpSync(bed.knownHosts, join(home, '.ssh', 'known_hosts'));
    writeFileSync(
      join(home, '.ssh', 'config'),
      [
        'Host 127.0.0.1',
        `  IdentityFile ${bed.keyFile}`,
        `  UserKnownHostsFile ${join(home, '.ssh', 'known_hosts')}`,
        '',
      ].join('\n'),
      { mode: 0o600 },
    );
    env = { ...process.env, HOME: home };
    delete env.SSH_AUTH_SOCK;
    delete env.DEBUG;
  });
  after(async () => {
    await bed.stop();
    rmSync(home, { recursive: true, force: true });
  });

  test('one function as several accounts; the summary names the ones that failed', async () => {
    const { key, sudoer, target, docs, profile } = bed.accounts;
    const host = `127.0.0.1:${bed.port}`;
    const label = (user: string) => `ssh:${user}@127.0.0.1:${bed.port}`;
    const output = await run(
      [
        example('fleet-ssh'),
        host,
        key.name,
        sudoer.name,
        target.name,
        docs.name,
        `${profile.name}:not-${profile.password}`, // a wrong password (no key is authorised for it)
        'tendril-nosuchuser', // no such account
      ],
      env,
    );
    assert.match(output, /accounts \[.*\] 6\/6 \| 4 ok, 2 failed, 0 connecting or running/, output);
    for (const user of [key.name, sudoer.name, target.name, docs.name]) {
      assert.ok(output.includes(`ok    ${label(user)}: ${user}, home `), `${user} ran the function:\n${output}`);
    }
    assert.match(output, /^6 targets in [\d.]+ m?s: 4 succeeded, 2 failed$/m, output);
    const failed = output.slice(output.indexOf('\nfailed:\n'));
    for (const user of [profile.name, 'tendril-nosuchuser']) {
      assert.match(failed, new RegExp(`\\n {2}${label(user).replaceAll('.', '\\.')}: .*authenticat`, 'i'), output);
    }
  });

  test('without a host and accounts it says how to run it', async () => {
    const environment = { ...env };
    delete environment.FLEET_HOST;
    delete environment.FLEET_ACCOUNTS;
    await assert.rejects(run([example('fleet-ssh')], environment), (error: Error) =>
      /usage: node build\/examples\/fleet-ssh\.js HOST\[:PORT\] USER\[:PASSWORD\]/.test(error.message),
    );
  });
});
