/**
 * One hop of an `ssh` connection: its TCP connection or jump channel, the
 * SSH handshake, host key check and authentication, within the hop's and
 * the whole start's deadlines; then keepalive probes while it lives.
 */
import { connect as tcpConnect } from 'node:net';
import type { Duplex } from 'node:stream';
import type { Client } from 'ssh2';
import { logger } from '../core/log.js';
import {
  AuthenticationError,
  BootstrapError,
  ConnectionRefusedError,
  ConnectTimeoutError,
  type HostKeyError,
  PasswordError,
  UnknownHostError,
} from './errors.js';
import type { Session } from './method.js';
import { type Attempt, prepareAuth } from './ssh-auth.js';
import type { Hop } from './ssh-hops.js';
import { checkHostKey } from './ssh-host-key.js';
import type { Ssh2 } from './ssh-library.js';

const debug = logger('ssh');

/**
 * Connects to one hop: a TCP connection for the first, a direct-tcpip
 * channel through the previous hop otherwise, then the SSH handshake and
 * authentication. The hop's ConnectTimeout (ssh config) bounds everything
 * up to the end of the key exchange, as in OpenSSH; the whole start is
 * bounded by the session's deadline.
 */
export async function connectHop(
  lib: Ssh2,
  hop: Hop,
  through: Client | undefined,
  previous: Hop | undefined,
  session: Session,
  total: number,
): Promise<Client> {
  const { attempts, skipped } = await prepareAuth(lib, hop, session);
  const where = `${hop.user}@${hop.host}:${hop.port}`;
  const started = Date.now();
  return new Promise<Client>((resolve, reject) => {
    let settled = false;
    let sock: Duplex | undefined;
    let client: Client | undefined;
    let hostKeyError: HostKeyError | undefined;
    let hostKeyDoubtful = false;
    const tried = new Set<string>();
    let current: Attempt | undefined;
    const fail = (error: BootstrapError) => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      client?.end();
      sock?.destroy();
      reject(error);
    };

    const hopLimit = hop.connectTimeout !== undefined ? started + hop.connectTimeout : Number.POSITIVE_INFINITY;
    const byConfig = hopLimit < session.deadline;
    let timer: ReturnType<typeof setTimeout> | undefined = setTimeout(
      () => {
        debug(
          '%s: %s ran out while %s',
          session.name,
          byConfig ? 'the ssh config ConnectTimeout' : 'connectTimeout',
          session.step,
        );
        fail(
          byConfig
            ? new ConnectTimeoutError(
                session.name,
                hop.connectTimeout as number,
                '',
                session.step,
                'ConnectTimeout in the ssh config',
              )
            : new ConnectTimeoutError(session.name, total, '', session.step),
        );
      },
      Math.max(0, Math.min(hopLimit, session.deadline) - Date.now()),
    );

    const startSsh = () => {
      session.step = `SSH handshake with ${where}`;
      const ssh = new lib.Client();
      client = ssh;
      ssh.on('handshake', () => {
        // ConnectTimeout ends with the key exchange; ssh2's readyTimeout keeps the overall deadline.
        clearTimeout(timer);
        timer = undefined;
        session.step = `authenticating as ${hop.user} to ${hop.host}:${hop.port}`;
      });
      ssh.on('ready', () => {
        settled = true;
        clearTimeout(timer);
        debug('%s: authenticated to %s with %s', session.name, hop.label, current?.label ?? 'none');
        keepAlive(ssh, hop.keepalive, hop.keepaliveCount, hop.label, session.name);
        resolve(ssh);
      });
      ssh.on('error', (error: Error & { level?: string }) => {
        if (settled) {
          debug('%s: connection to %s failed: %s', session.name, hop.label, error.message);
          return;
        }
        if (hostKeyError) return fail(hostKeyError);
        if (error.level === 'client-timeout') {
          debug('%s: no SSH handshake with %s in time', session.name, hop.label);
          return fail(new ConnectTimeoutError(session.name, total, '', session.step));
        }
        if (error.level === 'client-authentication') {
          if (skipped.length > 0) {
            return fail(
              new PasswordError(
                session.name,
                `SSH authentication to ${hop.label} failed (methods tried: ${[...tried].join(', ') || 'none'}), and ${skipped.join('; ')}`,
              ),
            );
          }
          return fail(
            new AuthenticationError(
              session.name,
              hop.jump
                ? `${hop.label}, which uses only its own settings (the ssh config for it, or its proxyJump entry), never the destination's credentials,`
                : hop.label,
              [...tried],
            ),
          );
        }
        debug('%s: SSH to %s failed: %s', session.name, hop.label, error.message);
        fail(new BootstrapError(session.name, `SSH to ${hop.label} failed: ${error.message}`, undefined));
      });
      ssh.on('close', () => {
        fail(
          hostKeyError ??
            new BootstrapError(
              session.name,
              `${hop.label} closed the connection before the login completed`,
              undefined,
            ),
        );
      });
      const queue = [...attempts];
      ssh.connect({
        sock: sock as Duplex,
        username: hop.user,
        // The overall deadline, so a connection that never completes is closed (bootstrap reports the timeout).
        readyTimeout: Math.max(1, session.deadline - Date.now()),
        // tendril's own keepalive (see keepAlive) replaces ssh2's.
        keepaliveInterval: 0,
        hostVerifier: (key: Buffer) => {
          const verdict = checkHostKey(hop, key, session);
          if (verdict === true) return true;
          if (verdict === 'doubtful') {
            hostKeyDoubtful = true;
            return true;
          }
          hostKeyError = verdict;
          return false;
        },
        authHandler: (methodsLeft, _partial, next) => {
          if (current) {
            debug(
              '%s: %s refused %s%s',
              session.name,
              hop.label,
              current.label,
              methodsLeft ? ` (it accepts: ${methodsLeft.join(', ')})` : '',
            );
          }
          for (;;) {
            const attempt = queue.shift();
            current = attempt;
            if (!attempt) {
              // ssh2 accepts false to end authentication; its types do not say so.
              (next as unknown as (auth: false) => void)(false);
              return;
            }
            const wanted = attempt.kind === 'agent' ? 'publickey' : attempt.kind;
            if (methodsLeft && !methodsLeft.includes(wanted)) continue;
            if (hostKeyDoubtful && (attempt.kind === 'password' || attempt.kind === 'keyboard-interactive')) {
              debug('%s: not offering %s to %s: its host key is not trusted', session.name, attempt.kind, hop.label);
              continue;
            }
            tried.add(attempt.kind);
            session.step = `authenticating as ${hop.user} to ${hop.host}:${hop.port} (${attempt.label})`;
            next(attempt.method);
            return;
          }
        },
      });
    };

    if (!through) {
      session.step = `TCP connect to ${hop.host}:${hop.port}`;
      const socket = tcpConnect({ host: hop.host, port: hop.port });
      // Calls and replies are small and latency-bound: none should wait on Nagle's algorithm for an ACK.
      socket.setNoDelay(true);
      sock = socket;
      socket.once('connect', () => {
        if (!settled) startSsh();
      });
      socket.once('error', (error: NodeJS.ErrnoException) => {
        if (client) return; // ssh2 reports it.
        fail(socketError(error, hop, session));
      });
    } else {
      session.step = `opening the jump channel to ${hop.host}:${hop.port} through ${previous?.label}`;
      through.forwardOut('127.0.0.1', 0, hop.host, hop.port, (error, channel) => {
        if (settled) {
          channel?.close();
          return;
        }
        if (error) {
          debug(
            '%s: %s could not open a channel to %s:%d: %s',
            session.name,
            previous?.label,
            hop.host,
            hop.port,
            error.message,
          );
          fail(
            new BootstrapError(
              session.name,
              `the jump host ${previous?.label} could not reach ${hop.host}:${hop.port}: ${error.message}`,
              undefined,
            ),
          );
          return;
        }
        sock = channel;
        startSsh();
      });
    }
  });
}

