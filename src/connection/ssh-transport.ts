/** The session channel a child runs in, as the `Transport` the bootstrap speaks over. */
import type { Client, ClientChannel } from 'ssh2';
import type { ChildProcessHandle, ExitStatus } from '../core/broker.js';
import { logger } from '../core/log.js';
import { BootstrapError } from './errors.js';
import type { Transport } from './method.js';
import type { Hop } from './ssh-hops.js';

const debug = logger('ssh');

/**
 * Runs `command` on the hop's session channel.
 * @throws BootstrapError naming the hop when the server refuses it.
 */
export function exec(client: Client, command: string, contextName: string, hop: Hop): Promise<ClientChannel> {
  return new Promise((resolve, reject) => {
    client.exec(command, (error, channel) => {
      if (error) {
        debug('%s: %s refused to run a command: %s', contextName, hop.label, error.message);
        reject(new BootstrapError(contextName, `${hop.label} refused to run a command: ${error.message}`, undefined));
      } else {
        resolve(channel);
      }
    });
  });
}

/**
 * The channel as a `Transport`: its exit status, SIGTERM as a signal
 * request then close, anything else closing every hop's connection (last
 * first); `where` names it in errors.
 */
export function transport(channel: ClientChannel, clients: Client[], where: string): Transport {
  const closeAll = () => {
    for (const client of [...clients].reverse()) client.end();
  };
  let status: ExitStatus = { code: null, signal: null };
  channel.on('exit', (code: number | null, signal?: string) => {
    status = { code: code ?? null, signal: signal ? `SIG${signal}` : null };
  });
  const exited = new Promise<ExitStatus>((resolve) => {
    channel.on('close', () => {
      closeAll();
      resolve(status);
    });
    // A dead connection (keepalive timeout, reset) closes the channel too; this covers one that never does.
    clients[clients.length - 1]?.on('close', () => resolve(status));
  });
  const socket = (clients[0] as unknown as { _sock?: { ref?: () => void; unref?: () => void } })._sock;
  const handle: ChildProcessHandle = {
    pid: undefined,
    kill(signal) {
      if (signal === 'SIGTERM') {
        // Ask sshd to signal the command; then closing the channel ends its input.
        try {
          channel.signal('TERM');
        } catch {
          // Already closed.
        }
        channel.close();
      } else {
        closeAll();
      }
    },
    exited,
    ref: () => socket?.ref?.(),
    unref: () => socket?.unref?.(),
  };
  return {
    stdin: channel,
    stdout: channel,
    stderr: channel.stderr,
    process: handle,
    where,
    ...(socket && { socket }),
  };
}
