/**
 * The hops of an `ssh` connection, planned before any is dialled: each
 * jump host and the destination with its own settings from the ssh config
 * and only its own credentials.
 */
import { logger } from '../core/log.js';
import { milliseconds } from '../core/options.js';
import { BootstrapError } from './errors.js';
import type { Session } from './method.js';
import { type JumpHost, type ResolvedHop, type ResolvedHost, resolveChain } from './ssh-config/index.js';
import type { HostKeyPolicy, SshJumpHost, SshOptions } from './ssh-options.js';

const debug = logger('ssh');

/** The per-host part of the options: what one hop authenticates and checks with. */
export type Credentials = Pick<
  SshJumpHost,
  'identityFile' | 'privateKey' | 'passphrase' | 'password' | 'agent' | 'knownHostsFile' | 'hostKeyPolicy'
>;

/** A jump host as resolveChain carries it: the array form's entry rides along. */
interface JumpSpec extends JumpHost {
  credentials?: SshJumpHost;
}

/** tendril's policies, and OpenSSH's StrictHostKeyChecking=no when the ssh config says so. */
export type KeyCheck = HostKeyPolicy | 'openssh-no';

/** One resolved hop. */
export interface Hop {
  /** What the ssh config says for this host. */
  settings: ResolvedHost;
  /** The name or address dialled (HostName). */
  host: string;
  /** The port dialled. */
  port: number;
  /** The account logged in as. */
  user: string;
  /** `user@host:port`, and `(jump host)` after it for a jump host: how messages name it. */
  label: string;
  /** A jump host, not the destination. */
  jump: boolean;
  /** This hop's own credentials: the options' for the destination, its `SshJumpHost`'s or none for a jump host. */
  credentials: Credentials;
  /** How its host key is checked. */
  keyCheck: KeyCheck;
  /** The known_hosts files read and written for it (the global ones are read too). */
  userKnownHosts: string[];
  /** The ssh config's ConnectTimeout for this host, in ms; undefined: none. */
  connectTimeout: number | undefined;
  /** Keepalive probe interval in ms (0: none) and unanswered probes tolerated. */
  keepalive: number;
  /** Unanswered keepalive probes tolerated (ServerAliveCountMax). */
  keepaliveCount: number;
}

/** ServerAliveInterval when neither the option nor the ssh config set one, in ms. */
const DEFAULT_KEEPALIVE = 15_000;

/**
 * The hops to the target, jump hosts first, each with its own settings
 * from the ssh config and only its own credentials: the options' for the
 * destination, an `SshJumpHost`'s for its hop, none for the rest.
 */
export function planHops(options: SshOptions, session: Session): Hop[] {
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
