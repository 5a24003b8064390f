/**
 * What one hop of an `ssh` connection authenticates with, in OpenSSH's
 * order: agent keys, identity files, keyboard-interactive, password.
 */

import type { AnyAuthMethod, BaseAgent, ParsedKey } from 'ssh2';
import { logger } from '../core/log.js';
import { readRegularFile } from '../core/regular-file.js';
import { BootstrapError, PasswordError } from './errors.js';
import { fingerprint } from './known-hosts.js';
import type { Session } from './method.js';
import type { ResolvedHost } from './ssh-config/index.js';
import type { Credentials, Hop } from './ssh-hops.js';
import type { Ssh2 } from './ssh-library.js';

const debug = logger('ssh');

/** One authentication attempt: the ssh2 method and how debug output names it. */
export interface Attempt {
  /** What ssh2 is handed to try. */
  method: AnyAuthMethod;
  /** The SSH method it is (an agent key is `publickey` on the wire). */
  kind: 'agent' | 'publickey' | 'keyboard-interactive' | 'password';
  /** How debug output names it, e.g. `publickey ~/.ssh/id_ed25519`. */
  label: string;
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
export async function prepareAuth(
  lib: Ssh2,
  hop: Hop,
  session: Session,
): Promise<{ attempts: Attempt[]; skipped: string[] }> {
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
        data = readIdentity(identity.path as string);
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
      const [, base64] = readIdentity(`${identity.path}.pub`).toString('utf8').trim().split(/\s+/);
      if (base64) return Buffer.from(base64, 'base64');
    } catch {
      // No .pub beside it: look in the private key.
    }
  }
  let data = identity.data;
  if (data === undefined) {
    try {
      data = readIdentity(identity.path as string);
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
 * An identity file's bytes: a regular file (a link to one is followed, as
 * OpenSSH follows it), never a FIFO that would block this context for
 * good, and no larger than a key can be.
 */
function readIdentity(path: string): Buffer {
  return readRegularFile(path, { follow: true, maxBytes: MAX_IDENTITY_FILE });
}

/** Largest identity file read, in bytes: an RSA key of 16384 bits is under 13 KiB. */
const MAX_IDENTITY_FILE = 1024 * 1024;
