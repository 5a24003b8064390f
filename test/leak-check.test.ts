// The leak check (test/support/leak-check.ts) itself: it reports and kills
// what a test file leaves behind, its test accounts' processes included
// (their mark crosses sudo and sshd), and leaves alone a process of the
// same test accounts that another run on this machine started.
import assert from 'node:assert/strict';
import { spawn, spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { isAlive, ROOT, waitGone } from './support/procs.js';
import { MARK_VARIABLE } from './support/run-mark.js';
import { startTestbed, type Testbed } from './support/testbed.js';

describe('the leak check', () => {
  let bed: Testbed;
  let scratch: string;
  before(async () => {
    bed = await startTestbed();
    scratch = mkdtempSync(join(tmpdir(), 'tendril-leak-check-'));
  });
  after(async () => {
    await bed.stop();
    rmSync(scratch, { recursive: true, force: true });
  });

  /** A process of the test bed's target account, as another run would have started it: `mark` in its environment. */
  function accountProcess(mark: string | undefined) {
    const [uid, gid] = ['-u', '-g'].map((flag) =>
      Number(spawnSync('id', [flag, bed.accounts.target.name], { encoding: 'utf8' }).stdout),
    );
    const env: NodeJS.ProcessEnv = { PATH: process.env.PATH };
    if (mark !== undefined) env[MARK_VARIABLE] = mark;
    return spawn('sleep', ['300'], { uid, gid, env, stdio: 'ignore', detached: true });
  }

  test("a file's leftovers are reported and killed, through sudo and sshd too; another run's are left alone", async () => {
    const another = accountProcess('4242.another-run');
    try {
      const pidFile = join(scratch, 'pids.json');
      const run = spawnSync(
        process.execPath,
        [
          '--import',
          join(ROOT, 'build', 'test', 'support', 'leak-check.js'),
          '--test',
          '--test-reporter=spec',
          join(ROOT, 'build', 'test', 'fixtures', 'leaky-file.js'),
        ],
        // Not as a child of this file's test runner (NODE_TEST_CONTEXT): as a run of its own.
        {
          encoding: 'utf8',
          env: { ...process.env, LEAKY_PIDS: pidFile, NODE_TEST_CONTEXT: undefined },
          timeout: 60_000,
        },
      );
      const output = `${run.stdout}${run.stderr}`;
      const pids = JSON.parse(readFileSync(pidFile, 'utf8')) as Record<'local' | 'sudo' | 'ssh', number>;
      assert.notEqual(run.status, 0, output);
      assert.match(output, /tests leaked resources:\n\s+processes still running: /);
      for (const [how, pid] of Object.entries(pids)) {
        assert.match(output, new RegExp(`\\b${pid} \\(sleep 300\\)`), `the ${how} orphan is not reported: ${output}`);
      }
      await waitGone(Object.values(pids), 5000);
      assert.ok(isAlive(another.pid as number), "another run's process was killed");
      assert.doesNotMatch(output, new RegExp(`\\b${another.pid}\\b`), "another run's process was reported");
    } finally {
      const exited = new Promise((resolve) =>
        another.exitCode !== null || another.signalCode !== null ? resolve(null) : another.once('exit', resolve),
      );
      another.kill('SIGKILL');
      await waitGone([another.pid as number], 5000);
      // Gone from /proc is not yet reaped here: its handle closes with the exit event, which the leak check counts.
      await exited;
    }
  });
});
