// A whole tendril script, as a user writes one: start a context (argv[2]:
// local, ssh or sshsudo) and make one call. The bench times the process
// from start to exit, beside Mitogen's bench/peers/mitogen_bench.py.
import { Router } from 'tendril';
import { sudoTo, target } from './target.js';

const router = new Router();
const mode = process.argv[2];
const ssh = mode === 'local' ? undefined : await router.ssh(target());
const context =
  mode === 'local' ? await router.local() : mode === 'ssh' ? ssh : await router.sudo({ via: ssh, username: sudoTo() });
await context?.call(() => process.pid);
await router.shutdown();
