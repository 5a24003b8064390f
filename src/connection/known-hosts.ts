import { createHash, createHmac, randomBytes } from 'node:crypto';
import { closeSync, constants, fstatSync, mkdirSync, openSync, writeSync } from 'node:fs';
import { basename, dirname, join } from 'node:path';
import {
  checkPlace,
  effectiveUid,
  type PlaceProblem,
  trustedPath,
  UnsafePlaceError,
} from '../core/private-directory.js';
import { readRegularFile } from '../core/regular-file.js';
import { matchPattern } from './ssh-config/patterns.js';

/**
 * OpenSSH known_hosts files: parsing, matching and recording, with
 * OpenSSH's semantics (sshd(8) "SSH_KNOWN_HOSTS FILE FORMAT"): hashed
 * names (`|1|salt|hash`), `[host]:port` for ports other than 22, `*` and
 * `?` wildcards, `!` negation, and the `@revoked` marker. `@cert-authority`
 * lines are recognised and skipped (certificates are not supported by the
 * ssh method; use `openssh`).
 */

/** One key line. */
export interface KnownHostEntry {
  /** `@revoked`, `@cert-authority`, or empty. */
  marker: '' | '@revoked' | '@cert-authority';
  /** The host patterns field, as written. */
  hosts: string;
  /** Key type, e.g. `ssh-ed25519`. */
  keyType: string;
  /** The key blob, base64 as written. */
  key: string;
  /** 1-based line number, for messages. */
  line: number;
  /** The file it was read from, when read by `readKnownHosts`. */
  file?: string;
}

/**
 * What known_hosts files say about a host and the key it presented. For a
 * mismatch, `expected` holds the fingerprints on record and `where` the
 * `file:line` of each (or the line number alone when no file is known).
 */
export type Verdict =
  | { status: 'match' }
  | { status: 'revoked' }
  | { status: 'mismatch'; expected: string[]; where: string[] }
  | { status: 'unknown' };

/** Parses known_hosts text; malformed lines are skipped, as OpenSSH does. */
export function parseKnownHosts(text: string): KnownHostEntry[] {
  const entries: KnownHostEntry[] = [];
  const lines = text.split(/\r?\n/);
  for (let i = 0; i < lines.length; i++) {
    const line = (lines[i] as string).trim();
    if (!line || line.startsWith('#')) continue;
    const fields = line.split(/\s+/);
    let marker: KnownHostEntry['marker'] = '';
    if (fields[0] === '@revoked' || fields[0] === '@cert-authority')
      marker = fields.shift() as KnownHostEntry['marker'];
    const [hosts, keyType, key] = fields;
    if (!hosts || !keyType || !key) continue;
    entries.push({ marker, hosts, keyType, key, line: i + 1 });
  }
  return entries;
}

/** The name a host is looked up under: `host`, or `[host]:port` when the port is not 22. */
export function hostKeyName(host: string, port: number): string {
  return port === 22 ? host : `[${host}]:${port}`;
}

/** True when a host patterns field matches `name` (negation wins). */
export function hostsMatch(patterns: string, name: string): boolean {
  if (patterns.startsWith('|1|')) return hashedMatch(patterns, name);
  let matched = false;
  for (const pattern of patterns.split(',')) {
    if (pattern.startsWith('!')) {
      if (globMatch(pattern.slice(1), name)) return false;
    } else if (globMatch(pattern, name)) {
      matched = true;
    }
  }
  return matched;
}

function hashedMatch(field: string, name: string): boolean {
  const [, , salt, hash] = field.split('|');
  if (!salt || !hash) return false;
  const digest = createHmac('sha1', Buffer.from(salt, 'base64')).update(name).digest('base64');
  return digest === hash;
}

/** `*` and `?` wildcards, ignoring case; linear in the number of `*` (see matchPattern). */
function globMatch(pattern: string, name: string): boolean {
  return matchPattern(name.toLowerCase(), pattern.toLowerCase());
}

/** The key type named inside an SSH public key blob (its first string). */
export function keyTypeOf(blob: Buffer): string {
  if (blob.length < 4) return '';
  const length = blob.readUInt32BE(0);
  return blob.subarray(4, 4 + length).toString('latin1');
}

/** OpenSSH's fingerprint of a key blob: `SHA256:` and unpadded base64. */
export function fingerprint(blob: Buffer): string {
  return `SHA256:${createHash('sha256')
    .update(blob)
    .digest('base64')
    .replace(/(?<!=)=+$/, '')}`;
}

/**
 * Checks `blob` presented by `host`:`port` against `entries`. A revoked key
 * is refused wherever it appears; a key of the same type on record for the
 * host that differs is a mismatch; no key of that type on record is unknown.
 */
export function verifyHostKey(entries: KnownHostEntry[], host: string, port: number, blob: Buffer): Verdict {
  return verifyHostKeyAs(entries, hostKeyName(host, port), blob);
}

/**
 * As `verifyHostKey`, for the name a host is recorded under: `host`,
 * `[host]:port`, or a HostKeyAlias (which OpenSSH looks up without a port).
 */
