import { existsSync, readFileSync } from 'node:fs';
import { homedir, userInfo } from 'node:os';
import { join } from 'node:path';
import type { Duplex } from 'node:stream';
import type { AnyAuthMethod, Client, ClientChannel, ParsedKey } from 'ssh2';
import type { ChildProcessHandle, ExitStatus } from '../core/broker.js';
import {
  AuthenticationError,
  BootstrapError,
  ConnectionRefusedError,
  ConnectTimeoutError,
  HostKeyError,
  PasswordError,
  UnknownHostError,
} from '../core/errors.js';
import { logger } from '../core/log.js';
import type { CommonOptions } from './bootstrap.js';
import { fingerprint, readKnownHosts, recordHostKey, verifyHostKey } from './known-hosts.js';
import type { ConnectionMethod, Session, Transport } from './method.js';
import { importPackage } from './packages.js';
import { shellCommand } from './shell.js';
import { defaultConfigFile, type HostSettings, hostSettings, type JumpHost, parseProxyJump } from './ssh-config.js';

const debug = logger('ssh');
/** ssh2, loaded when first needed: a context that only starts local children never pays for it. */
type Ssh2 = typeof import('ssh2');
let ssh2: Ssh2 | undefined;
async function loadSsh2(): Promise<Ssh2> {
  ssh2 ??= await importPackage<Ssh2>('ssh2');
  return ssh2;
}

/** How unknown and changed host keys are treated. */
export type HostKeyPolicy = 'strict' | 'accept-new' | 'ignore';

/** Options of the `ssh` connection method (over ssh2, in JavaScript). */
export interface SshOptions extends CommonOptions {
  /** Host name or address, or a `Host` alias of the ssh config. */
  hostname: string;
  /** Port. Default: the ssh config's, else 22. */
  port?: number;
  /** Remote account. Default: the ssh config's, else the local account's name. */
  username?: string;
  /** Path of a private key. Default: the ssh config's IdentityFile, else ~/.ssh/id_ed25519, id_ecdsa, id_rsa. */
  identityFile?: string;
  /** A private key itself (PEM or OpenSSH format), instead of `identityFile`. */
  privateKey?: string | Buffer;
  /** Passphrase of an encrypted private key. */
  passphrase?: string;
  /** Password, for password and keyboard-interactive authentication. */
  password?: string;
  /** An ssh-agent socket path, or true for `$SSH_AUTH_SOCK`, or false for none. Default: `$SSH_AUTH_SOCK` if set. */
  agent?: string | boolean;
  /** `strict` (default): only keys in known_hosts; `accept-new`: record unknown hosts' keys; `ignore`: no check. */
  hostKeyPolicy?: HostKeyPolicy;
  /** known_hosts file. Default `~/.ssh/known_hosts`. */
  knownHostsFile?: string;
  /** Jump hosts, `[user@]host[:port]` separated by commas, as OpenSSH's ProxyJump. Default: the ssh config's. */
  proxyJump?: string;
  /** Milliseconds between keepalive probes; the link is declared dead after 3 unanswered. Default: the ssh config's ServerAliveInterval, else 15000. 0 disables. */
  keepaliveInterval?: number;
  /** An OpenSSH client config file to honour, or false for none. Default `~/.ssh/config`. */
  sshConfig?: string | false;
}

/** One resolved hop. */
interface Hop {
  host: string;
  port: number;
  user: string;
  identityFiles: string[];
  /** The ssh config's ConnectTimeout for this host, in ms. */
  connectTimeout: number | undefined;
}

/** Keepalive probes unanswered before the link is declared dead. */
const KEEPALIVE_COUNT = 3;

/**
 * `ssh`: a child on another machine over SSH, using the ssh2 library. One
 * SSH connection and one session channel per hop carry everything; jump
 * hosts are crossed with direct-tcpip channels, each hop's host key checked.
 */
export const ssh: ConnectionMethod<SshOptions> = {
  name: 'ssh',
  defaultNode: () => undefined,
  async start(argv, options, session): Promise<Transport> {
    const configFile = options.sshConfig === false ? undefined : (options.sshConfig ?? defaultConfigFile());
    const lib = await loadSsh2();
    const settings = await settingsFor(options.hostname, configFile);
    const target = hopFrom({ host: options.hostname }, options, settings);
    const jumps = await Promise.all(
      parseProxyJump(options.proxyJump ?? settings.proxyJump).map(async (jump) =>
        hopFrom(jump, {}, await settingsFor(jump.host, configFile)),
      ),
    );
    const hops = [...jumps, target];
    session.describe(`ssh:${target.user}@${options.hostname}:${target.port}`);
    const keepalive =
      options.keepaliveInterval ??
      (settings.serverAliveInterval !== undefined ? settings.serverAliveInterval * 1000 : 15_000);
    const clients: Client[] = [];
    try {
      let sock: Duplex | undefined;
      for (let i = 0; i < hops.length; i++) {
        const hop = hops[i] as Hop;
        const last = i === hops.length - 1;
        const client = await connectHop(lib, hop, sock, options, session, keepalive);
        clients.push(client);
        if (!last) {
          const next = hops[i + 1] as Hop;
          sock = await forwardOut(client, next, session.name);
        }
      }
      session.step = `starting Node on ${target.host}:${target.port}`;
      const channel = await exec(clients[clients.length - 1] as Client, shellCommand(argv), session.name, target);
      return transport(channel, clients, `ssh ${target.user}@${target.host}:${target.port}`);
    } catch (error) {
      for (const client of clients) client.end();
      throw error;
    }
  },
};

