import { readFileSync } from 'node:fs';
import { connect as tcpConnect } from 'node:net';
import type { Duplex } from 'node:stream';
import type { AnyAuthMethod, BaseAgent, Client, ClientChannel, ParsedKey } from 'ssh2';
import type { ChildProcessHandle, ExitStatus } from '../core/broker.js';
import { logger } from '../core/log.js';
import { milliseconds } from '../core/options.js';
import { type CommonOptions, DEFAULT_CONNECT_TIMEOUT } from './bootstrap.js';
import {
  AuthenticationError,
  BootstrapError,
  ConnectionRefusedError,
  ConnectTimeoutError,
  HostKeyError,
  PasswordError,
  UnknownHostError,
} from './errors.js';
import { fingerprint, hostKeyName, readKnownHosts, recordHostKey, verifyHostKeyAs } from './known-hosts.js';
import type { ConnectionMethod, Session, Transport } from './method.js';
import { importPackage } from './packages.js';
import { shellCommand } from './shell.js';
import { type JumpHost, type ResolvedHop, type ResolvedHost, resolveChain } from './ssh-config.js';

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

/**
 * One SSH host and what to authenticate to it and check it with: the
 * destination of `router.ssh()`, or a jump host in the array form of
 * `proxyJump` (for programs without an ssh config, or to give a jump host
 * credentials of its own). These reach only that host: a destination's
 * never reach its jump hosts. Whatever is not given comes from the ssh
 * config for `hostname`, as for any host.
 */
export interface SshJumpHost {
  /** Host name or address, or a `Host` alias of the ssh config. */
  hostname: string;
  /** Port. Wins over the ssh config (like `ssh -p`). Default: the ssh config's Port, else 22. */
  port?: number;
  /** Account. Wins over the ssh config and is what `Match user` sees (like `ssh -l`). Default: the ssh config's User, else the local account's name. */
  username?: string;
  /**
   * Path of a private key. When given (or `privateKey` is), the ssh
   * config's IdentityFile entries are not used for this host. Default: the
   * ssh config's IdentityFile, else `~/.ssh/id_rsa`, `id_ecdsa`, `id_ed25519`,
   * `id_dsa` (those that exist; as OpenSSH).
   */
  identityFile?: string;
  /** A private key itself (PEM or OpenSSH format), instead of `identityFile`. */
  privateKey?: string | Buffer;
  /** Passphrase of this host's encrypted private key. */
  passphrase?: string;
  /** Password, for password and keyboard-interactive authentication to this host. */
  password?: string;
  /** An ssh-agent socket path, or true for `$SSH_AUTH_SOCK`, or false for none. Default: the ssh config's IdentityAgent, else `$SSH_AUTH_SOCK` if set. */
  agent?: string | boolean;
  /**
   * `strict`: only keys on record; `accept-new`: record the key of a host
   * not yet known (a changed key is still refused); `ignore`: no check.
   * Default: the ssh config's StrictHostKeyChecking (yes and ask: strict;
   * accept-new; no: record new keys and accept changed ones without
   * password authentication, as OpenSSH), else `strict`.
   */
  hostKeyPolicy?: HostKeyPolicy;
  /** known_hosts file, read and written, instead of the ssh config's UserKnownHostsFile. Default: UserKnownHostsFile, else `~/.ssh/known_hosts` (and `known_hosts2`). GlobalKnownHostsFile is read either way. */
  knownHostsFile?: string;
}

/** Options of the `ssh` connection method (over ssh2, in JavaScript): the destination host, and how to reach it. */
export interface SshOptions extends CommonOptions, SshJumpHost {
  /**
   * Jump hosts, like `ssh -J`: a string `[user@]host[:port]` separated by
   * commas (each hop then uses only its own ssh config), or an array of
   * `SshJumpHost` (each with its own credentials and checks), first hop
   * first. Default: the ssh config's ProxyJump.
   */
  proxyJump?: string | SshJumpHost[];
  /** Milliseconds between keepalive probes; the link is declared dead after ServerAliveCountMax (default 3) unanswered. Default: the ssh config's ServerAliveInterval, else 15000. 0 disables. */
  keepaliveInterval?: number;
  /** An OpenSSH client config file to honour instead of `~/.ssh/config` and `/etc/ssh/ssh_config` (like `ssh -F`), or false for none. */
  sshConfig?: string | false;
  /**
   * Run the ssh config's `Match exec` commands (with `/bin/sh -c`, in the
   * context that connects), as OpenSSH does. Default false: they count as
   * commands that failed, so a config file never makes tendril run anything.
   */
  matchExec?: boolean;
}

