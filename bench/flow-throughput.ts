// Part 2, throughput: a Sender stream of 1 MiB values from a child and from
// a grandchild to the master, locally and over ssh (the suite's loopback
// sshd; the grandchild over ssh is a local child of the ssh context), beside
// `cat file | cat > /dev/null` and `cat file | ssh host 'cat > /dev/null'`
// (plain OpenSSH, the same key and port, Compression no) on a file of the
// same size, all in rounds that alternate them. Issue 9's targets: locally
// at least 50% of cat | cat, over ssh at least 90% of cat | ssh cat.
import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { type Context, Router } from 'tendril';
import { openSshArgs as sshInto, sshLogin, startTestbed, type Testbed } from '../test/support/testbed.js';
import {
  atAbort,
  type Contender,
  MIB,
  mbps,
  median,
  percent,
  runRounds,
  shellQuote,
  streamRate,
  type Table,
  timeShell,
} from './flow-shared.js';

const VALUES = Number(process.env.FLOW_MIB ?? 256);
const ROUNDS = Number(process.env.FLOW_ROUNDS ?? 5);

/** OpenSSH into the test bed as the tendril ssh contexts log in, without compression (as the issue measures). */
function openSshArgs(bed: Testbed): string[] {
  return sshInto(bed, ['Compression=no']);
}

/** The cipher OpenSSH's client negotiates with the test bed, from `ssh -v`. */
function openSshCipher(bed: Testbed): string {
  const { stderr } = spawnSync('ssh', ['-v', ...openSshArgs(bed), 'true'], { encoding: 'utf8' });
  return /kex: server->client cipher: (\S+)/.exec(stderr)?.[1] ?? 'unknown';
}

export async function benchThroughput(table: Table): Promise<void> {
  const dir = mkdtempSync(join(tmpdir(), 'tendril-flow-'));
  const file = join(dir, 'data');
  const bytes = VALUES * MIB;
  // Random, so nothing on either path gains from compressible data.
  const chunk = Buffer.alloc(MIB);
  const { randomFillSync } = await import('node:crypto');
  const parts: Buffer[] = [];
  for (let i = 0; i < VALUES; i++) parts.push(Buffer.from(randomFillSync(chunk)));
  writeFileSync(file, Buffer.concat(parts));
  parts.length = 0;

  const root = process.getuid?.() === 0;
  const bed = root ? await startTestbed() : undefined;
  const router = new Router();
  const forget = atAbort(async () => {
    await router.shutdown();
    await bed?.stop();
    rmSync(dir, { recursive: true, force: true });
  });
  try {
    const contenders: Contender[] = [];
    const catCat = `cat ${shellQuote(file)} | cat > /dev/null`;
    const add = (label: string, run: () => Promise<number>) => contenders.push({ label, run, rates: [] });
    add('cat file | cat > /dev/null', async () => bytes / 1e6 / ((await timeShell(catCat)) / 1000));

    const child = await router.local({ name: 'flow-child' });
    const grandchild = await router.local({ name: 'flow-grandchild', via: child });
    const stream = (context: Context) => () => streamRate(router, context, VALUES);
    add('tendril child -> master', stream(child));
    add('tendril grandchild -> master', stream(grandchild));

    let sshSetup: number[] = [];
    let cipher = '';
    if (bed) {
      const args = openSshArgs(bed).map(shellQuote).join(' ');
      const catSsh = `cat ${shellQuote(file)} | ssh ${args} 'cat > /dev/null'`;
      const sshTrue = `ssh ${args} true`;
      cipher = openSshCipher(bed);
      add("cat file | ssh host 'cat > /dev/null'", async () => {
        // The connection's setup is timed beside it, to say how much of the command it is.
        sshSetup.push(await timeShell(sshTrue));
        return bytes / 1e6 / ((await timeShell(catSsh)) / 1000);
      });
      const ssh = await router.ssh({ name: 'flow-ssh', ...sshLogin(bed) });
      const sshGrandchild = await router.local({ name: 'flow-ssh-grandchild', via: ssh });
      add('tendril ssh child -> master', stream(ssh));
      add('tendril ssh grandchild -> master', stream(sshGrandchild));
    }

    await runRounds(contenders, ROUNDS, 'throughput', () => {
      // Setups timed while warming up are not part of the figures.
      sshSetup = [];
    });

    table.heading(
      `throughput, ${VALUES} MiB per run as 1 MiB values (tendril) or one file; median of ${ROUNDS} alternating rounds`,
    );
    const rateOf = (label: string) => median(contenders.find((c) => c.label === label)?.rates ?? []);
    const pipe = rateOf('cat file | cat > /dev/null');
    const sshPipe = rateOf("cat file | ssh host 'cat > /dev/null'");
    const setup = median(sshSetup);
    // The same command's rate without the connection's setup (ssh host true), which the ssh context had paid before.
    const sshNet = bytes / 1e6 / (bytes / 1e6 / sshPipe - setup / 1000);
    for (const contender of contenders) {
      const rate = median(contender.rates);
      const runs = contender.rates.map((r) => r.toFixed(0)).join(', ');
      let note = `runs: ${runs || 'none'}`;
      if (contender.label.startsWith('tendril ssh')) {
        note += `; ${percent(rate / sshPipe)} of cat | ssh cat (target >= 90%), ${percent(rate / sshNet)} of it without its setup`;
      } else if (contender.label.startsWith('tendril')) {
        note += `; ${percent(rate / pipe)} of cat | cat (target >= 50%)`;
      } else if (contender.label.startsWith('cat file | ssh')) {
        const net = bytes / 1e6 / (bytes / 1e6 / sshPipe - setup / 1000 || Number.NaN);
        note += `; OpenSSH ${cipher}; includes ssh's setup (ssh host true: ${setup.toFixed(0)} ms; without it ${mbps(net)})`;
      }
      if (contender.failed) note += `; FAILED: ${contender.failed}`;
      table.add(contender.label, contender.rates.length ? mbps(rate) : 'failed', note);
    }
    if (!bed) table.add('over ssh', 'not measured', 'the loopback sshd test bed needs root');
  } finally {
    await router.shutdown();
    await bed?.stop();
    rmSync(dir, { recursive: true, force: true });
    forget();
  }
}
