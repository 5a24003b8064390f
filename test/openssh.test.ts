import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import {
  AuthenticationError,
  ConnectionRefusedError,
  HostKeyError,
  type OpensshOptions,
  PasswordError,
  Router,
} from 'tendril';
import { startTestbed, type Testbed } from './support/testbed.js';

const whoami = () => (require('node:os') as typeof import('node:os')).userInfo().username;

describe('openssh (the system ssh client)', () => {
  let bed: Testbed;
  let router: Router;
  let base: OpensshOptions;
  before(async () => {
    bed = await startTestbed();
    router = new Router();
    base = { hostname: '127.0.0.1', port: bed.port, knownHostsFile: bed.knownHosts };
  });
  after(async () => {
    await router.shutdown();
    await bed.stop();
  });

  test('key, password and passphrase logins; calls and modules work', async () => {
    const key = await router.openssh({ ...base, username: bed.accounts.key.name, identityFile: bed.keyFile });
    assert.equal(await key.call(whoami), bed.accounts.key.name);
    assert.match(await key.call(() => (require('chalk') as { red(s: string): string }).red('x')), /x/);
    const password = await router.openssh({
      ...base,
      username: bed.accounts.password.name,
      password: bed.accounts.password.password,
    });
    assert.equal(await password.call(whoami), bed.accounts.password.name);
    const passphrase = await router.openssh({
      ...base,
      username: bed.accounts.key.name,
      identityFile: bed.encryptedKeyFile,
      passphrase: bed.passphrase,
    });
    assert.equal(await passphrase.call(whoami), bed.accounts.key.name);
    await Promise.all([key.shutdown(), password.shutdown(), passphrase.shutdown()]);
  });

  test('typed errors: wrong password, no acceptable key, unknown host key, refused', async () => {
    await assert.rejects(
      router.openssh({ ...base, username: bed.accounts.password.name, password: 'Xyzzy-bad' }),
      (error: unknown) => error instanceof PasswordError && !error.message.includes('Xyzzy-bad'),
    );
    await assert.rejects(
      router.openssh({ ...base, username: bed.accounts.key.name, identityFile: '/dev/null' }),
      (error: unknown) => error instanceof AuthenticationError && error.methodsTried.includes('publickey'),
    );
    await assert.rejects(
      router.openssh({
        ...base,
        knownHostsFile: '/dev/null',
        username: bed.accounts.key.name,
        identityFile: bed.keyFile,
      }),
      HostKeyError,
    );
    await assert.rejects(router.openssh({ ...base, port: 1, username: bed.accounts.key.name }), ConnectionRefusedError);
  });
});
