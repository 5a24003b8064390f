import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { createHmac, randomBytes } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, test } from 'node:test';
import {
  fingerprint,
  hashHostName,
  hostKeyName,
  hostsMatch,
  parseKnownHosts,
  readKnownHosts,
  recordHostKey,
  verifyHostKey,
  verifyHostKeyAs,
} from '#dist/internal.js';

/** An SSH public key blob of `type` with some key bytes. */
function blob(type: string, fill: number): Buffer {
  const name = Buffer.from(type);
  const head = Buffer.alloc(4);
  head.writeUInt32BE(name.length);
  return Buffer.concat([head, name, Buffer.alloc(36, fill)]);
}

function hashed(name: string, salt = randomBytes(20)): string {
  return `|1|${salt.toString('base64')}|${createHmac('sha1', salt).update(name).digest('base64')}`;
}

const keyA = blob('ssh-ed25519', 1);
const keyB = blob('ssh-ed25519', 2);
const rsa = blob('ssh-rsa', 3);

describe('known_hosts', () => {
  test('names a non-standard port [host]:port, port 22 plainly', () => {
    assert.equal(hostKeyName('web1', 22), 'web1');
    assert.equal(hostKeyName('10.0.0.5', 2222), '[10.0.0.5]:2222');
  });

  test('matches plain, wildcard, negated and hashed host patterns', () => {
    assert.ok(hostsMatch('web1,web2', 'web2'));
    assert.ok(hostsMatch('*.example.com', 'db.example.com'));
    assert.ok(hostsMatch('web?', 'web7'));
    assert.ok(!hostsMatch('*.example.com,!db.example.com', 'db.example.com'), 'negation wins');
    assert.ok(hostsMatch('[127.0.0.1]:*', '[127.0.0.1]:2222'));
    assert.ok(hostsMatch(hashed('[127.0.0.1]:2222'), '[127.0.0.1]:2222'));
    assert.ok(!hostsMatch(hashed('[127.0.0.1]:2222'), '[127.0.0.1]:2223'));
  });

  test('verifies a presented key: match, unknown, changed, revoked', () => {
    const entries = parseKnownHosts(
      [
        '# a comment',
        `web1,10.0.0.5 ssh-ed25519 ${keyA.toString('base64')} a comment`,
        `${hashed('[db]:2222')} ssh-ed25519 ${keyA.toString('base64')}`,
        `@revoked * ssh-ed25519 ${keyB.toString('base64')}`,
        `@cert-authority *.corp ssh-ed25519 ${keyA.toString('base64')}`,
        'garbage line',
      ].join('\n'),
    );
    assert.equal(entries.length, 4);
    assert.deepEqual(verifyHostKey(entries, 'web1', 22, keyA), { status: 'match' });
    assert.deepEqual(verifyHostKey(entries, 'db', 2222, keyA), { status: 'match' });
    assert.deepEqual(verifyHostKey(entries, 'web3', 22, keyA), { status: 'unknown' });
    assert.deepEqual(
      verifyHostKey(entries, 'web1', 22, rsa),
      { status: 'unknown' },
      'another key type is not a change',
    );
    assert.deepEqual(verifyHostKey(entries, 'web1', 22, keyB), { status: 'revoked' });
    const changed = verifyHostKey(
      parseKnownHosts(`web1 ssh-ed25519 ${keyA.toString('base64')}`),
      'web1',
      22,
      blob('ssh-ed25519', 9),
    );
    assert.deepEqual(changed, { status: 'mismatch', expected: [fingerprint(keyA)], where: ['line 1'] });
  });

  test('a HostKeyAlias is looked up as written, without the port', () => {
    const entries = parseKnownHosts(`myalias ssh-ed25519 ${keyA.toString('base64')}`);
    assert.deepEqual(verifyHostKeyAs(entries, 'myalias', keyA), { status: 'match' });
    assert.deepEqual(verifyHostKey(entries, 'myalias', 2222, keyA), { status: 'unknown' });
  });

  test('records keys plainly or hashed (HashKnownHosts), in a private file, and reads them back with their file', () => {
    const dir = mkdtempSync(join(tmpdir(), 'tendril-known-hosts-'));
    try {
      const file = join(dir, 'sub', 'known_hosts');
      recordHostKey(file, '[web1]:2222', keyA);
      recordHostKey(file, 'web2', keyB, true);
      assert.equal(statSync(file).mode & 0o777, 0o600);
      const [plain, hidden] = readFileSync(file, 'utf8').trim().split('\n');
      assert.equal(plain, `[web1]:2222 ssh-ed25519 ${keyA.toString('base64')}`);
      assert.match(hidden as string, /^\|1\|[A-Za-z0-9+/=]+\|[A-Za-z0-9+/=]+ ssh-ed25519 /);
      // OpenSSH finds the hashed entry.
      assert.match(execFileSync('ssh-keygen', ['-F', 'web2', '-f', file], { encoding: 'utf8' }), /web2 found: line 2/);
      const entries = readKnownHosts(file);
      assert.equal(entries[1]?.file, file);
      assert.deepEqual(verifyHostKey(entries, 'web2', 22, keyB), { status: 'match' });
      assert.deepEqual(verifyHostKey(entries, 'web1', 2222, keyB), {
        status: 'mismatch',
        expected: [fingerprint(keyA)],
        where: [`${file}:1`],
      });
      assert.deepEqual(readKnownHosts(join(dir, 'missing')), []);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  test('hashes names as ssh-keygen -H does', () => {
    const salt = randomBytes(20);
    assert.equal(hashHostName('[db]:2222', salt), hashed('[db]:2222', salt));
    assert.ok(hostsMatch(hashHostName('web1'), 'web1'));
  });

  test('fingerprints like ssh-keygen -l -E sha256', () => {
    assert.match(fingerprint(keyA), /^SHA256:[A-Za-z0-9+/]{43}$/);
  });
});
