// `npm run bench:jobs`: what polling a running job costs (issue 24), over
// the suite's own loopback sshd, beside Ansible's async_status, every
// figure measured in this run:
//
// - tendril: `job.status()` of a running command job on an ssh context,
//   time per poll (POLLS in a row, after one) and bytes on the wire per
//   poll (both directions, counted by a TCP relay in front of sshd);
// - Ansible (ansible-core, pipelining, ControlPersist): a playbook that
//   starts `sleep` with `async:`/`poll: 0`, then runs `async_status` K
//   times, against the same playbook with no poll; the difference over K
//   is what one poll costs, time and bytes through the same relay.
//
//   node build/bench/jobs.js [--smoke] [--rounds N] [--json FILE]
import { execFile } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createConnection, createServer, type Server } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { Router } from 'tendril';
import { openSshArgs, sshLogin, startTestbed } from '../test/support/testbed.js';
import { commandLine } from './cli.js';
import { runPlaybook } from './compare/ansible.js';
import { printTable, type Row, summarise } from './compare/results.js';

const { values: flags } = commandLine({
  script: 'node build/bench/jobs.js',
  description: `Polling a running job (npm run bench:jobs): one job.status() of a job on an ssh context,
time and bytes on the wire, beside one async_status task of Ansible (ansible-core, pipelining,
ControlPersist) polling an async task on the same host. Needs root (the suite's sshd test bed).`,
  options: {
    smoke: { type: 'boolean', description: 'every measurement once, with few polls (what the suite runs)' },
    rounds: { type: 'string', value: 'N', description: 'rounds (default 3; 1 with --smoke)' },
    json: { type: 'string', value: 'FILE', description: 'also write the results as JSON to FILE' },
  },
});
const SMOKE = flags.smoke === true;
const ROUNDS = SMOKE ? 1 : Math.max(1, Number(flags.rounds ?? 3) || 3);
/** tendril polls timed in a row, and Ansible's async_status tasks in the polling playbook. */
const POLLS = SMOKE ? 10 : 200;
const ANSIBLE_POLLS = SMOKE ? 2 : 20;
/** How long the polled jobs would run: long enough never to end during the bench. */
const SLEEP = '597';

const GROUP = 'One status poll of a running job over ssh';
const rows = {
  time: row('time per poll', 'ms'),
  bytes: row('bytes on the wire per poll (both ways)', 'bytes'),
};
const ansible: { ms: number[]; bytes: number[] } = { ms: [], bytes: [] };

function row(metric: string, unit: Row['unit']): Row {
  return { group: GROUP, metric, unit, tendril: [], peers: {} };
}

/** A TCP relay to sshd that counts the bytes it carries, both ways. */
async function countingRelay(port: number): Promise<{ port: number; bytes: () => number; server: Server }> {
  let bytes = 0;
  const server = createServer((client) => {
    const upstream = createConnection({ host: '127.0.0.1', port });
    client.on('data', (chunk: Buffer) => {
      bytes += chunk.length;
    });
    upstream.on('data', (chunk: Buffer) => {
      bytes += chunk.length;
    });
    client.pipe(upstream).pipe(client);
    client.on('error', () => upstream.destroy());
    upstream.on('error', () => client.destroy());
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return { port: (server.address() as { port: number }).port, bytes: () => bytes, server };
}

function median(values: number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.floor(sorted.length / 2)] ?? Number.NaN;
}

const bed = await startTestbed();
const relay = await countingRelay(bed.port);
const account = bed.accounts.sudoer.name;
const dir = mkdtempSync(join(tmpdir(), 'tendril-bench-jobs-'));
const target = { port: relay.port, user: account, key: bed.keyFile, knownHosts: bed.knownHosts };
const playbook = (polls: number) => {
  const tasks = [
    `    - command: sleep ${SLEEP}\n      async: 600\n      poll: 0\n      register: started\n`,
    ...Array.from(
      { length: polls },
      (_, i) => `    - name: poll ${i + 1}\n      async_status:\n        jid: "{{ started.ansible_job_id }}"\n`,
    ),
  ].join('');
  writeFileSync(join(dir, 'playbook.yml'), `- hosts: bench\n  gather_facts: false\n  tasks:\n${tasks}`);
};
writeFileSync(
  join(dir, 'inventory'),
  `bench ansible_host=127.0.0.1 ansible_port=${relay.port} ansible_user=${account} ansible_ssh_private_key_file=${bed.keyFile} ansible_python_interpreter=/usr/bin/python3\n`,
);
// The known_hosts entry names sshd's own port: the relay's is another name for the same key.
writeFileSync(
  join(dir, 'known_hosts'),
  readFileSync(bed.knownHosts, 'utf8')
    .split('\n')
    .filter((line) => line.trim())
    .map((line) => `[127.0.0.1]:${relay.port} ${line.split(' ').slice(1).join(' ')}\n`)
    .join(''),
);
target.knownHosts = join(dir, 'known_hosts');

const router = new Router();
try {
  const context = await router.ssh({ ...sshLogin(bed), port: relay.port, knownHostsFile: target.knownHosts });
  const job = await context.execJob('sleep', [SLEEP], { timeout: 600_000, name: 'bench-poll' });
  try {
    for (let round = 0; round < ROUNDS; round++) {
      await job.status();
      const before = relay.bytes();
      const start = performance.now();
      for (let i = 0; i < POLLS; i++) {
        const status = await job.status();
        if (status.state !== 'running') throw new Error(`the polled job is ${status.state}`);
      }
      rows.time.tendril.push((performance.now() - start) / POLLS);
      rows.bytes.tendril.push((relay.bytes() - before) / POLLS);

      const measure = async (polls: number) => {
        playbook(polls);
        const before = relay.bytes();
        const ms = await runPlaybook(dir, target, 'linear, pipelining');
        return { ms, bytes: relay.bytes() - before };
      };
      const none = await measure(0);
      const some = await measure(ANSIBLE_POLLS);
      ansible.ms.push((some.ms - none.ms) / ANSIBLE_POLLS);
      ansible.bytes.push((some.bytes - none.bytes) / ANSIBLE_POLLS);
    }
  } finally {
    await job.cancel();
    await job.remove();
  }
} finally {
  await router.shutdown();
  // Ansible's async sleeps and its ~/.ansible_async entries are this bench's: end them.
  await promisify(execFile)('ssh', [
    ...openSshArgs(bed),
    `pkill -x -f 'sleep ${SLEEP}'; rm -rf ~/.ansible_async`,
  ]).catch(() => {});
  relay.server.close();
  rmSync(dir, { recursive: true, force: true });
  await bed.stop();
}

rows.time.peers['Ansible async_status'] = median(ansible.ms);
rows.bytes.peers['Ansible async_status'] = median(ansible.bytes);
const summaries = Object.values(rows).map(summarise);
printTable(summaries);
if (flags.json) writeFileSync(flags.json, `${JSON.stringify({ summaries }, null, 2)}\n`);
