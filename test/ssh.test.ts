import assert from 'node:assert/strict';
import { execFile, execFileSync } from 'node:child_process';
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { createServer, type Server, type Socket } from 'node:net';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { promisify } from 'node:util';
import {
  AuthenticationError,
  ConnectionRefusedError,
  ConnectTimeoutError,
  ContextDisconnectedError,
  HostKeyError,
  InterpreterError,
  PasswordError,
  Router,
  type SshOptions,
  UnknownHostError,
} from 'tendril';
import { nodeBinary } from './support/nodes.js';
import { ROOT, waitFor } from './support/procs.js';
import { startTestbed, type Testbed } from './support/testbed.js';

const whoami = () => `${(require('node:os') as typeof import('node:os')).userInfo().username} ${process.version}`;

describe('ssh', () => {
  let bed: Testbed;
  let router: Router;
  let base: SshOptions;

  before(async () => {
    bed = await startTestbed();
    router = new Router();
    base = { hostname: '127.0.0.1', port: bed.port, knownHostsFile: bed.knownHosts, sshConfig: false };
  });
  after(async () => {
    await router.shutdown();
    await bed.stop();
  });

  test('key login: one connection and one session channel carry calls, modules and output', async () => {
    const lines: string[] = [];
    router.on('log', (record) => lines.push(`${record.contextName}: ${record.text}`));
    const context = await router.ssh({ ...base, username: bed.accounts.key.name, identityFile: bed.keyFile });
    assert.equal(context.name, `ssh:${bed.accounts.key.name}@127.0.0.1:${bed.port}`);
    assert.match(await context.call(whoami), new RegExp(`^${bed.accounts.key.name} v`));
    // The sshd allows one session per connection (MaxSessions 1): many concurrent calls must share it.
    const results = await Promise.all(Array.from({ length: 20 }, (_, i) => context.call((n: number) => n * 2, i)));
    assert.deepEqual(
      results,
      Array.from({ length: 20 }, (_, i) => i * 2),
    );
    assert.match(await context.call(() => (require('chalk') as { red(s: string): string }).red('shipped')), /shipped/);
    await context.call(() => console.log('hello over ssh'));
    await waitFor(() => lines.includes(`${context.name}: hello over ssh`));
    await context.shutdown();
  });

  test('password login, and an encrypted key with its passphrase', async () => {
    const byPassword = await router.ssh({
      ...base,
      username: bed.accounts.password.name,
      password: bed.accounts.password.password,
    });
    assert.match(await byPassword.call(whoami), new RegExp(`^${bed.accounts.password.name}`));
    const byKey = await router.ssh({
      ...base,
      username: bed.accounts.key.name,
      identityFile: bed.encryptedKeyFile,
      passphrase: bed.passphrase,
    });
    assert.match(await byKey.call(whoami), new RegExp(`^${bed.accounts.key.name}`));
    await Promise.all([byPassword.shutdown(), byKey.shutdown()]);
  });

  test('authentication failures list the methods tried; a wrong passphrase is a PasswordError', async () => {
    await assert.rejects(
      router.ssh({ ...base, username: bed.accounts.password.name, password: 'not the password', agent: false }),
      (error: unknown) =>
        error instanceof AuthenticationError &&
        error.methodsTried.includes('password') &&
        /methods tried: .*password/.test(error.message) &&
        !error.message.includes('not the password'),
    );
    await assert.rejects(
      router.ssh({ ...base, username: bed.accounts.key.name, identityFile: bed.encryptedKeyFile, passphrase: 'wrong' }),
      (error: unknown) => error instanceof PasswordError && /passphrase .* is wrong/.test(error.message),
    );
  });

  test('host keys: unknown is refused by default, accept-new records it, a changed key is refused', async () => {
    const knownHostsFile = join(bed.dir, 'known_hosts.new');
    const login = { ...base, knownHostsFile, username: bed.accounts.key.name, identityFile: bed.keyFile };
    await assert.rejects(
      router.ssh(login),
      (error: unknown) =>
        error instanceof HostKeyError && error.presented === bed.fingerprint && /not in/.test(error.message),
    );
    const accepted = await router.ssh({ ...login, hostKeyPolicy: 'accept-new' });
    await accepted.shutdown();
    assert.match(readFileSync(knownHostsFile, 'utf8'), new RegExp(`^\\[127\\.0\\.0\\.1\\]:${bed.port} ssh-ed25519 `));
    const strict = await router.ssh(login);
    await strict.shutdown();
    // Another key on record for the host: the presented one is a change.
    const otherKey = join(bed.dir, 'other');
    execFileSync('ssh-keygen', ['-q', '-t', 'ed25519', '-N', '', '-f', otherKey]);
    const [type, key] = readFileSync(`${otherKey}.pub`, 'utf8').split(' ');
    writeFileSync(knownHostsFile, `[127.0.0.1]:${bed.port} ${type} ${key}\n`);
    await assert.rejects(router.ssh(login), (error: unknown) => {
      assert.ok(error instanceof HostKeyError);
      assert.equal(error.presented, bed.fingerprint);
      assert.equal(error.expected.length, 1);
      assert.match(error.message, /has CHANGED: it presented SHA256:.* but .* expects SHA256:/);
      return true;
    });
    const ignored = await router.ssh({ ...login, hostKeyPolicy: 'ignore' });
    await ignored.shutdown();
  });

  test('hashed and @revoked known_hosts entries', async () => {
    const hashedFile = join(bed.dir, 'known_hosts.hashed');
    writeFileSync(hashedFile, readFileSync(bed.knownHosts));
    execFileSync('ssh-keygen', ['-q', '-H', '-f', hashedFile]);
    assert.ok(readFileSync(hashedFile, 'utf8').startsWith('|1|'));
    const login = { ...base, username: bed.accounts.key.name, identityFile: bed.keyFile };
    const context = await router.ssh({ ...login, knownHostsFile: hashedFile });
    await context.shutdown();
    const revokedFile = join(bed.dir, 'known_hosts.revoked');
    const hostKey = readFileSync(bed.knownHosts, 'utf8').split(' ').slice(1).join(' ');
    writeFileSync(revokedFile, `${readFileSync(bed.knownHosts, 'utf8')}@revoked * ${hostKey}`);
    await assert.rejects(
      router.ssh({ ...login, knownHostsFile: revokedFile }),
      (error: unknown) => error instanceof HostKeyError && /@revoked/.test(error.message),
    );
  });

  test('~/.ssh/config: Host alias, HostName, User, Port, IdentityFile, ConnectTimeout; Match exec is never run', async () => {
    const marker = join(bed.dir, 'match-exec-ran');
    const config = join(bed.dir, 'ssh_config');
    writeFileSync(
      config,
      [
        `Match exec "touch ${marker}"`,
        '  User nobody',
        'Host bed-alias',
        '  HostName 127.0.0.1',
        `  Port ${bed.port}`,
        `  User ${bed.accounts.key.name}`,
        `  IdentityFile ${bed.keyFile}`,
        '  ConnectTimeout 5',
        '  ServerAliveInterval 10',
        '',
      ].join('\n'),
    );
    const context = await router.ssh({ hostname: 'bed-alias', sshConfig: config, knownHostsFile: bed.knownHosts });
    assert.match(await context.call(whoami), new RegExp(`^${bed.accounts.key.name}`));
    assert.ok(!existsSync(marker), 'Match exec was executed');
    await context.shutdown();
  });

  test('ProxyJump through a bastion, from the options and from ssh config', async () => {
    const jump = `${bed.accounts.key.name}@127.0.0.1:${bed.port}`;
    const through = await router.ssh({
      ...base,
      proxyJump: jump,
      username: bed.accounts.target.name,
      identityFile: bed.keyFile,
    });
    assert.match(await through.call(whoami), new RegExp(`^${bed.accounts.target.name}`));
    await through.shutdown();
    const config = join(bed.dir, 'ssh_config_jump');
    writeFileSync(
      config,
      [
        'Host inner',
        '  HostName 127.0.0.1',
        `  Port ${bed.port}`,
        `  ProxyJump ${jump}`,
        // The jump host is looked up in the config under its own name, as OpenSSH does.
        'Host inner 127.0.0.1',
        `  IdentityFile ${bed.keyFile}`,
        '',
      ].join('\n'),
    );
    const configured = await router.ssh({
      hostname: 'inner',
      username: bed.accounts.target.name,
      sshConfig: config,
      knownHostsFile: bed.knownHosts,
    });
    assert.match(await configured.call(whoami), new RegExp(`^${bed.accounts.target.name}`));
    await configured.shutdown();
  });

  test('ssh via an ssh context: ssh2 reaches the intermediate by module forwarding', async () => {
    const first = await router.ssh({ ...base, username: bed.accounts.key.name, identityFile: bed.keyFile });
    const second = await router.ssh({
      ...base,
      via: first,
      username: bed.accounts.target.name,
      privateKey: readFileSync(bed.keyFile),
      knownHostsFile: undefined,
      hostKeyPolicy: 'ignore',
    });
    assert.match(await second.call(whoami), new RegExp(`^${bed.accounts.target.name}`));
    const stats = await first.moduleStats();
    assert.ok(stats.filesReceived > 5, 'the intermediate received the connection layer and ssh2');
    await first.shutdown();
  });

  test('errors: connection refused, unknown host name, connect timeout', async () => {
    const login = { ...base, username: bed.accounts.key.name, identityFile: bed.keyFile };
    await assert.rejects(router.ssh({ ...login, port: 1 }), ConnectionRefusedError);
    await assert.rejects(router.ssh({ ...login, hostname: 'no-such-host.invalid' }), UnknownHostError);
    // A server that accepts the connection and never speaks.
    const sockets = new Set<Socket>();
    const silent: Server = createServer((socket) => sockets.add(socket));
    await new Promise<void>((resolve) => silent.listen(0, '127.0.0.1', resolve));
    const port = (silent.address() as { port: number }).port;
    const started = Date.now();
    await assert.rejects(router.ssh({ ...login, port, connectTimeout: 700 }), ConnectTimeoutError);
    assert.ok(Date.now() - started < 3000);
    for (const socket of sockets) socket.destroy();
    await new Promise((resolve) => silent.close(resolve));
  });

  test('a connect timeout bounds the whole start, also behind a jump host', async () => {
    const sockets = new Set<Socket>();
    const silent: Server = createServer((socket) => sockets.add(socket));
    await new Promise<void>((resolve) => silent.listen(0, '127.0.0.1', resolve));
    const port = (silent.address() as { port: number }).port;
    const started = Date.now();
    await assert.rejects(
      router.ssh({
        ...base,
        port,
        proxyJump: `${bed.accounts.key.name}@127.0.0.1:${bed.port}`,
        identityFile: bed.keyFile,
        username: bed.accounts.key.name,
        hostKeyPolicy: 'ignore',
        connectTimeout: 1000,
      }),
      ConnectTimeoutError,
    );
    assert.ok(Date.now() - started < 3000, `took ${Date.now() - started} ms`);
    for (const socket of sockets) socket.destroy();
    await new Promise((resolve) => silent.close(resolve));
  });

  test('an ssh-agent is used for authentication', async () => {
    const socket = join(bed.dir, 'agent.sock');
    const agent = execFileSync('ssh-agent', ['-a', socket]).toString();
    const pid = Number(/SSH_AGENT_PID=(\d+)/.exec(agent)?.[1]);
    try {
      execFileSync('ssh-add', ['-q', bed.keyFile], { env: { ...process.env, SSH_AUTH_SOCK: socket } });
      const context = await router.ssh({ ...base, username: bed.accounts.key.name, agent: socket });
      assert.match(await context.call(whoami), new RegExp(`^${bed.accounts.key.name}`));
      await context.shutdown();
    } finally {
      process.kill(pid, 'SIGTERM');
    }
  });

  test('Node is found in an nvm install that is not on PATH', async () => {
    const account = bed.accounts.key.name;
    const dir = `/home/${account}/.nvm/versions/node/v99.0.0/bin`;
    // A stand-in that marks the interpreter it starts, so the test can tell it was the one found.
    const standIn = `#!/bin/sh\nTENDRIL_FOUND_BY=nvm exec ${process.execPath} "$@"\n`;
    execFileSync('su', [account, '-c', `mkdir -p ${dir} && cat > ${dir}/node && chmod +x ${dir}/node`], {
      input: standIn,
    });
    try {
      const context = await router.ssh({
        ...base,
        username: account,
        identityFile: bed.keyFile,
        // Only the nvm candidate, so PATH's node cannot be what is found.
        nodeCandidates: ['"$HOME"/.nvm/versions/node/*/bin/node'],
      });
      assert.equal(await context.call(() => process.env.TENDRIL_FOUND_BY), 'nvm');
      await context.shutdown();
    } finally {
      execFileSync('rm', ['-rf', `/home/${account}/.nvm`]);
    }
  });

  test('a missing or too old Node names the host and what was tried', async () => {
    const login = { ...base, username: bed.accounts.key.name, identityFile: bed.keyFile };
    await assert.rejects(
      router.ssh({ ...login, nodeCandidates: ['/nonexistent/node', '"$HOME"/no/node'] }),
      (error: unknown) =>
        error instanceof InterpreterError &&
        /no Node\.js interpreter found on \S+ for user tendril-key/.test(error.message) &&
        /tried \/nonexistent\/node, \/home\/tendril-key\/no\/node/.test(error.message),
    );
    const old = nodeBinary(10);
    await assert.rejects(
      router.ssh({ ...login, nodePath: old }),
      (error: unknown) =>
        error instanceof InterpreterError && /Node v10\.\S+ at .* is too old; Node 12 or newer/.test(error.message),
    );
  });

  test('a script holding an SSH context exits by itself, after its pending call is answered', async () => {
    const options: SshOptions = { ...base, username: bed.accounts.key.name, identityFile: bed.keyFile };
    const started = Date.now();
    const script = join(ROOT, 'build', 'test', 'fixtures', 'ssh-natural-exit.js');
    const { stdout } = await promisify(execFile)(process.execPath, [script, JSON.stringify(options)], {
      timeout: 20_000,
    });
    const { pid } = JSON.parse(stdout) as { pid: number };
    assert.ok(pid > 0);
    // The default keepalive probes every 15 s: the script must not wait for it.
    assert.ok(Date.now() - started < 10_000, `took ${Date.now() - started} ms`);
  });

  test('keepalive detects a dead link and rejects pending calls', async () => {
    const account = bed.accounts.nosudo.name;
    const context = await router.ssh({ ...base, username: account, identityFile: bed.keyFile, keepaliveInterval: 200 });
    const pending = context.call(() => new Promise((resolve) => setTimeout(resolve, 60_000)));
    const sessions = execFileSync('pgrep', ['-u', account, '-f', `^sshd: ${account}`])
      .toString()
      .trim()
      .split('\n')
      .map(Number);
    for (const pid of sessions) process.kill(pid, 'SIGSTOP');
    const started = Date.now();
    try {
      await assert.rejects(pending, ContextDisconnectedError);
      assert.ok(Date.now() - started < 5000, `took ${Date.now() - started} ms`);
    } finally {
      for (const pid of sessions) {
        try {
          process.kill(pid, 'SIGKILL');
        } catch {
          // Gone already.
        }
      }
    }
  });
});
