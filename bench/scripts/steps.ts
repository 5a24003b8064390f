// The playbook's work as a tendril script: one SSH context, then argv[2]
// trivial steps (`true`), each waiting for the one before, as Ansible's
// tasks do.
import { Router } from 'tendril';
import { commandLine } from '../cli.js';
import { target } from './target.js';

const steps = Number(
  commandLine({
    script: 'node build/bench/scripts/steps.js',
    description: `One ssh context (the bench's sshd, from BENCH_SSH), then STEPS exec('true'), each waiting
for the one before, as Ansible's tasks do.`,
    arguments: [{ name: 'STEPS', description: 'steps to run', count: true, required: true }],
    environment: { BENCH_SSH: 'the sshd to log into, as JSON (host, port, user, key, target, knownHosts)' },
  }).positionals[0],
);
const router = new Router();
const context = await router.ssh(target());
for (let i = 0; i < steps; i++) await context.exec('true');
await router.shutdown();