function settingsFor(host: string, configFile: string | undefined): Promise<HostSettings> {
  return configFile ? hostSettings(host, configFile) : Promise.resolve({ identityFiles: [] });
}

/** A hop from its spec, the options that override, and the ssh config's settings for it. */
function hopFrom(jump: JumpHost, options: Partial<SshOptions>, settings: HostSettings): Hop {
  return {
    host: settings.hostName ?? jump.host,
    port: options.port ?? jump.port ?? settings.port ?? 22,
    user: options.username ?? jump.user ?? settings.user ?? userInfo().username,
    identityFiles: settings.identityFiles,
    connectTimeout: settings.connectTimeout === undefined ? undefined : settings.connectTimeout * 1000,
  };
}

/** Authentication attempts for a hop, in OpenSSH's order: agent, keys, keyboard-interactive, password. */
function authMethods(lib: Ssh2, hop: Hop, options: Partial<SshOptions>, contextName: string): AnyAuthMethod[] {
  const methods: AnyAuthMethod[] = [];
  const username = hop.user;
  const agent =
    options.agent === false
      ? undefined
      : options.agent === true || options.agent === undefined
        ? process.env.SSH_AUTH_SOCK
        : options.agent;
  if (agent) methods.push({ type: 'agent', username, agent });
  const keys: [string, string | Buffer][] = [];
  if (options.privateKey !== undefined) keys.push(['the privateKey option', options.privateKey]);
  const files =
    options.identityFile !== undefined
      ? [options.identityFile]
      : hop.identityFiles.length > 0
        ? hop.identityFiles
        : ['id_ed25519', 'id_ecdsa', 'id_rsa']
            .map((name) => join(homedir(), '.ssh', name))
            .filter((path) => existsSync(path));
  for (const file of files) {
    try {
      keys.push([file, readFileSync(file)]);
    } catch (error) {
      if (options.identityFile !== undefined) {
        throw new BootstrapError(contextName, `cannot read identity file ${file}: ${(error as Error).message}`, '');
      }
    }
  }
  for (const [source, data] of keys) {
    const parsed = lib.utils.parseKey(data, options.passphrase);
    if (parsed instanceof Error) {
      // The message names the key, never the passphrase.
      if (/passphrase|encrypted|decrypt/i.test(parsed.message)) {
        throw new PasswordError(
          contextName,
          options.passphrase === undefined
            ? `the private key in ${source} is encrypted and no passphrase was given (option passphrase)`
            : `the passphrase for the private key in ${source} is wrong`,
        );
      }
      throw new BootstrapError(contextName, `cannot use the private key in ${source}: ${parsed.message}`, '');
    }
    methods.push({ type: 'publickey', username, key: (Array.isArray(parsed) ? parsed[0] : parsed) as ParsedKey });
  }
  const password = options.password;
  if (password !== undefined) {
    methods.push({
      type: 'keyboard-interactive',
      username,
      prompt: (_name, _instructions, _lang, prompts, finish) => finish(prompts.map(() => password)),
    });
    methods.push({ type: 'password', username, password });
  }
  return methods;
}

