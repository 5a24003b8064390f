/** The host key check of one hop against its known_hosts files, as its policy says. */
import { logger } from '../core/log.js';
import { HostKeyError } from './errors.js';
import { fingerprint, hostKeyName, readKnownHosts, recordHostKey, verifyHostKeyAs } from './known-hosts.js';
import type { Session } from './method.js';
import type { Hop } from './ssh-hops.js';

const debug = logger('ssh');

/**
 * Checks a hop's host key against its known_hosts files, records it when
 * the policy says so, and returns true, `'doubtful'` (OpenSSH's
 * StrictHostKeyChecking=no accepting a changed or revoked key: the caller
 * then offers no password), or the HostKeyError to fail with.
 */
export function checkHostKey(hop: Hop, key: Buffer, session: Session): true | 'doubtful' | HostKeyError {
  const presented = fingerprint(key);
  const where = `${hop.host}:${hop.port}${hop.jump ? ' (jump host)' : ''}`;
  if (hop.keyCheck === 'ignore') {
    debug('%s: host key of %s (%s) not checked (hostKeyPolicy ignore)', session.name, where, presented);
    return true;
  }
  const name = hop.settings.hostKeyAlias ?? hostKeyName(hop.host, hop.port);
  const files = [...hop.userKnownHosts, ...hop.settings.globalKnownHostsFiles];
  // Files that could not be read, or that another account could change (never trusted), and why: for the message.
  const unread: string[] = [];
  const entries = files.flatMap((file) => {
    try {
      return readKnownHosts(file);
    } catch (error) {
      debug('%s: cannot read known_hosts file %s: %s', session.name, file, (error as Error).message);
      unread.push(`${file} was not read: ${(error as Error).message}`);
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
  const said = unread.length > 0 ? `${message} (${unread.join('; ')})` : message;
  debug('%s: host key rejected: %s', session.name, said);
  return new HostKeyError(session.name, said, presented, verdict.status === 'mismatch' ? verdict.expected : []);
}