/** The per-host part of the options: what one hop authenticates and checks with. */
type Credentials = Pick<
  SshJumpHost,
  'identityFile' | 'privateKey' | 'passphrase' | 'password' | 'agent' | 'knownHostsFile' | 'hostKeyPolicy'
>;

/** A jump host as resolveChain carries it: the array form's entry rides along. */
interface JumpSpec extends JumpHost {
  credentials?: SshJumpHost;
}

/** tendril's policies, and OpenSSH's StrictHostKeyChecking=no when the ssh config says so. */
type KeyCheck = HostKeyPolicy | 'openssh-no';

/** One resolved hop. */
interface Hop {
  settings: ResolvedHost;
  host: string;
  port: number;
  user: string;
  /** `user@host:port`, and `(jump host)` after it for a jump host: how messages name it. */
  label: string;
  /** A jump host, not the destination. */
  jump: boolean;
  credentials: Credentials;
  keyCheck: KeyCheck;
  userKnownHosts: string[];
  /** The ssh config's ConnectTimeout for this host, in ms; undefined: none. */
  connectTimeout: number | undefined;
  /** Keepalive probe interval in ms (0: none) and unanswered probes tolerated. */
  keepalive: number;
  keepaliveCount: number;
}

/** One authentication attempt: the ssh2 method and how debug output names it. */
interface Attempt {
  method: AnyAuthMethod;
  kind: 'agent' | 'publickey' | 'keyboard-interactive' | 'password';
  label: string;
}

/** ServerAliveInterval when neither the option nor the ssh config set one, in ms. */
const DEFAULT_KEEPALIVE = 15_000;

/**
 * `ssh`: a child on another machine over SSH, using the ssh2 library. One
 * SSH connection and one session channel per hop carry everything; jump
 * hosts are crossed with direct-tcpip channels, each hop authenticated and
 * host-key-checked with its own settings.
 */
