import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { type Context, InvalidOptionError, Router } from 'tendril';
import { ask, CONNECT_SPEC } from '#dist/internal.js';
import { switchOf } from './support/internals.js';

/**
 * Refused with InvalidOptionError naming the option and the method, and,
 * when `near` is given, the option it most likely misspells.
 */
function refused(option: string, where: string, near?: string): (error: unknown) => boolean {
  return (error: unknown) => {
    assert.ok(error instanceof InvalidOptionError, String(error));
    assert.equal(error.option, option);
    assert.ok(error.message.startsWith(`option ${option} of ${where} must be `), error.message);
    if (near !== undefined) assert.match(error.message, new RegExp(`did you mean ${near}\\?`));
    return true;
  };
}

/** Nothing answers here: a connection that was attempted would take its connectTimeout to fail. */
const NOWHERE = '10.255.255.1';

/** Rejects with `check` at once, before anything is started (well under the connectTimeout of 20 s). */
async function refusedAtOnce(start: () => Promise<Context>, check: (error: unknown) => boolean): Promise<void> {
  const started = Date.now();
  await assert.rejects(start(), check);
  assert.ok(Date.now() - started < 2000, `took ${Date.now() - started} ms: it tried to connect`);
}

describe('connection method options are checked as exec() checks its own', () => {
  let router: Router;
  let child: Context;
  before(async () => {
    router = new Router();
    child = await router.local({ name: 'options-via' });
  });
  after(() => router.shutdown());

  test('an unknown option is refused with the one it most likely misspells, by every method', async () => {
    const t = 20_000;
    await refusedAtOnce(
      () => router.ssh({ hostname: NOWHERE, connectTimeout: t, prot: 22 } as never),
      refused('prot', 'router.ssh()', 'port'),
    );
    await refusedAtOnce(
      () => router.openssh({ hostname: NOWHERE, connectTimeout: t, sshArg: ['-v'] } as never),
      refused('sshArg', 'router.openssh()', 'sshArgs'),
    );
    await refusedAtOnce(() => router.local({ cwdd: '/' } as never), refused('cwdd', 'router.local()', 'cwd'));
    await refusedAtOnce(
      () => router.sudo({ usernme: 'root' } as never),
      refused('usernme', 'router.sudo()', 'username'),
    );
    await refusedAtOnce(() => router.su({ suPat: '/bin/su' } as never), refused('suPat', 'router.su()', 'suPath'));
    await refusedAtOnce(
      () => router.doas({ doasPth: '/usr/bin/doas' } as never),
      refused('doasPth', 'router.doas()', 'doasPath'),
    );
    // The common options are known to every method; a misspelt one is not.
    await refusedAtOnce(
      () => router.local({ conectTimeout: 5 } as never),
      refused('conectTimeout', 'router.local()', 'connectTimeout'),
    );
    await refusedAtOnce(
      () => router.ssh({ hostname: NOWHERE, connectTimeout: t, keepAliveInterval: 5 } as never),
      refused('keepAliveInterval', 'router.ssh()', 'keepaliveInterval'),
    );
    // A name nothing resembles: refused, listing the options.
    await refusedAtOnce(
      () => router.local({ zzz: 1 } as never),
      (error) => refused('zzz', 'router.local()')(error) && /one of name, connectTimeout/.test(String(error)),
    );
    // An option of another method is not one of this one's.
    await refusedAtOnce(() => router.local({ sudoPath: 'sudo' } as never), refused('sudoPath', 'router.local()'));
  });

  test('a missing hostname is refused at once, saying which option was meant', async () => {
    await refusedAtOnce(
      () => router.ssh({ host: 'web1' } as never),
      (error) =>
        refused('hostname', 'router.ssh()')(error) &&
        /hostname.*required.*did you mean hostname instead of host\?/.test(String(error)),
    );
    await refusedAtOnce(
      () => router.openssh({ hostName: 'web1' } as never),
      (error) =>
        refused('hostname', 'router.openssh()')(error) &&
        /did you mean hostname instead of hostName\?/.test(String(error)),
    );
    await refusedAtOnce(() => router.ssh({} as never), refused('hostname', 'router.ssh()'));
    await refusedAtOnce(() => router.ssh({ hostname: '' }), refused('hostname', 'router.ssh()'));
  });

  test('the values of the ssh and openssh options are checked before connecting', async () => {
    const base = { hostname: NOWHERE, connectTimeout: 20_000 };
    await refusedAtOnce(() => router.ssh({ ...base, port: '22' as never }), refused('port', 'router.ssh()'));
    await refusedAtOnce(() => router.ssh({ ...base, port: 70_000 }), refused('port', 'router.ssh()'));
    await refusedAtOnce(() => router.ssh({ ...base, username: 7 as never }), refused('username', 'router.ssh()'));
    await refusedAtOnce(
      () => router.ssh({ ...base, hostKeyPolicy: 'yes' as never }),
      refused('hostKeyPolicy', 'router.ssh()'),
    );
    await refusedAtOnce(() => router.ssh({ ...base, password: 1234 as never }), refused('password', 'router.ssh()'));
    await refusedAtOnce(() => router.ssh({ ...base, privateKey: {} as never }), refused('privateKey', 'router.ssh()'));
    await refusedAtOnce(() => router.ssh({ ...base, agent: 1 as never }), refused('agent', 'router.ssh()'));
    await refusedAtOnce(() => router.ssh({ ...base, matchExec: 'yes' as never }), refused('matchExec', 'router.ssh()'));
    await refusedAtOnce(() => router.ssh({ ...base, sshConfig: true as never }), refused('sshConfig', 'router.ssh()'));
    await refusedAtOnce(() => router.ssh({ ...base, proxyJump: 5 as never }), refused('proxyJump', 'router.ssh()'));
    // Each jump host of the array form is checked as the destination is.
    await refusedAtOnce(
      () => router.ssh({ ...base, proxyJump: [{ hostname: 'jump', prot: 22 } as never] }),
      refused('prot', 'router.ssh() proxyJump[0]', 'port'),
    );
    await refusedAtOnce(
      () => router.ssh({ ...base, proxyJump: [{ host: 'jump' } as never] }),
      (error) => refused('hostname', 'router.ssh() proxyJump[0]')(error) && /instead of host\?/.test(String(error)),
    );
    await refusedAtOnce(
      () => router.openssh({ ...base, sshArgs: '-v' as never }),
      refused('sshArgs', 'router.openssh()'),
    );
    await refusedAtOnce(
      () => router.openssh({ ...base, hostKeyPolicy: 'no' as never }),
      refused('hostKeyPolicy', 'router.openssh()'),
    );
    // The common options, whatever the method.
    await refusedAtOnce(() => router.ssh({ ...base, nodePath: 5 as never }), refused('nodePath', 'router.ssh()'));
    await refusedAtOnce(
      () => router.local({ nodeCandidates: 'node' as never }),
      refused('nodeCandidates', 'router.local()'),
    );
    await refusedAtOnce(
      () => router.local({ preferTargetModules: 1 as never }),
      refused('preferTargetModules', 'router.local()'),
    );
  });

  test('with via, the master checks the options before it asks the via context', async () => {
    await refusedAtOnce(
      () => router.local({ via: child, cwdd: '/' } as never),
      refused('cwdd', 'router.local()', 'cwd'),
    );
    await refusedAtOnce(
      () => router.ssh({ via: child, host: NOWHERE } as never),
      (error) => refused('hostname', 'router.ssh()')(error) && /instead of host\?/.test(String(error)),
    );
  });

  test('a via context checks the options it is asked to start a child with', async () => {
    const connect = (method: string, options: Record<string, unknown>) =>
      ask(switchOf(router), child.id, CONNECT_SPEC, { method, options, taken: [] });
    await assert.rejects(connect('local', { cwdd: '/' }), (error: unknown) => {
      assert.match(String(error), /option cwdd of router\.local\(\) must be .*did you mean cwd\?/);
      return true;
    });
    await assert.rejects(connect('ssh', { host: NOWHERE, connectTimeout: 20_000 }), (error: unknown) => {
      assert.match(String(error), /option hostname of router\.ssh\(\) must be .*instead of host\?/);
      return true;
    });
  });
});
