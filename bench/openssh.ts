import type { Testbed } from '../test/support/testbed.js';

/**
 * Arguments that log plain OpenSSH's `ssh` into the suite's loopback sshd
 * as the sudoer account, with the test bed's key and known_hosts, before
 * the remote command. `options` are extra `-o` settings, such as
 * `'Compression=no'`.
 */
export function openSshArgs(bed: Testbed, options: string[] = []): string[] {
  return [
    '-T',
    '-o',
    'BatchMode=yes',
    ...options.flatMap((option) => ['-o', option]),
    '-o',
    `UserKnownHostsFile=${bed.knownHosts}`,
    '-i',
    bed.keyFile,
    '-p',
    String(bed.port),
    `${bed.accounts.sudoer.name}@127.0.0.1`,
  ];
}