export const ssh: ConnectionMethod<SshOptions> = {
  name: 'ssh',
  defaultNode: () => undefined,
  async start(argv, options, session): Promise<Transport> {
    session.describe(
      `ssh:${options.username !== undefined ? `${options.username}@` : ''}${options.hostname}${options.port !== undefined ? `:${options.port}` : ''}`,
    );
    session.step = `resolving the ssh config for ${options.hostname}`;
    const total = options.connectTimeout ?? DEFAULT_CONNECT_TIMEOUT;
    const clients: Client[] = [];
    try {
      const hops = planHops(options, session);
      const target = hops[hops.length - 1] as Hop;
      session.describe(`ssh:${target.user}@${options.hostname}:${target.port}`);
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

/**
 * The hops to the target, jump hosts first, each with its own settings
 * from the ssh config and only its own credentials: the options' for the
 * destination, an `SshJumpHost`'s for its hop, none for the rest.
 */
function planHops(options: SshOptions, session: Session): Hop[] {
  let proxyJump: string | JumpSpec[] | undefined;
  if (Array.isArray(options.proxyJump)) {
    proxyJump = options.proxyJump.map((jump, i) => {
      if (typeof jump?.hostname !== 'string' || jump.hostname === '') {
        throw new TypeError(`proxyJump[${i}].hostname must be a non-empty string`);
      }
      return {
        host: jump.hostname,
        ...(jump.username !== undefined && { user: jump.username }),
        ...(jump.port !== undefined && { port: jump.port }),
        credentials: jump,
      };
    });
  } else {
    proxyJump = options.proxyJump;
  }
  let chain: ResolvedHop<JumpSpec | JumpHost>[];
  try {
    chain = resolveChain<JumpSpec>(options.hostname, {
      configFile: options.sshConfig,
      matchExec: options.matchExec === true,
      ...(options.username !== undefined && { user: options.username }),
      ...(options.port !== undefined && { port: options.port }),
      ...(proxyJump !== undefined && { proxyJump }),
    });
  } catch (error) {
    throw new BootstrapError(
      session.name,
      `cannot use the ssh config for ${options.hostname}: ${(error as Error).message}`,
      undefined,
    );
  }
  return chain.map((settings, i) => {
    const destination = i === chain.length - 1;
    const credentials: Credentials = destination
      ? options
      : ((settings.jump as JumpSpec | undefined)?.credentials ?? {});
    if (settings.proxyCommand !== undefined) {
      throw new BootstrapError(
        session.name,
        `the ssh config (${settings.configFiles.join(', ')}) sets ProxyCommand for ${settings.host}, which the ssh method cannot run; use router.openssh() for it, or ProxyJump`,
        undefined,
      );
    }
    const keepaliveSetting =
      settings.serverAliveInterval !== undefined ? settings.serverAliveInterval * 1000 : DEFAULT_KEEPALIVE;
    const hop: Hop = {
      settings,
      host: settings.hostname,
      port: settings.port,
      user: settings.user,
      label: `${settings.user}@${settings.hostname}:${settings.port}${destination ? '' : ' (jump host)'}`,
      jump: !destination,
      credentials,
      keyCheck: credentials.hostKeyPolicy ?? STRICT_POLICY[settings.strictHostKeyChecking],
      userKnownHosts:
        credentials.knownHostsFile !== undefined ? [credentials.knownHostsFile] : settings.userKnownHostsFiles,
      connectTimeout: settings.connectTimeout ? settings.connectTimeout * 1000 : undefined,
      keepalive: destination
        ? milliseconds(options.keepaliveInterval, 'keepaliveInterval', 'router.ssh()', keepaliveSetting)
        : keepaliveSetting,
      keepaliveCount: Math.max(1, settings.serverAliveCountMax),
    };
    debug(
      '%s: hop %d of %d: %s (config %s; known hosts %s; host keys %s)',
      session.name,
      i + 1,
      chain.length,
      hop.label,
      settings.configFiles.join(', ') || 'none',
      [...hop.userKnownHosts, ...settings.globalKnownHostsFiles].join(', ') || 'none',
      hop.keyCheck,
    );
    return hop;
  });
}

/** StrictHostKeyChecking of the ssh config as a policy: `ask` needs a terminal, so it is `strict`. */
const STRICT_POLICY: Record<ResolvedHost['strictHostKeyChecking'], KeyCheck> = {
  yes: 'strict',
  ask: 'strict',
  'accept-new': 'accept-new',
  no: 'openssh-no',
};

/**
 * Connects to one hop: a TCP connection for the first, a direct-tcpip
 * channel through the previous hop otherwise, then the SSH handshake and
 * authentication. The hop's ConnectTimeout (ssh config) bounds everything
 * up to the end of the key exchange, as in OpenSSH; the whole start is
 * bounded by the session's deadline.
 */
async function connectHop(
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
 * Checks a hop's host key against its known_hosts files, records it when
 * the policy says so, and returns true, `'doubtful'` (OpenSSH's
 * StrictHostKeyChecking=no accepting a changed or revoked key: the caller
 * then offers no password), or the HostKeyError to fail with.
 */
function checkHostKey(hop: Hop, key: Buffer, session: Session): true | 'doubtful' | HostKeyError {
  const presented = fingerprint(key);
  const where = `${hop.host}:${hop.port}${hop.jump ? ' (jump host)' : ''}`;
  if (hop.keyCheck === 'ignore') {
    debug('%s: host key of %s (%s) not checked (hostKeyPolicy ignore)', session.name, where, presented);
    return true;
  }
  const name = hop.settings.hostKeyAlias ?? hostKeyName(hop.host, hop.port);
  const files = [...hop.userKnownHosts, ...hop.settings.globalKnownHostsFiles];
  const entries = files.flatMap((file) => {
    try {
      return readKnownHosts(file);
    } catch (error) {
      debug('%s: cannot read known_hosts file %s: %s', session.name, file, (error as Error).message);
      return [];
    }
  });
  const verdict = verifyHostKeyAs(entries, name, key);
  if (verdict.status === 'match') return true;
  const record = hop.userKnownHosts[0];
  if (verdict.status === 'unknown' && (hop.keyCheck === 'accept-new' || hop.keyCheck === 'openssh-no')) {
    if (record === undefined) {
      debug(
        '%s: accepted the new host key of %s (%s); not recorded: UserKnownHostsFile is none',
        session.name,
        where,
        presented,
      );
      return true;
    }
    try {
      recordHostKey(record, name, key, hop.settings.hashKnownHosts);
      debug('%s: recorded the new host key of %s (%s) in %s', session.name, where, presented, record);
    } catch (error) {
      debug(
        '%s: accepted the new host key of %s (%s) but could not record it in %s: %s',
        session.name,
        where,
        presented,
        record,
        (error as Error).message,
      );
    }
    return true;
  }
  if (hop.keyCheck === 'openssh-no') {
    debug(
      '%s: WARNING: the host key of %s (%s) is %s; continuing without password authentication, as StrictHostKeyChecking no in the ssh config asks',
      session.name,
      where,
      presented,
      verdict.status === 'revoked' ? 'revoked' : 'CHANGED',
    );
    return 'doubtful';
  }
  const listed = files.join(', ') || 'no known_hosts file (UserKnownHostsFile and GlobalKnownHostsFile are none)';
  const message =
    verdict.status === 'revoked'
      ? `the host key of ${where} (${presented}) is marked @revoked in ${listed}`
      : verdict.status === 'mismatch'
        ? `the host key of ${where} has CHANGED: it presented ${presented} but ${verdict.where.join(', ')} expects ${verdict.expected.join(' or ')}; if the change is legitimate, remove the old key (ssh-keygen -R '${name}' -f ${(verdict.where[0] ?? '').replace(/:\d+$/, '')})`
        : `the host key of ${where} (${presented}) is not in ${listed}; add it (ssh-keyscan -p ${hop.port} ${hop.host} >> ${record ?? '~/.ssh/known_hosts'}) after checking the fingerprint, or use hostKeyPolicy 'accept-new' (StrictHostKeyChecking accept-new in the ssh config)`;
  debug('%s: host key rejected: %s', session.name, message);
  return new HostKeyError(session.name, message, presented, verdict.status === 'mismatch' ? verdict.expected : []);
}

/** A private key identity: a file, or the privateKey option. */
interface Identity {
  source: string;
  path?: string;
  data?: string | Buffer;
  /** Given as an option: problems with it are errors, not skipped keys. */
  explicit: boolean;
  inAgent?: boolean;
}

/**
 * The authentication attempts for a hop, in OpenSSH's order: agent keys
 * that are among the identities, the agent's other keys (not with
 * IdentitiesOnly), identity files not in the agent, keyboard-interactive,
 * password. Password and passphrase are this hop's own only.
 * @returns the attempts, and the identity files skipped for want of a passphrase (for the error if all fail).
 * @throws PasswordError for an explicit key whose passphrase is missing or wrong; BootstrapError for an explicit key that cannot be read.
 */
async function prepareAuth(lib: Ssh2, hop: Hop, session: Session): Promise<{ attempts: Attempt[]; skipped: string[] }> {
  const { credentials, settings } = hop;
  const username = hop.user;
  const identities: Identity[] = [];
  if (credentials.privateKey !== undefined) {
    identities.push({ source: 'the privateKey option', data: credentials.privateKey, explicit: true });
  }
  if (credentials.identityFile !== undefined) {
    identities.push({ source: credentials.identityFile, path: credentials.identityFile, explicit: true });
  }
  if (identities.length === 0) {
    for (const path of settings.identityFiles) identities.push({ source: path, path, explicit: false });
  }

  const attempts: Attempt[] = [];
  const socket = agentSocket(credentials, settings);
  if (socket !== undefined) {
    const agentKeys = await listAgent(lib, socket, session);
    const blobs = agentKeys.length > 0 ? identities.map((identity) => publicBlob(lib, identity)) : [];
    const others: Attempt[] = [];
    for (const key of agentKeys) {
      const blob = key.getPublicSSH();
      const index = blobs.findIndex((candidate) => candidate?.equals(blob));
      const label = `agent key ${fingerprint(blob)}${key.comment ? ` (${key.comment})` : ''}`;
      const attempt: Attempt = {
        method: { type: 'agent', username, agent: singleKeyAgent(lib, socket, key) },
        kind: 'agent',
        label,
      };
      if (index !== -1) {
        (identities[index] as Identity).inAgent = true;
        attempts.push(attempt);
      } else if (!settings.identitiesOnly) {
        others.push(attempt);
      }
    }
    attempts.push(...others);
  }

  const skipped: string[] = [];
  const missing: string[] = [];
  for (const identity of identities) {
    if (identity.inAgent) continue;
    let data = identity.data;
    if (data === undefined) {
      try {
        data = readFileSync(identity.path as string);
      } catch (error) {
        if (identity.explicit) {
          throw new BootstrapError(
            session.name,
            `cannot read identity file ${identity.path}: ${(error as Error).message}`,
            undefined,
          );
        }
        missing.push(identity.source);
        continue;
      }
    }
    const parsed = lib.utils.parseKey(data, credentials.passphrase);
    if (parsed instanceof Error) {
      // Messages name the key, never the passphrase.
      const encrypted = /passphrase|encrypted|decrypt/i.test(parsed.message);
      const problem = encrypted
        ? credentials.passphrase === undefined
          ? `the private key in ${identity.source} is encrypted and no passphrase was given for ${hop.label} (${hop.jump ? 'give it in proxyJump: [{ ..., passphrase }]' : 'option passphrase'}, or add the key to ssh-agent)`
          : `the passphrase for the private key in ${identity.source} is wrong`
        : `cannot use the private key in ${identity.source}: ${parsed.message}`;
      if (identity.explicit) {
        if (encrypted) throw new PasswordError(session.name, problem);
        throw new BootstrapError(session.name, problem, undefined);
      }
      debug('%s: skipping a key for %s: %s', session.name, hop.label, problem);
      if (encrypted) skipped.push(problem);
      continue;
    }
    const key = (Array.isArray(parsed) ? parsed[0] : parsed) as ParsedKey;
    attempts.push({
      method: { type: 'publickey', username, key },
      kind: 'publickey',
      label: `publickey ${identity.source}`,
    });
  }
  if (missing.length > 0) {
    debug(
      '%s: %s for %s',
      session.name,
      settings.identityFilesConfigured || identities.some((identity) => identity.explicit)
        ? `no identity file ${missing.join(', ')}`
        : `none of OpenSSH's default identity files (~/.ssh/id_*) in ${settings.identityFiles[0]?.replace(/\/[^/]*$/, '')}`,
      hop.label,
    );
  }

  const password = credentials.password;
  if (password !== undefined) {
    attempts.push({
      method: {
        type: 'keyboard-interactive',
        username,
        prompt: (_name, _instructions, _lang, prompts, finish) => finish(prompts.map(() => password)),
      },
      kind: 'keyboard-interactive',
      label: 'keyboard-interactive (the password option)',
    });
    attempts.push({
      method: { type: 'password', username, password },
      kind: 'password',
      label: 'password (the password option)',
    });
  }
  return { attempts, skipped };
}

/** The agent socket for a hop: the option, else IdentityAgent (`none`, `SSH_AUTH_SOCK`, `$VAR`, a path), else `$SSH_AUTH_SOCK`. */
function agentSocket(credentials: Credentials, settings: ResolvedHost): string | undefined {
  const env = process.env;
  if (credentials.agent === false) return undefined;
  if (typeof credentials.agent === 'string') return credentials.agent;
  const configured = credentials.agent === true ? undefined : settings.identityAgent;
  if (configured === undefined || configured === 'SSH_AUTH_SOCK') return env.SSH_AUTH_SOCK || undefined;
  if (configured === 'none') return undefined;
  if (configured.startsWith('$')) return env[configured.slice(1)] || undefined;
  return configured;
}

/** The agent's keys; none (with a debug line) when it cannot be reached, as OpenSSH carries on without. */
function listAgent(lib: Ssh2, socket: string, session: Session): Promise<ParsedKey[]> {
  return new Promise((resolve) => {
    new lib.OpenSSHAgent(socket).getIdentities((error, keys) => {
      if (error) {
        debug('%s: ssh-agent at %s cannot be used: %s', session.name, socket, error.message);
        resolve([]);
      } else {
        resolve((keys ?? []) as ParsedKey[]);
      }
    });
  });
}

/**
 * An agent that offers ssh2 exactly one of the real agent's keys, so each
 * agent key is its own attempt: in OpenSSH's order, filtered by
 * IdentitiesOnly, and named in debug output when refused.
 */
function singleKeyAgent(lib: Ssh2, socket: string, key: ParsedKey): BaseAgent {
  const real = new lib.OpenSSHAgent(socket);
  class SingleKeyAgent extends lib.BaseAgent<ParsedKey> {
    getIdentities(cb: (error?: Error | null, keys?: ParsedKey[]) => void): void {
      cb(null, [key]);
    }
    sign(...args: unknown[]): void {
      (real.sign as (...a: unknown[]) => void)(...args);
    }
  }
  return new SingleKeyAgent() as unknown as BaseAgent;
}

/**
 * The public key of an identity, to find it among the agent's keys
 * without its passphrase: from `<file>.pub` (which may stand alone, as in
 * OpenSSH, to select an agent key), else from the private key file (the
 * OpenSSH format keeps it in clear), else undefined.
 */
function publicBlob(lib: Ssh2, identity: Identity): Buffer | undefined {
  if (identity.path !== undefined) {
    try {
      const [, base64] = readFileSync(`${identity.path}.pub`, 'utf8').trim().split(/\s+/);
      if (base64) return Buffer.from(base64, 'base64');
    } catch {
      // No .pub beside it: look in the private key.
    }
  }
  let data = identity.data;
  if (data === undefined) {
    try {
      data = readFileSync(identity.path as string);
    } catch {
      return undefined;
    }
  }
  const embedded = embeddedPublicKey(data.toString());
  if (embedded) return embedded;
  const parsed = lib.utils.parseKey(data);
  if (parsed instanceof Error) return undefined;
  return (Array.isArray(parsed) ? parsed[0] : parsed)?.getPublicSSH();
}

/** The public key stored unencrypted in an OpenSSH-format private key (`openssh-key-v1`). */
function embeddedPublicKey(text: string): Buffer | undefined {
  const armored = /-----BEGIN OPENSSH PRIVATE KEY-----([\s\S]*?)-----END OPENSSH PRIVATE KEY-----/.exec(text);
  if (!armored) return undefined;
  const bytes = Buffer.from((armored[1] as string).replace(/\s+/g, ''), 'base64');
  const magic = 'openssh-key-v1\0';
  if (bytes.toString('latin1', 0, magic.length) !== magic) return undefined;
  try {
    let offset = magic.length;
    const field = () => {
      const length = bytes.readUInt32BE(offset);
      const value = bytes.subarray(offset + 4, offset + 4 + length);
      offset += 4 + length;
      return value;
    };
    field(); // cipher
    field(); // kdf
    field(); // kdf options
    if (bytes.readUInt32BE(offset) < 1) return undefined;
    offset += 4;
    return field();
  } catch {
    return undefined;
  }
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

function exec(client: Client, command: string, contextName: string, hop: Hop): Promise<ClientChannel> {
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
    ...(socket && { socket }),
  };
}