function connectHop(
  lib: Ssh2,
  hop: Hop,
  sock: Duplex | undefined,
  options: Partial<SshOptions>,
  session: Session,
  keepaliveInterval: number,
): Promise<Client> {
  const where = `${hop.user}@${hop.host}:${hop.port}`;
  const policy = options.hostKeyPolicy ?? 'strict';
  const knownHostsFile = options.knownHostsFile ?? join(homedir(), '.ssh', 'known_hosts');
  const queue = authMethods(lib, hop, options, session.name);
  const tried: string[] = [];
  let hostKeyError: HostKeyError | undefined;
  return new Promise<Client>((resolve, reject) => {
    const client = new lib.Client();
    let settled = false;
    client.on('ready', () => {
      settled = true;
      debug('%s: connected to %s (auth: %s)', session.name, where, tried.join(', '));
      keepAlive(client, keepaliveInterval, where, session.name);
      resolve(client);
    });
    client.on('error', (error: Error & { level?: string; code?: string }) => {
      if (settled) {
        debug('%s: connection to %s failed: %s', session.name, where, error.message);
        return;
      }
      settled = true;
      client.end();
      reject(translate(error, hostKeyError, session, where, hop, tried));
    });
    client.connect({
      host: hop.host,
      port: hop.port,
      username: hop.user,
      ...(sock && { sock }),
      // connectTimeout bounds the whole start; the config's ConnectTimeout may bound a hop further.
      readyTimeout: Math.max(
        1,
        Math.min(session.deadline - Date.now(), hop.connectTimeout ?? Number.POSITIVE_INFINITY),
      ),
      // tendril's own keepalive (see keepAlive) replaces ssh2's.
      keepaliveInterval: 0,
      hostVerifier: (key: Buffer) => {
        if (policy === 'ignore') return true;
        const verdict = verifyHostKey(readKnownHosts(knownHostsFile), hop.host, hop.port, key);
        if (verdict.status === 'match') return true;
        const presented = fingerprint(key);
        if (verdict.status === 'unknown' && policy === 'accept-new') {
          recordHostKey(knownHostsFile, hop.host, hop.port, key);
          return true;
        }
        hostKeyError = new HostKeyError(
          session.name,
          verdict.status === 'revoked'
            ? `the host key of ${hop.host}:${hop.port} (${presented}) is marked @revoked in ${knownHostsFile}`
            : verdict.status === 'mismatch'
              ? `the host key of ${hop.host}:${hop.port} has CHANGED: it presented ${presented} but ${knownHostsFile} expects ${verdict.expected.join(' or ')}; if the change is legitimate, remove the old key (ssh-keygen -R '[${hop.host}]:${hop.port}')`
              : `the host key of ${hop.host}:${hop.port} (${presented}) is not in ${knownHostsFile}; add it (ssh-keyscan -p ${hop.port} ${hop.host} >> ${knownHostsFile}) after checking the fingerprint, or use hostKeyPolicy 'accept-new'`,
          presented,
          verdict.status === 'mismatch' ? verdict.expected : [],
        );
        return false;
      },
      authHandler: (methodsLeft, _partial, next) => {
        for (;;) {
          const method = queue.shift();
          if (!method) {
            // ssh2 accepts false to end authentication; its types do not say so.
            (next as unknown as (auth: false) => void)(false);
            return;
          }
          if (methodsLeft && !methodsLeft.includes(method.type === 'agent' ? 'publickey' : method.type)) continue;
          tried.push(method.type);
          next(method);
          return;
        }
      },
    });
  });
}

/**
 * Probes the server every `interval` ms and destroys the connection once
 * KEEPALIVE_COUNT probes in a row go unanswered, which closes the channel
 * and so the context, rejecting its pending calls. ssh2 has a keepalive of
 * its own, but its timer keeps the event loop alive, so a program that
 * holds an SSH context and forgets `router.shutdown()` would never exit;
 * this timer does not hold the program. The probe is a global request
 * every server must answer: cancelling a port forward that was never
 * requested (the server says no, and any answer will do).
 */
function keepAlive(client: Client, interval: number, where: string, contextName: string): void {
  if (!(interval > 0)) return;
  let unanswered = 0;
  const timer = setInterval(() => {
    if (unanswered >= KEEPALIVE_COUNT) {
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

function translate(
  error: Error & { level?: string; code?: string },
  hostKeyError: HostKeyError | undefined,
  session: Session,
  where: string,
  hop: Hop,
  tried: string[],
): BootstrapError {
  if (hostKeyError) return hostKeyError;
  if (error.code === 'ECONNREFUSED') return new ConnectionRefusedError(session.name, `${hop.host}:${hop.port}`);
  if (error.code === 'ENOTFOUND' || error.code === 'EAI_AGAIN') return new UnknownHostError(session.name, hop.host);
  if (error.level === 'client-timeout') {
    return new ConnectTimeoutError(
      session.name,
      Math.max(0, session.deadline - Date.now()),
      `no SSH handshake with ${where}`,
    );
  }
  if (error.level === 'client-authentication') return new AuthenticationError(session.name, where, tried);
  return new BootstrapError(session.name, `SSH to ${where} failed: ${error.message}`, '');
}

function forwardOut(client: Client, next: Hop, contextName: string): Promise<Duplex> {
  return new Promise((resolve, reject) => {
    client.forwardOut('127.0.0.1', 0, next.host, next.port, (error, channel) => {
      if (error)
        reject(
          new BootstrapError(
            contextName,
            `the jump host could not reach ${next.host}:${next.port}: ${error.message}`,
            '',
          ),
        );
      else resolve(channel);
    });
  });
}

function exec(client: Client, command: string, contextName: string, hop: Hop): Promise<ClientChannel> {
  return new Promise((resolve, reject) => {
    client.exec(command, (error, channel) => {
      if (error) reject(new BootstrapError(contextName, `${hop.host} refused to run a command: ${error.message}`, ''));
      else resolve(channel);
    });
  });
}

function transport(channel: ClientChannel, clients: Client[], where: string): Transport {
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
    ...(socket && { socket: { ref: () => socket.ref?.(), unref: () => socket.unref?.() } }),
  };
}
