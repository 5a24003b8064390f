import type { SshOptions } from 'tendril';

/** The loopback sshd the bench started, from the environment (BENCH_SSH, JSON). */
export function target(): SshOptions & { sudoTo: string } {
  const { host, port, user, key, target: sudoTo, knownHosts } = JSON.parse(process.env.BENCH_SSH ?? '{}');
  return {
    hostname: host,
    port,
    username: user,
    identityFile: key,
    knownHostsFile: knownHosts,
    sshConfig: false,
    sudoTo,
  };
}
