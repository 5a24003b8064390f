// The playbook's work as a tendril script: one SSH context, then argv[2]
// trivial steps (`true`), each waiting for the one before, as Ansible's
// tasks do.
import { Router } from 'tendril';
import { target } from './target.js';

const router = new Router();
const context = await router.ssh(target());
for (let i = 0; i < Number(process.argv[2]); i++) await context.exec('true');
await router.shutdown();