/** A failed TCP connection as a precise error, with a debug line. */
function socketError(error: NodeJS.ErrnoException, hop: Hop, session: Session): BootstrapError {
  if (error.code === 'ECONNREFUSED') {
    debug('%s: TCP connect to %s:%d refused (nothing listens there)', session.name, hop.host, hop.port);
    return new ConnectionRefusedError(session.name, `${hop.host}:${hop.port}`);
  }
  if (error.code === 'ENOTFOUND' || error.code === 'EAI_AGAIN') {
    debug('%s: host name %s does not resolve (%s)', session.name, hop.host, error.code);
    return new UnknownHostError(session.name, hop.host);
  }
  debug('%s: TCP connect to %s:%d failed: %s', session.name, hop.host, hop.port, error.message);
  return new BootstrapError(session.name, `TCP connect to ${hop.host}:${hop.port} failed: ${error.message}`, undefined);
}

/**
 * Probes the server every `interval` ms and destroys the connection once
 * `count` probes in a row go unanswered, which closes the channel and so
 * the context, rejecting its pending calls. ssh2 has a keepalive of its
 * own, but its timer keeps the event loop alive, so a program that holds
 * an SSH context and forgets `router.shutdown()` would never exit; this
 * timer does not hold the program. The probe is a global request every
 * server must answer: cancelling a port forward that was never requested
 * (the server says no, and any answer will do).
 */
function keepAlive(client: Client, interval: number, count: number, where: string, contextName: string): void {
  if (!(interval > 0)) return;
  let unanswered = 0;
  const timer = setInterval(() => {
    if (unanswered >= count) {
      clearInterval(timer);
      debug('%s: %d keepalive probes to %s went unanswered: closing the connection', contextName, unanswered, where);
      client.destroy();
      return;
    }
    unanswered++;
    try {
      client.unforwardIn('127.0.0.1', 0, () => {
        unanswered = 0;
      });
    } catch {
      // Not connected any more: 'close' clears the timer.
    }
  }, interval);
  timer.unref();
  client.once('close', () => clearInterval(timer));
}
