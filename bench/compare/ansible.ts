// The playbook row: Debian's ansible-core (and ansible-mitogen's strategy)
// running `command: true` steps against the loopback sshd, in three ways.
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { run } from './processes.js';

/** Where Debian's ansible-mitogen puts its strategy plugins. */
const MITOGEN_STRATEGIES = '/usr/lib/python3/dist-packages/ansible_mitogen/plugins/strategy';

/** The ways the playbook is run. */
export const ANSIBLE_VARIANTS = ['linear, ControlPersist', 'linear, pipelining', 'mitogen_linear'] as const;
export type AnsibleVariant = (typeof ANSIBLE_VARIANTS)[number];

/** The sshd account the playbook logs in as. */
export interface AnsibleTarget {
  port: number;
  user: string;
  key: string;
  knownHosts: string;
}

/** A scratch directory holding an inventory and a playbook of `steps` tasks. */
export function writePlaybook(target: AnsibleTarget, steps: number): string {
  const dir = mkdtempSync(join(tmpdir(), 'tendril-bench-ansible-'));
  writeFileSync(
    join(dir, 'inventory'),
    `bench ansible_host=127.0.0.1 ansible_port=${target.port} ansible_user=${target.user} ansible_ssh_private_key_file=${target.key} ansible_python_interpreter=/usr/bin/python3\n`,
  );
  const tasks = Array.from({ length: steps }, (_, i) => `    - name: step ${i + 1}\n      command: 'true'\n`).join('');
  writeFileSync(join(dir, 'playbook.yml'), `- hosts: bench\n  gather_facts: false\n  tasks:\n${tasks}`);
  return dir;
}

/**
 * Runs the playbook once with `variant`, from a cold start (a fresh
 * ControlMaster directory, so no connection is reused between runs).
 * @returns the wall time of ansible-playbook, in ms.
 */
export async function runPlaybook(dir: string, target: AnsibleTarget, variant: AnsibleVariant): Promise<number> {
  const control = mkdtempSync(join(tmpdir(), 'tendril-bench-cp-'));
  const env: NodeJS.ProcessEnv = {
    ...process.env,
    ANSIBLE_CONFIG: join(dir, 'none.cfg'),
    ANSIBLE_INVENTORY: join(dir, 'inventory'),
    ANSIBLE_LOCAL_TEMP: join(dir, 'tmp'),
    ANSIBLE_SSH_CONTROL_PATH_DIR: control,
    ANSIBLE_SSH_ARGS: '-o ControlMaster=auto -o ControlPersist=60s',
    ANSIBLE_SSH_COMMON_ARGS: `-o UserKnownHostsFile=${target.knownHosts}`,
    ANSIBLE_PIPELINING: variant === 'linear, pipelining' ? 'True' : 'False',
    ANSIBLE_STRATEGY: variant === 'mitogen_linear' ? 'mitogen_linear' : 'linear',
    ANSIBLE_STRATEGY_PLUGINS: MITOGEN_STRATEGIES,
    ANSIBLE_NOCOLOR: '1',
    ANSIBLE_RETRY_FILES_ENABLED: 'False',
  };
  try {
    return (await run('/usr/bin/ansible-playbook', [join(dir, 'playbook.yml')], env)).ms;
  } finally {
    // The ControlMaster ssh lingers for ControlPersist: stop it, so the next run starts cold.
    await run('/usr/bin/ssh', [
      '-O',
      'exit',
      '-o',
      `ControlPath=${control}/%C`,
      '-p',
      String(target.port),
      `${target.user}@127.0.0.1`,
    ]).catch(() => {});
    rmSync(control, { recursive: true, force: true });
  }
}
