// examples/listener-workers.ts runs as written against the suite's sshd:
// 8 forked workers share the master's one SSH connection, which the
// sshd's own log confirms.
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { rmSync } from 'node:fs';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { promisify } from 'node:util';
import { ROOT } from './support/procs.js';
import { sshHome, startTestbed, type Testbed } from './support/testbed.js';

describe('examples/listener-workers', () => {
  let bed: Testbed;
  let env: NodeJS.ProcessEnv;
  const home = join(ROOT, 'build', 'listener-example-home');

  before(async () => {
    bed = await startTestbed();
    rmSync(home, { recursive: true, force: true });
    env = sshHome(bed, home);
  });
  after(async () => {
    await bed.stop();
    rmSync(home, { recursive: true, force: true });
  });

  test('examples/listener-workers: 8 workers x 20 calls through one SSH connection', { timeout: 120_000 }, async () => {
    const logBefore = bed.sshdLog().length;
    const { stdout } = await promisify(execFile)(
      process.execPath,
      [join(ROOT, 'build', 'examples', 'listener-workers.js')],
      { cwd: ROOT, env, timeout: 100_000 },
    );
    const master = /master: ssh:\S+ is context \d+, pid (\d+) on /.exec(stdout);
    assert.ok(master, stdout);
    assert.equal((stdout.match(/^worker:\d+: 20 calls in \d+ ms, answered by pid (\d+)$/gm) ?? []).length, 8, stdout);
    assert.match(stdout, new RegExp(`^160 calls from 8 workers, all answered by pid ${master[1]}$`, 'm'));
    assert.match(stdout, /^pool: 1 context, 1 connection opened, 8 reused$/m);
    const log = bed.sshdLog().slice(logBefore);
    const accepted = log.match(/Accepted publickey for \S+ from 127\.0\.0\.1 port \d+/g) ?? [];
    assert.equal(accepted.length, 1, `sshd accepted one connection during the example:\n${log}`);
  });
});
