// A whole tendril script, as a user writes one: start a context (argv[2]:
// local, ssh or sshsudo) and make one call. The bench times the process
// from start to exit, beside Mitogen's bench/peers/mitogen_bench.py.
import { Router } from 'tendril';
import { commandLine } from '../cli.js';
import { sudoTo, target } from './target.js';

const [mode] = commandLine({
  script: 'node build/bench/scripts/call.js',
  description: `A whole tendril script, as the bench times one: start a context and make one call.
ssh and sshsudo log into the bench's sshd, from BENCH_SSH.`,
  arguments: [
    { name: 'mode', description: 'how the context is started', choices: ['local', 'ssh', 'sshsudo'], required: true },
  ],
  environment: { BENCH_SSH: 'the sshd to log into, as JSON (host, port, user, key, target, knownHosts)' },
}).positionals;
const router = new Router();
const ssh = mode === 'local' ? undefined : await router.ssh(target());
const context =
  mode === 'local' ? await router.local() : mode === 'ssh' ? ssh : await router.sudo({ via: ssh, username: sudoTo() });
await context?.call(() => process.pid);
await router.shutdown();