export function verifyHostKeyAs(entries: KnownHostEntry[], name: string, blob: Buffer): Verdict {
  const presented = blob.toString('base64');
  if (entries.some((e) => e.marker === '@revoked' && e.key === presented)) return { status: 'revoked' };
  const type = keyTypeOf(blob);
  const forHost = entries.filter((e) => e.marker === '' && hostsMatch(e.hosts, name));
  if (forHost.some((e) => e.key === presented)) return { status: 'match' };
  const sameType = forHost.filter((e) => e.keyType === type);
  if (sameType.length > 0) {
    return {
      status: 'mismatch',
      expected: sameType.map((e) => fingerprint(Buffer.from(e.key, 'base64'))),
      where: sameType.map((e) => (e.file === undefined ? `line ${e.line}` : `${e.file}:${e.line}`)),
    };
  }
  return { status: 'unknown' };
}

/** Largest known_hosts file read: 64 MiB, the keys of some hundred thousand hosts. */
const MAX_KNOWN_HOSTS_BYTES = 64 * 1024 * 1024;

/** What a refusal of a known_hosts file says to do. */
const KNOWN_HOSTS_ADVICE =
  'keep known_hosts files where only root and this account can change them (they vouch for host keys), or name one that is with the knownHostsFile option';

/**
 * Reads a known_hosts file; a missing file is an empty one. Entries carry
 * the file's path. Only a file no other account can change is read (it,
 * each directory on the way and each link followed root's or this
 * account's, none writable by group or others but a sticky directory:
 * core/private-directory.ts), as one that could be would let that
 * account vouch for any host key; it is opened without blocking and must
 * be a regular file.
 * @throws UnsafePlaceError when another account could change it; Error from the file system otherwise.
 */
export function readKnownHosts(path: string): KnownHostEntry[] {
  // `UserKnownHostsFile /dev/null`: nothing known, as OpenSSH knows nothing.
  if (path === '/dev/null') return [];
  const check = checkPlace(path);
  if ('problem' in check) {
    if (check.problem.reason === 'missing') return [];
    throw new UnsafePlaceError(`the known_hosts file ${path}`, check.problem, KNOWN_HOSTS_ADVICE);
  }
  // Without blocking (a FIFO would stop this context for good), a regular file only.
  const text = readRegularFile(check.real, { maxBytes: MAX_KNOWN_HOSTS_BYTES }).toString('utf8');
  return parseKnownHosts(text).map((entry) => ({ ...entry, file: path }));
}

/**
 * The hashed form of a known_hosts name, as `ssh-keygen -H` and
 * HashKnownHosts write it: `|1|` base64 salt `|` base64 HMAC-SHA1.
 */
export function hashHostName(name: string, salt: Buffer = randomBytes(20)): string {
  return `|1|${salt.toString('base64')}|${createHmac('sha1', salt).update(name).digest('base64')}`;
}

/**
 * Records a host's key in a known_hosts file, as `accept-new` does,
 * creating the file (mode 0600) and its directory (0700) if needed. The
 * file must be a trusted place as `readKnownHosts` requires, and this
 * account's; it is appended to by its physical path, never through a
 * link another account could have put there.
 * @param name the name to record: `hostKeyName(host, port)` or a HostKeyAlias.
 * @param hash true to record the name hashed (HashKnownHosts).
 * @throws UnsafePlaceError when another account could change the file or its directory; Error from the file system when it cannot be written.
 */
export function recordHostKey(path: string, name: string, blob: Buffer, hash = false): void {
  // `UserKnownHostsFile /dev/null`: nothing is kept, as OpenSSH keeps nothing.
  if (path === '/dev/null') return;
  const what = `the known_hosts file ${path}`;
  mkdirSync(dirname(path), { recursive: true, mode: 0o700 });
  const existing = checkPlace(path);
  let real: string;
  if ('real' in existing) real = existing.real;
  else if (existing.problem.reason === 'missing')
    real = join(trustedPath(dirname(path), what, KNOWN_HOSTS_ADVICE), basename(path));
  else throw new UnsafePlaceError(what, existing.problem, KNOWN_HOSTS_ADVICE);
  const flags =
    constants.O_WRONLY | constants.O_APPEND | constants.O_CREAT | constants.O_NOFOLLOW | constants.O_NONBLOCK;
  const fd = openSync(real, flags, 0o600);
  try {
    const stats = fstatSync(fd);
    const uid = effectiveUid();
    const wrong: PlaceProblem | undefined = !stats.isFile()
      ? { path: real, owner: stats.uid, reason: 'unusable', detail: 'is not a regular file' }
      : uid !== undefined && (stats.uid !== uid || (stats.mode & 0o022) !== 0)
        ? {
            path: real,
            owner: stats.uid,
            reason: stats.uid !== uid ? 'owner' : 'writable',
            detail: 'is not this account’s alone',
          }
        : undefined;
    if (wrong) throw new UnsafePlaceError(what, wrong, KNOWN_HOSTS_ADVICE);
    const line = Buffer.from(`${hash ? hashHostName(name) : name} ${keyTypeOf(blob)} ${blob.toString('base64')}\n`);
    for (let written = 0; written < line.length; ) written += writeSync(fd, line, written);
  } finally {
    closeSync(fd);
  }
}
