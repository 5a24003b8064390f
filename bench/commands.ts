// 100 sequential `exec('true')` on one ssh context against 100 `ssh host
// true` over an existing OpenSSH ControlMaster connection, both against the
// suite's loopback sshd (test/support/testbed.ts, which needs root) and
// measured in this run. The target: exec at least 5x faster.
import { type ChildProcess, spawn } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Router } from 'tendril';
import { openSshArgs, sshLogin, startTestbed } from '../test/support/testbed.js';
import { commandLine } from './cli.js';
import { median, row } from './report.js';

const COMMANDS = 100;

function run(command: string, args: string[]): Promise<void> {
  return new Promise((resolve, reject) => {
    spawn(command, args, { stdio: 'ignore' })
      .on('exit', (code) => (code === 0 ? resolve() : reject(new Error(`${command} ${args.join(' ')} exited ${code}`))))
      .on('error', reject);
  });
}

/** Times each of `count` sequential runs of `once`, in ms. */
async function timeEach(count: number, once: () => PromiseLike<unknown>): Promise<number[]> {
  const times: number[] = [];
  for (let i = 0; i < count; i++) {
    const started = performance.now();
    await once();
    times.push(performance.now() - started);
  }
  return times;
}

const sum = (values: number[]) => values.reduce((a, b) => a + b, 0);

export async function benchCommands(): Promise<void> {
  if (process.getuid?.() !== 0) {
    console.log('commands: not measured: the loopback sshd test bed needs root');
    return;
  }
  const bed = await startTestbed();
  const router = new Router();
  const scratch = mkdtempSync(join(tmpdir(), 'tendril-bench-commands-'));
  let master: ChildProcess | undefined;
  try {
    const controlPath = join(scratch, 'control');
    const shared = openSshArgs(bed, [`ControlPath=${controlPath}`]);
    // The ControlMaster: one authenticated connection the timed `ssh` runs reuse.
    master = spawn('ssh', ['-o', 'ControlMaster=yes', '-N', ...openSshArgs(bed, [`ControlPath=${controlPath}`])], {
      stdio: 'ignore',
    });
    for (let waited = 0; !existsSync(controlPath); waited += 10) {
      if (waited > 10_000) throw new Error('the ssh ControlMaster did not open its socket within 10 s');
      await new Promise((resolve) => setTimeout(resolve, 10));
    }
    const context = await router.ssh(sshLogin(bed));
    // Warm both paths (the services module loads on the first exec).
    await timeEach(5, () => run('ssh', [...shared, 'true']));
    await timeEach(5, () => context.exec('true'));
    const ssh = await timeEach(COMMANDS, () => run('ssh', [...shared, 'true']));
    const exec = await timeEach(COMMANDS, () => context.exec('true'));
    const ratio = median(ssh) / median(exec);
    row(
      `ssh host true, ControlMaster (median)`,
      `${median(ssh).toFixed(2)} ms`,
      `${COMMANDS} in ${sum(ssh).toFixed(0)} ms; OpenSSH client, measured in this run`,
    );
    row(
      `context.exec('true') over ssh (median)`,
      `${median(exec).toFixed(2)} ms`,
      `${COMMANDS} in ${sum(exec).toFixed(0)} ms; ${ratio.toFixed(1)}x faster than ssh host true (target >= 5x)`,
    );
  } finally {
    master?.kill();
    await router.shutdown();
    await bed.stop();
    rmSync(scratch, { recursive: true, force: true });
  }
}

if (import.meta.url === `file://${process.argv[1]}`) {
  commandLine({
    script: 'node build/bench/commands.js',
    description: `Commands (npm run bench:commands): ${COMMANDS} sequential exec('true') on one ssh context
against ${COMMANDS} ssh host true over an OpenSSH ControlMaster connection, both against
the suite's loopback sshd. Needs root (the test bed).`,
  });
  await benchCommands();
}
