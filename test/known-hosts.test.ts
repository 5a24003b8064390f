import assert from 'node:assert/strict';
import { createHmac, randomBytes } from 'node:crypto';
import { describe, test } from 'node:test';
import { fingerprint, hostKeyName, hostsMatch, parseKnownHosts, verifyHostKey } from '#dist/connection/known-hosts.js';

/** An SSH public key blob of `type` with some key bytes. */
function blob(type: string, fill: number): Buffer {
  const name = Buffer.from(type);
  const head = Buffer.alloc(4);
  head.writeUInt32BE(name.length);
  return Buffer.concat([head, name, Buffer.alloc(36, fill)]);
}

function hashed(name: string): string {
  const salt = randomBytes(20);
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
    assert.deepEqual(changed, { status: 'mismatch', expected: [fingerprint(keyA)] });
  });

  test('fingerprints like ssh-keygen -l -E sha256', () => {
    assert.match(fingerprint(keyA), /^SHA256:[A-Za-z0-9+/]{43}$/);
  });
});
