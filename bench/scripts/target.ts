import type { SshOptions } from 'tendril';

/** The bench's settings of the loopback sshd it started, from the environment (BENCH_SSH, JSON). */
function settings(): { host: string; port: number; user: string; key: string; target: string; knownHosts: string } {
  return JSON.parse(process.env.BENCH_SSH ?? '{}');
}

/** The options of `router.ssh()` that log into the loopback sshd the bench started. */
export function target(): SshOptions {
  const { host, port, user, key, knownHosts } = settings();
  return {
    hostname: host,
    port,
    username: user,
    identityFile: key,
    knownHostsFile: knownHosts,
    sshConfig: false,
  };
}

/** The account the `sshsudo` mode becomes there with sudo. */
export function sudoTo(): string {
  return settings().target;
}
