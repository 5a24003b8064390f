// SSH and sudo against the suite's own loopback sshd (test/support/testbed.ts,
// which needs root): OpenSSH's own `ssh host true` and `ssh host node -e 0`
// timed in this run, beside tendril's time to a ready ssh context, ssh ->
// sudo, and an empty call over ssh. Mitogen's figures are those quoted in
// issue 4 for this machine, printed for reference only.
import { spawn } from 'node:child_process';
import { Router } from 'tendril';
import { sshLogin, startTestbed } from '../test/support/testbed.js';
import { openSshArgs } from './openssh.js';
import { median, row } from './report.js';

const RUNS = 10;

function timeCommand(command: string, args: string[]): Promise<number> {
  return new Promise((resolve, reject) => {
    const started = performance.now();
    spawn(command, args, { stdio: 'ignore' })
      .on('exit', (code) =>
        code === 0 ? resolve(performance.now() - started) : reject(new Error(`${command} exited ${code}`)),
      )
      .on('error', reject);
  });
}

export async function benchSsh(): Promise<void> {
  if (process.getuid?.() !== 0) {
    console.log('ssh: not measured: the loopback sshd test bed needs root');
    return;
  }
  const bed = await startTestbed();
  const router = new Router();
  try {
    const sshArgs = openSshArgs(bed);
    const login = sshLogin(bed);
    // Warm every path once.
    await timeCommand('ssh', [...sshArgs, 'node -e 0']);
    await (await router.ssh(login)).shutdown();
    const sshTrue: number[] = [];
    const sshNode: number[] = [];
    const ready: number[] = [];
    const sudoReady: number[] = [];
    for (let i = 0; i < RUNS; i++) {
      sshTrue.push(await timeCommand('ssh', [...sshArgs, 'true']));
      sshNode.push(await timeCommand('ssh', [...sshArgs, 'node -e 0']));
      let started = performance.now();
      const context = await router.ssh(login);
      ready.push(performance.now() - started);
      started = performance.now();
      const viaSsh = await router.ssh(login);
      const target = await router.sudo({ via: viaSsh, username: bed.accounts.target.name });
      sudoReady.push(performance.now() - started);
      await target.call(() => null);
      await Promise.all([context.shutdown(), viaSsh.shutdown()]);
    }
    const context = await router.ssh(login);
    for (let i = 0; i < 3000; i++) await context.call(() => null);
    const rtt: number[] = [];
    for (let i = 0; i < 5000; i++) {
      const started = performance.now();
      await context.call(() => null);
      rtt.push(performance.now() - started);
    }
    const mitogen = { ready: 434, sudo: 684, rtt: 0.63 };
    row('ssh host true (median)', `${median(sshTrue).toFixed(1)} ms`, 'OpenSSH client, measured in this run');
    row('ssh host node -e 0 (median)', `${median(sshNode).toFixed(1)} ms`, 'OpenSSH client, measured in this run');
    row(
      'ready ssh context (median)',
      `${median(ready).toFixed(1)} ms`,
      `${(median(ready) / median(sshNode)).toFixed(2)}x ssh host node -e 0 (target <= 1.1x); Mitogen ${mitogen.ready} ms quoted`,
    );
    row(
      'ready ssh -> sudo context (median)',
      `${median(sudoReady).toFixed(1)} ms`,
      `Mitogen ${mitogen.sudo} ms quoted: ${(mitogen.sudo / median(sudoReady)).toFixed(1)}x faster (target >= 1.5x)`,
    );
    row(
      'empty call over ssh (median)',
      `${(median(rtt) * 1000).toFixed(1)} µs`,
      `Mitogen ${mitogen.rtt} ms quoted: ${(mitogen.rtt / median(rtt)).toFixed(1)}x faster (target >= 3x)`,
    );
  } finally {
    await router.shutdown();
    await bed.stop();
  }
}
