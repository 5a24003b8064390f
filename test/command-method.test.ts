// The command method: real programs that run a command and pass stdio
// through, with tendril's start appended to their argv. OpenSSH's ssh to
// the suite's own sshd (a shell on the far side: remoteShell), exec-like
// wrappers (setpriv, env, sh -c 'exec "$@"'), through a via context; and
// what goes wrong: a program that is not there, one that exits at once.
import assert from 'node:assert/strict';
import { hostname, userInfo } from 'node:os';
import { after, before, describe, test } from 'node:test';
import { BootstrapError, InterpreterError, InvalidOptionError, Router, ToolNotFoundError } from 'tendril';
import { openSshArgs, sshLogin, startTestbed, type Testbed } from './support/testbed.js';

/** What the context says about the process it runs in. */
const identity = () => ({
  uid: process.getuid?.() ?? -1,
  user: (require('node:os') as typeof import('node:os')).userInfo().username,
  ppid: process.ppid,
  greeting: process.env.GREETING,
});

describe('command', () => {
  let bed: Testbed;
  before(async () => {
    bed = await startTestbed();
  });
  after(async () => {
    await bed?.stop();
  });

  test('ssh as the program, remoteShell: the start reaches the far shell as one quoted string; sudo beyond it', async () => {
    await using router = new Router();
    // -F /dev/null: not the ssh config of whoever runs the suite.
    const argv = ['ssh', '-F', '/dev/null', ...openSshArgs(bed)];
    const context = await router.command({ argv, remoteShell: true });
    assert.equal(context.name, `command:ssh@${hostname()}`);
    const inside = await context.call(identity);
    assert.equal(inside.user, bed.accounts.sudoer.name, 'the context runs as the account ssh logged in as');
    const tasks = context.import<typeof import('./fixtures/tasks.js')>(new URL('./fixtures/tasks.js', import.meta.url));
    assert.deepEqual((await tasks.deploy({ version: '1.0' })).steps, [2, 4, 6], 'modules are forwarded');
    assert.equal((await context.exec('sh', ['-c', 'echo "$0"', 'it ran'])).stdout, 'it ran');
    const target = await router.sudo({ via: context, username: bed.accounts.target.name });
    assert.equal((await target.exec('id', ['-un'])).stdout, bed.accounts.target.name);
  });

  test('exec-like wrappers: setpriv, env, sh -c exec "$@"; the name option', async () => {
    await using router = new Router();
    const nobody = await router.command({
      argv: ['setpriv', '--reuid=nobody', '--regid=nogroup', '--clear-groups', '--no-new-privs'],
    });
    assert.equal(nobody.name, `command:setpriv@${hostname()}`);
    assert.equal((await nobody.call(identity)).user, 'nobody');
    assert.equal((await nobody.exec('id', ['-un'])).stdout, 'nobody');

    const env = await router.command({ argv: ['/usr/bin/env', 'GREETING=hello from env'] });
    assert.equal(env.name, `command:env@${hostname()}`, 'named after the program, without its directory');
    assert.equal((await env.call(identity)).greeting, 'hello from env');

    const sh = await router.command({ argv: ['sh', '-c', 'GREETING=from-sh exec "$@"', 'sh'], name: 'wrapped' });
    assert.equal(sh.name, 'wrapped');
    const seen = await sh.call(identity);
    assert.equal(seen.greeting, 'from-sh');
    assert.equal(seen.ppid, process.pid, 'sh exec-ed into the start, whose Node is the master’s child');
  });

  test('remoteShell with a local shell: the start is one shell-quoted word', async () => {
    await using router = new Router();
    const context = await router.command({ argv: ['sh', '-c'], remoteShell: true });
    assert.equal(await context.call(() => 6 * 7), 42);
    // Without remoteShell the same program takes only the first word of the start as its script, and fails.
    await assert.rejects(router.command({ argv: ['sh', '-c'], connectTimeout: 5000 }), BootstrapError);
  });

  test('via another context, the program runs there', async () => {
    await using router = new Router();
    const middle = await router.local({ name: 'wrapper-host' });
    const context = await router.command({ argv: ['env', 'GREETING=via'], via: middle });
    assert.equal(context.name, `command:env@${hostname()}`);
    const seen = await context.call(identity);
    assert.equal(seen.greeting, 'via');
    assert.equal(seen.ppid, middle.info.pid, 'env (exec-ed into Node) was started by the via context');
    assert.equal(seen.user, userInfo().username);
  });

  test('via an ssh context, the program runs on the far side as the ssh account', async () => {
    await using router = new Router();
    const far = await router.ssh(sshLogin(bed));
    const context = await router.command({ argv: ['env', 'GREETING=over ssh'], via: far });
    const seen = await context.call(identity);
    assert.equal(seen.greeting, 'over ssh');
    assert.equal(seen.user, bed.accounts.sudoer.name);
    assert.equal(seen.ppid, (await far.call(() => process.pid)) as number, 'started by the ssh context');
    await assert.rejects(
      router.command({ argv: ['tendril-no-such-program'], via: far }),
      (error: unknown) => error instanceof ToolNotFoundError && error.tool === 'tendril-no-such-program',
    );
  });

  test('a program that floods stdout before the hello: the error quotes only the end of it', async () => {
    await using router = new Router();
    // 32 MiB on stdout, none of it tendril's, then an exit: what is kept of it is bounded.
    const flood = 'head -c 33554432 /dev/zero | tr "\\0" x; echo; echo the-last-words; exit 3';
    await assert.rejects(router.command({ argv: ['sh', '-c', flood, 'flooder'] }), (error: unknown) => {
      assert.ok(error instanceof BootstrapError, String(error));
      assert.match(error.message, /exit code 3/);
      assert.match(error.message, /the-last-words/);
      assert.ok(error.message.length < 16 * 1024, `the error quotes ${error.message.length} characters`);
      return true;
    });
  });

  test('failures: a missing program, a program that exits at once, bad argv', async () => {
    await using router = new Router();
    await assert.rejects(router.command({ argv: ['tendril-no-such-program', '--flag'] }), (error: unknown) => {
      assert.ok(error instanceof ToolNotFoundError, String(error));
      assert.equal(error.tool, 'tendril-no-such-program');
      assert.match(
        error.message,
        /context 'command:tendril-no-such-program@[^']+': 'tendril-no-such-program' was not found on .* \(as root\): install the program, or give its path with the argv option/,
      );
      return true;
    });
    // As gcloud would say it, then give up.
    const complaint = 'ERROR: (gcloud.compute.ssh) Could not fetch resource: The resource web1 was not found';
    await assert.rejects(
      router.command({ argv: ['sh', '-c', `echo '${complaint}' >&2; exit 1`, 'gcloud'] }),
      (error: unknown) => {
        assert.ok(error instanceof BootstrapError, String(error));
        assert.equal(error.constructor, BootstrapError);
        assert.match(
          error.message,
          /context 'command:sh@([^']+)': sh on \1 process ended before it was ready \(exit code 1\)/,
        );
        assert.ok(error.message.includes(complaint), error.message);
        assert.equal(error.lastOutput.trim(), complaint);
        return true;
      },
    );
    // A silent 127 (podman and kubectl exec can lose what a process printed as it ended): a command
    // was not found, most likely Node.
    await assert.rejects(router.command({ argv: ['sh', '-c', 'exit 127', 'wrapper'] }), (error: unknown) => {
      assert.ok(error instanceof InterpreterError, String(error));
      assert.match(
        error.message,
        /\(exit code 127\), printing nothing .*: a command was not found, most likely no Node\.js interpreter found .*; tried node, nodejs/,
      );
      return true;
    });
    // ssh to a port nothing listens on: its own words.
    await assert.rejects(
      router.command({
        argv: ['ssh', '-F', '/dev/null', '-o', 'BatchMode=yes', '-p', '1', '127.0.0.1'],
        remoteShell: true,
      }),
      (error: unknown) =>
        error instanceof BootstrapError &&
        /exit code 255.*ssh: connect to host 127\.0\.0\.1 port 1: Connection refused/s.test(error.message),
    );
    for (const argv of [[], [''], 'ssh web1', [42]]) {
      await assert.rejects(
        router.command({ argv: argv as string[] }),
        (error: unknown) => error instanceof InvalidOptionError && /argv/.test(error.message),
      );
    }
  });
});
