import type { Client } from 'ssh2';
import { logger } from '../core/log.js';
import { DEFAULT_CONNECT_TIMEOUT } from './bootstrap.js';
import type { ConnectionMethod, Transport } from './method.js';
import { targetName } from './naming.js';
import { shellCommand } from './shell.js';
import { connectHop } from './ssh-connect-hop.js';
import { type Hop, planHops } from './ssh-hops.js';
import { loadSsh2 } from './ssh-library.js';
import { checkSshOptions, SSH_OPTION_NAMES, type SshOptions } from './ssh-options.js';
import { exec, transport } from './ssh-transport.js';

/** The options of `ssh`, where they were before ssh-options.ts held them. */
export type { HostKeyPolicy, SshJumpHost, SshOptions } from './ssh-options.js';

const debug = logger('ssh');

/**
 * `ssh`: a child on another machine over SSH, using the ssh2 library. One
 * SSH connection and one session channel per hop carry everything; jump
 * hosts are crossed with direct-tcpip channels, each hop authenticated and
 * host-key-checked with its own settings.
 */
export const ssh: ConnectionMethod<SshOptions> = {
  name: 'ssh',
  optionNames: SSH_OPTION_NAMES,
  checkOptions: checkSshOptions,
  defaultNode: () => undefined,
  async start(argv, options, session): Promise<Transport> {
    session.describe(targetName('ssh', options));
    session.step = `resolving the ssh config for ${options.hostname}`;
    const total = options.connectTimeout ?? DEFAULT_CONNECT_TIMEOUT;
    const clients: Client[] = [];
    try {
      const hops = planHops(options, session);
      const target = hops[hops.length - 1] as Hop;
      const lib = await loadSsh2();
      for (let i = 0; i < hops.length; i++) {
        clients.push(await connectHop(lib, hops[i] as Hop, clients[i - 1], hops[i - 1], session, total));
      }
      session.step = `starting Node on ${target.host}:${target.port}`;
      const channel = await exec(clients[clients.length - 1] as Client, shellCommand(argv), session.name, target);
      return transport(channel, clients, `ssh ${target.user}@${target.host}:${target.port}`);
    } catch (error) {
      for (const client of clients) client.end();
      debug('%s: giving up: %s', session.name, (error as Error).message);
      throw error;
    }
  },
};
