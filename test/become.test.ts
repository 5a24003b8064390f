import assert from 'node:assert/strict';
import { hostname } from 'node:os';
import { after, before, describe, test } from 'node:test';
import { format } from 'node:util';
import createDebug from 'debug';
import {
  BootstrapError,
  type Context,
  ContextDisconnectedError,
  type LogRecord,
  NotAllowedError,
  PasswordError,
  Router,
  type SshOptions,
} from 'tendril';
import { PASSWORD_PROMPT } from '#dist/internal.js';
import { waitFor } from './support/procs.js';
import { SUDO_RS, startTestbed, type Testbed } from './support/testbed.js';

const whoami = () => (require('node:os') as typeof import('node:os')).userInfo().username;

/**
 * sudo, su and doas, reached the way they are used: from an account logged
 * in over SSH (so the prompts are real), and in the chains the issue names.
 */
describe('sudo, su and doas', () => {
  let bed: Testbed;
  let router: Router;
  let login: (account: keyof Testbed['accounts']) => Promise<Context>;
  const logs: LogRecord[] = [];

  before(async () => {
    bed = await startTestbed();
    router = new Router();
    router.on('log', (record) => logs.push(record));
    const base: SshOptions = {
      hostname: '127.0.0.1',
      port: bed.port,
      knownHostsFile: bed.knownHosts,
      sshConfig: false,
    };
    login = (account) => router.ssh({ ...base, username: bed.accounts[account].name, identityFile: bed.keyFile });
  });
  after(async () => {
    await router.shutdown();
    await bed.stop();
  });

  // The password tests run against the original sudo and against sudo-rs, whose prompt
  // (`[sudo: <marker>] Password: `) and messages differ; both read the test bed's sudoers.
  for (const [flavour, sudoPath] of [
    ['sudo', undefined],
    ['sudo-rs', SUDO_RS],
  ] as const) {
    const using = sudoPath === undefined ? {} : { sudoPath };

    test(`${flavour} without a password, then with one`, async () => {
      const sudoer = await login('sudoer');
      const target = await router.sudo({ via: sudoer, username: bed.accounts.target.name, ...using });
      assert.equal(await target.call(whoami), bed.accounts.target.name);
      const withPassword = await login('password');
      const target2 = await router.sudo({
        via: withPassword,
        username: bed.accounts.target.name,
        password: bed.accounts.password.password,
        ...using,
      });
      assert.equal(await target2.call(whoami), bed.accounts.target.name);
      await Promise.all([sudoer.shutdown(), withPassword.shutdown()]);
    });

    test(`${flavour}: a wrong or missing password is a PasswordError at once, never showing the password`, async () => {
      const account = await login('password');
      const started = Date.now();
      await assert.rejects(
        router.sudo({ via: account, username: bed.accounts.target.name, password: 'definitely-wrong', ...using }),
        (error: unknown) =>
          // Raised in the via context, it arrives as its own class, with its fields.
          error instanceof PasswordError &&
          error.code === 'ERR_TENDRIL_PASSWORD' &&
          error.contextName === `sudo:${bed.accounts.target.name}@${account.info.hostname}` &&
          /wrong password for sudo/.test(error.message) &&
          !error.message.includes('definitely-wrong') &&
          /raised in context/.test(error.stack ?? ''),
      );
      assert.ok(Date.now() - started < 5000, `took ${Date.now() - started} ms`);
      await assert.rejects(
        router.sudo({ via: account, username: bed.accounts.target.name, connectTimeout: 10_000, ...using }),
        (error: unknown) =>
          error instanceof PasswordError && /asked for a password and none was given/.test(error.message),
      );
      await account.shutdown();
    });

    test(`${flavour} refusal: not in sudoers`, async () => {
      const nosudo = await login('nosudo');
      await assert.rejects(
        router.sudo({
          via: nosudo,
          username: bed.accounts.target.name,
          password: bed.accounts.nosudo.password,
          connectTimeout: 10_000,
          ...using,
        }),
        (error: unknown) => {
          assert.ok(error instanceof NotAllowedError, String(error));
          assert.match(error.message, /may not run commands as tendril-target with sudo/);
          assert.match(error.lastOutput, /is not in the sudoers file|I'm afraid I can't do that/);
          return true;
        },
      );
      await nosudo.shutdown();
    });

    test(`${flavour} with pwfeedback on`, async () => {
      const feedback = await login('feedback');
      const target = await router.sudo({
        via: feedback,
        username: bed.accounts.target.name,
        password: bed.accounts.feedback.password,
        ...using,
      });
      assert.equal(await target.call(whoami), bed.accounts.target.name);
      await feedback.shutdown();
    });
  }

  test('sudo refusal: requiretty, with its remedy', async () => {
    const tty = await login('tty');
    await assert.rejects(
      router.sudo({ via: tty, username: bed.accounts.target.name }),
      /requiretty.*Defaults:tendril-tty !requiretty/,
    );
    await tty.shutdown();
  });

  test('sudo in a French locale', async () => {
    // From the master (root) a French sudo needs no password, but the prompt marker and the
    // bootstrap must not depend on the language of anything sudo prints.
    const french = await router.sudo({ username: bed.accounts.target.name, preserveEnv: ['LANG', 'LANGUAGE'] });
    assert.equal(await french.call(whoami), bed.accounts.target.name);
    await french.shutdown();
  });

  test('su with the target account password; a wrong one is a PasswordError', async () => {
    const key = await login('key');
    const target = await router.su({
      via: key,
      username: bed.accounts.target.name,
      password: bed.accounts.target.password,
    });
    assert.equal(await target.call(whoami), bed.accounts.target.name);
    await assert.rejects(
      router.su({ via: key, username: bed.accounts.target.name, password: 'wrong-one' }),
      (error: unknown) => error instanceof PasswordError && /wrong password for su/.test(error.message),
    );
    await key.shutdown();
  });

  test("su -l through a login profile that prints 'Permission denied': only su's own messages are refusals", async () => {
    const key = await login('key');
    const account = bed.accounts.profile;
    const target = await router.su({ via: key, username: account.name, password: account.password, login: true });
    assert.equal(await target.call(whoami), account.name);
    // The profile did run, and said what a refusal would have said.
    assert.ok(
      logs.some((r) => r.contextId === target.id && /cd: \/root: Permission denied/.test(r.text)),
      logs.map((r) => r.text).join('\n'),
    );
    await key.shutdown();
    // su's own refusals are still refusals (from root: no password is asked).
    await assert.rejects(router.su({ username: 'tendril-no-such-user', connectTimeout: 10_000 }), (error: unknown) => {
      assert.ok(error instanceof NotAllowedError, String(error));
      assert.match(error.lastOutput, /^su: user tendril-no-such-user does not exist/m);
      return true;
    });
  });

  test('su prompts are recognised in common translations', () => {
    for (const prompt of ['Password: ', 'Passwort: ', 'Mot de passe : ', 'Contraseña:', 'Пароль: ', 'パスワード：']) {
      assert.match(prompt, PASSWORD_PROMPT, prompt);
    }
    assert.doesNotMatch('Last login: yesterday', PASSWORD_PROMPT);
  });

  test('doas without a password (nopass), and with one through a terminal for the prompt', async () => {
    const sudoer = await login('sudoer');
    const nopass = await router.doas({ via: sudoer, username: bed.accounts.target.name });
    assert.equal(await nopass.call(whoami), bed.accounts.target.name);
    const account = await login('password');
    const withPassword = await router.doas({
      via: account,
      username: bed.accounts.target.name,
      password: bed.accounts.password.password,
    });
    assert.equal(await withPassword.call(whoami), bed.accounts.target.name);
    // Output of user code still arrives as log records, not through the terminal into the stream.
    await withPassword.call(() => console.log('doas output'));
    await waitFor(() => logs.some((r) => r.contextId === withPassword.id && r.text === 'doas output'));
    await assert.rejects(
      router.doas({ via: account, username: bed.accounts.target.name, password: 'wrong' }),
      (error: unknown) => error instanceof PasswordError && /wrong password for doas/.test(error.message),
    );
    await assert.rejects(
      router.doas({ via: account, username: bed.accounts.target.name }),
      (error: unknown) => error instanceof PasswordError && /none was given/.test(error.message),
    );
    await Promise.all([sudoer.shutdown(), account.shutdown()]);
  });

  test('doas refusal: not permitted by doas.conf', async () => {
    const nosudo = await login('nosudo');
    await assert.rejects(router.doas({ via: nosudo, username: bed.accounts.target.name }), (error: unknown) => {
      assert.ok(error instanceof NotAllowedError || error instanceof PasswordError, String(error));
      return true;
    });
    await nosudo.shutdown();
  });

  test('default names say where a context is and are unique', async () => {
    const here = hostname();
    const first = await router.sudo({ username: bed.accounts.target.name });
    const second = await router.sudo({ username: bed.accounts.target.name });
    assert.equal(first.name, `sudo:${bed.accounts.target.name}@${here}`);
    assert.equal(second.name, `sudo:${bed.accounts.target.name}@${here}#${second.id}`);
    const remote = await login('sudoer');
    assert.equal(remote.name, `ssh:${bed.accounts.sudoer.name}@127.0.0.1:${bed.port}`);
    // Started by another context on the same host: unique across the whole tree, not only under its parent.
    const via = await router.sudo({ via: remote, username: bed.accounts.target.name });
    assert.equal(remote.info.hostname, here);
    assert.equal(via.name, `sudo:${bed.accounts.target.name}@${here}#${via.id}`);
    await Promise.all([first.shutdown(), second.shutdown()]);
    const alone = await router.sudo({ via: remote, username: bed.accounts.target.name });
    assert.equal(alone.name, `sudo:${bed.accounts.target.name}@${here}`);
    const local = await router.local({ via: remote });
    assert.equal(local.name, `local.${local.info.pid}@${here}`);
    await remote.shutdown();
  });

  test('DEBUG=tendril:* prints a line for every failed attempt, in the master and in a via context', async () => {
    const lines: string[] = [];
    const previous = { log: createDebug.log, namespaces: createDebug.disable() };
    createDebug.enable('tendril:*');
    createDebug.log = (...args: unknown[]) => lines.push(format(...(args as [string, ...unknown[]])));
    // Children learn the namespaces when they start.
    const debugging = new Router({ name: 'debugging' });
    const records: LogRecord[] = [];
    debugging.on('log', (record) => records.push(record));
    try {
      await assert.rejects(debugging.local({ nodePath: '/nonexistent/node' }), BootstrapError);
      assert.ok(
        lines.some((line) => /tendril:bootstrap debugging: starting local\.\d+@\S+ failed: .*exit code 127/.test(line)),
        lines.join('\n'),
      );
      const account = await debugging.ssh({
        hostname: '127.0.0.1',
        port: bed.port,
        knownHostsFile: bed.knownHosts,
        sshConfig: false,
        username: bed.accounts.password.name,
        identityFile: bed.keyFile,
      });
      await assert.rejects(
        debugging.sudo({ via: account, username: bed.accounts.target.name, password: 'not-the-password' }),
        PasswordError,
      );
      await waitFor(() => records.some((record) => /starting sudo:\S+ failed: .*wrong password/.test(record.text)));
      assert.ok(!lines.concat(records.map((record) => record.text)).some((line) => line.includes('not-the-password')));
    } finally {
      createDebug.log = previous.log;
      createDebug.enable(previous.namespaces);
      await debugging.shutdown();
    }
  });

  test('from the master directly: local -> sudo, and sudo errors are typed there too', async () => {
    const local = await router.local({ name: 'as-root' });
    const target = await router.sudo({ via: local, username: bed.accounts.target.name });
    assert.equal(await target.call(whoami), bed.accounts.target.name);
    await local.shutdown();
    // root cannot sudo into a nonexistent account: the refusal is typed, not a timeout.
    await assert.rejects(router.sudo({ username: 'tendril-no-such-user', connectTimeout: 5000 }), (error: unknown) => {
      assert.ok(error instanceof Error && error.name !== 'ConnectTimeoutError');
      return true;
    });
  });

  for (const [label, chain] of [
    [
      'master -> ssh -> sudo',
      async () => {
        const ssh = await login('sudoer');
        return [ssh, await router.sudo({ via: ssh, username: bed.accounts.target.name })];
      },
    ],
    [
      'master -> ssh -> ssh',
      async () => {
        const ssh = await login('key');
        const { readFileSync } = await import('node:fs');
        return [
          ssh,
          await router.ssh({
            hostname: '127.0.0.1',
            port: bed.port,
            via: ssh,
            username: bed.accounts.target.name,
            privateKey: readFileSync(bed.keyFile),
            hostKeyPolicy: 'ignore',
            sshConfig: false,
          }),
        ];
      },
    ],
    [
      'master -> ssh -> sudo -> sudo',
      async () => {
        const ssh = await login('sudoer');
        const first = await router.sudo({ via: ssh, username: bed.accounts.target.name });
        return [ssh, first, await router.sudo({ via: first, username: bed.accounts.key.name })];
      },
    ],
    [
      'master -> local -> sudo',
      async () => {
        const local = await router.local({ name: 'chain-local' });
        return [local, await router.sudo({ via: local, username: bed.accounts.target.name })];
      },
    ],
  ] as [string, () => Promise<Context[]>][]) {
    test(`${label}: calls, modules and output at the far end; killing an intermediate rejects below it`, async () => {
      const contexts = await chain();
      const far = contexts[contexts.length - 1] as Context;
      const [user, red] = await far.call(() => [
        (require('node:os') as typeof import('node:os')).userInfo().username,
        (require('chalk') as { red(s: string): string }).red('forwarded'),
      ]);
      assert.ok(user?.startsWith('tendril-'));
      assert.match(red as string, /forwarded/);
      await far.call(() => {
        console.log('far stdout');
        // An inherited-stdio child through sudo must reach the logs too, not the stream.
        (require('node:child_process') as typeof import('node:child_process')).execFileSync('echo', ['far child'], {
          stdio: 'inherit',
        });
      });
      await waitFor(() => logs.some((r) => r.contextId === far.id && r.text === 'far stdout'));
      await waitFor(() => logs.some((r) => r.contextId === far.id && r.text === 'far child'));
      const pending = far.call(() => new Promise((resolve) => setTimeout(resolve, 60_000)));
      const middle = contexts[contexts.length - 2] as Context;
      const started = Date.now();
      // The intermediate dies without a word (SIGKILL, its own pid on its host).
      await middle.call(() => process.kill(process.pid, 'SIGKILL')).catch(() => {});
      await assert.rejects(pending, ContextDisconnectedError);
      assert.ok(Date.now() - started < 2000, `took ${Date.now() - started} ms`);
      await (contexts[0] as Context).shutdown();
    });
  }
});
