import assert from 'node:assert/strict';
import { execFile, execFileSync, spawn } from 'node:child_process';
import { copyFileSync, existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
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
import { hostsMatch, parseKnownHosts } from '#dist/internal.js';
import { nodeBinary } from './support/nodes.js';
import { ROOT, waitFor } from './support/procs.js';
import { startTestbed, type Testbed } from './support/testbed.js';

const whoami = () => `${(require('node:os') as typeof import('node:os')).userInfo().username} ${process.version}`;

describe('ssh', () => {
  let bed: Testbed;
  let router: Router;
  let base: SshOptions;

  let home: string;
  let savedHome: string | undefined;
  let savedAgent: string | undefined;
  /** A key no account accepts. */
  let strangerKey: string;

  before(async () => {
    bed = await startTestbed();
    router = new Router();
    base = { hostname: '127.0.0.1', port: bed.port, knownHostsFile: bed.knownHosts, sshConfig: false };
    // tendril reads ~/.ssh (config, default keys, known_hosts) from $HOME: a scratch one, never the real one.
    // Nor the agent of whoever runs the suite: tests that use one start their own.
    savedHome = process.env.HOME;
    savedAgent = process.env.SSH_AUTH_SOCK;
    delete process.env.SSH_AUTH_SOCK;
    home = join(bed.dir, 'home');
    mkdirSync(join(home, '.ssh'), { recursive: true, mode: 0o700 });
    process.env.HOME = home;
    strangerKey = join(bed.dir, 'stranger');
    execFileSync('ssh-keygen', ['-q', '-t', 'ed25519', '-N', '', '-f', strangerKey]);
  });
  after(async () => {
    if (savedHome === undefined) delete process.env.HOME;
    else process.env.HOME = savedHome;
    if (savedAgent !== undefined) process.env.SSH_AUTH_SOCK = savedAgent;
    await router.shutdown();
    await bed.stop();
  });

  /** An ssh config file in the scratch directory. */
  const config = (name: string, lines: string[]) => {
    const file = join(bed.dir, name);
    writeFileSync(file, `${lines.join('\n')}\n`, { mode: 0o644 });
    return file;
  };

  test('one naming rule: a fleet labels a target, before connecting, with the name its context gets; the ssh config does not change either', async () => {
    // The ssh config gives this alias its address, port and user: none of them is in the name.
    // Two aliases: targets of one name alive at once would be told apart as `name#id`.
    const file = config('naming-config', [
      'Host webalias webvia',
      '  HostName 127.0.0.1',
      `  Port ${bed.port}`,
      `  User ${bed.accounts.key.name}`,
      `  IdentityFile ${bed.keyFile}`,
      `  UserKnownHostsFile ${bed.knownHosts}`,
    ]);
    const written = { method: 'ssh', hostname: 'webalias', sshConfig: file, agent: false } as const;
    const targets = [
      written,
      { ...written, username: bed.accounts.key.name, port: bed.port },
      // Started from a child: the label is known in the master all the same.
      { ...written, hostname: 'webvia', via: { method: 'local' } },
    ] as const;
    const fleet = router.fleet(targets, (context) => context.name, { close: true });
    const seen: [string, unknown][] = [];
    for await (const outcome of fleet) {
      assert.ok(outcome.ok, String(!outcome.ok && outcome.error));
      seen.push([outcome.label, outcome.value]);
    }
    assert.deepEqual(
      seen.sort(([a], [b]) => a.localeCompare(b)),
      [
        ['ssh:webalias', 'ssh:webalias'],
        ['ssh:webvia via local', 'ssh:webvia'],
        [`ssh:${bed.accounts.key.name}@webalias:${bed.port}`, `ssh:${bed.accounts.key.name}@webalias:${bed.port}`],
      ].sort(([a], [b]) => (a as string).localeCompare(b as string)),
    );
    const direct = await router.ssh({ hostname: 'webalias', sshConfig: file, agent: false });
    assert.equal(direct.name, 'ssh:webalias');
    await direct.shutdown();
    // openssh follows the same rule.
    const openssh = await router.openssh({ hostname: 'webalias', sshArgs: ['-F', file] });
    assert.equal(openssh.name, 'openssh:webalias');
    await openssh.shutdown();
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

  test('ProxyJump through a bastion: jump hosts as objects, and from the ssh config with their own settings', async () => {
    const through = await router.ssh({
      ...base,
      proxyJump: [
        {
          hostname: '127.0.0.1',
          port: bed.port,
          username: bed.accounts.key.name,
          identityFile: bed.keyFile,
          knownHostsFile: bed.knownHosts,
        },
      ],
      username: bed.accounts.target.name,
      identityFile: bed.keyFile,
    });
    assert.match(await through.call(whoami), new RegExp(`^${bed.accounts.target.name}`));
    await through.shutdown();
    const file = config('ssh_config_jump', [
      'Host inner',
      '  HostName 127.0.0.1',
      `  Port ${bed.port}`,
      '  ProxyJump bastion',
      `  UserKnownHostsFile ${bed.knownHosts}`,
      // The jump host is looked up in the config under its own name, as OpenSSH does.
      'Host bastion',
      '  HostName 127.0.0.1',
      `  Port ${bed.port}`,
      `  User ${bed.accounts.key.name}`,
      `  IdentityFile ${bed.keyFile}`,
      `  UserKnownHostsFile ${bed.knownHosts}`,
    ]);
    const configured = await router.ssh({
      hostname: 'inner',
      username: bed.accounts.target.name,
      identityFile: bed.keyFile,
      sshConfig: file,
    });
    assert.match(await configured.call(whoami), new RegExp(`^${bed.accounts.target.name}`));
    await configured.shutdown();
  });

  test("jump hosts never get the destination's password, passphrase or keys; they use their own config", async () => {
    const unauthorized = [
      '  HostName 127.0.0.1',
      `  Port ${bed.port}`,
      '  IdentitiesOnly yes',
      '  IdentityAgent none',
      `  UserKnownHostsFile ${bed.knownHosts}`,
    ];
    const file = config('ssh_config_secrets', [
      // Accepts only the key its own config names.
      'Host jump-key',
      ...unauthorized,
      `  User ${bed.accounts.key.name}`,
      `  IdentityFile ${bed.keyFile}`,
      // An account that would accept the destination's password, and its key; its config offers neither.
      'Host jump-stranger',
      ...unauthorized,
      `  User ${bed.accounts.password.name}`,
      `  IdentityFile ${strangerKey}`,
      // Would accept this key if the destination's passphrase decrypted it.
      'Host jump-encrypted',
      ...unauthorized,
      `  User ${bed.accounts.key.name}`,
      `  IdentityFile ${bed.encryptedKeyFile}`,
      'Host dest-*',
      '  HostName 127.0.0.1',
      `  Port ${bed.port}`,
      `  UserKnownHostsFile ${bed.knownHosts}`,
      'Host dest-good',
      '  ProxyJump jump-key',
      'Host dest-stranger',
      '  ProxyJump jump-stranger',
      'Host dest-encrypted',
      '  ProxyJump jump-encrypted',
    ]);
    const password = { username: bed.accounts.password.name, password: bed.accounts.password.password };
    const context = await router.ssh({ hostname: 'dest-good', sshConfig: file, agent: false, ...password });
    assert.match(await context.call(whoami), new RegExp(`^${bed.accounts.password.name}`));
    await context.shutdown();

    const jump = `${bed.accounts.password.name}@127.0.0.1:${bed.port} (jump host)`;
    await assert.rejects(
      router.ssh({ hostname: 'dest-stranger', sshConfig: file, ...password, identityFile: bed.keyFile }),
      (error: unknown) => {
        assert.ok(error instanceof AuthenticationError, String(error));
        assert.ok(
          error.message.includes(`SSH authentication to ${jump}, which uses only its own settings`),
          error.message,
        );
        assert.deepEqual(error.methodsTried, ['publickey']);
        return true;
      },
    );
    await assert.rejects(
      router.ssh({
        hostname: 'dest-encrypted',
        sshConfig: file,
        username: bed.accounts.key.name,
        identityFile: bed.encryptedKeyFile,
        passphrase: bed.passphrase,
      }),
      (error: unknown) =>
        error instanceof PasswordError &&
        error.message.includes(`${bed.accounts.key.name}@127.0.0.1:${bed.port} (jump host) failed`) &&
        error.message.includes(`${bed.encryptedKeyFile} is encrypted and no passphrase was given`),
    );
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
    assert.ok(stats.filesReceived > 5, 'the intermediate received the connection layer, the SSH methods and ssh2');
    const layers = await first.call(() =>
      Object.keys(require.cache).filter((path) => /\/bootstrap\/(connection|ssh)\.cjs$/.test(path)),
    );
    assert.equal(layers.length, 2, `layers loaded in the intermediate: ${layers.join(', ')}`);
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

  test("a connect timeout bounds the whole start, also behind a jump host; so does the ssh config's ConnectTimeout", async () => {
    const sockets = new Set<Socket>();
    const silent: Server = createServer((socket) => sockets.add(socket));
    await new Promise<void>((resolve) => silent.listen(0, '127.0.0.1', resolve));
    const port = (silent.address() as { port: number }).port;
    const bastion = {
      hostname: '127.0.0.1',
      port: bed.port,
      username: bed.accounts.key.name,
      identityFile: bed.keyFile,
      knownHostsFile: bed.knownHosts,
    };
    try {
      let started = Date.now();
      await assert.rejects(
        router.ssh({
          ...base,
          port,
          proxyJump: [bastion],
          identityFile: bed.keyFile,
          username: bed.accounts.key.name,
          connectTimeout: 800,
        }),
        (error: unknown) =>
          error instanceof ConnectTimeoutError &&
          error.timeoutMs === 800 &&
          error.step === `SSH handshake with ${bed.accounts.key.name}@127.0.0.1:${port}` &&
          /\(connectTimeout\)/.test(error.message),
      );
      assert.ok(Date.now() - started < 3000, `took ${Date.now() - started} ms`);
      const file = config('ssh_config_timeout', [
        'Host silent',
        '  HostName 127.0.0.1',
        `  Port ${port}`,
        '  ConnectTimeout 1',
      ]);
      started = Date.now();
      await assert.rejects(
        router.ssh({
          hostname: 'silent',
          sshConfig: file,
          proxyJump: [bastion],
          username: bed.accounts.key.name,
          identityFile: bed.keyFile,
          connectTimeout: 20_000,
        }),
        (error: unknown) =>
          error instanceof ConnectTimeoutError &&
          error.timeoutMs === 1000 &&
          error.step === `SSH handshake with ${bed.accounts.key.name}@127.0.0.1:${port}` &&
          /not ready after 1000 ms \(ConnectTimeout in the ssh config\) while SSH handshake with/.test(error.message),
      );
      assert.ok(Date.now() - started < 3000, `took ${Date.now() - started} ms`);
    } finally {
      for (const socket of sockets) socket.destroy();
      await new Promise((resolve) => silent.close(resolve));
    }
  });

  test('an ssh-agent is used for authentication; IdentityAgent and IdentitiesOnly from the ssh config', async () => {
    const socket = join(bed.dir, 'agent.sock');
    const agent = execFileSync('ssh-agent', ['-a', socket]).toString();
    const pid = Number(/SSH_AGENT_PID=(\d+)/.exec(agent)?.[1]);
    try {
      execFileSync('ssh-add', ['-q', bed.keyFile], { env: { ...process.env, SSH_AUTH_SOCK: socket } });
      const context = await router.ssh({ ...base, username: bed.accounts.key.name, agent: socket });
      assert.match(await context.call(whoami), new RegExp(`^${bed.accounts.key.name}`));
      await context.shutdown();
      // Only the public half on disk: it selects the agent's key, as in OpenSSH.
      const selector = join(bed.dir, 'agent-selected');
      copyFileSync(`${bed.keyFile}.pub`, `${selector}.pub`);
      const host = (name: string, identityFile: string, identitiesOnly: string) => [
        `Host ${name}`,
        '  HostName 127.0.0.1',
        `  Port ${bed.port}`,
        `  User ${bed.accounts.key.name}`,
        `  UserKnownHostsFile ${bed.knownHosts}`,
        `  IdentityAgent ${socket}`,
        `  IdentityFile ${identityFile}`,
        `  IdentitiesOnly ${identitiesOnly}`,
      ];
      const file = config('ssh_config_agent', [
        ...host('selected', selector, 'yes'),
        ...host('filtered', strangerKey, 'yes'),
        ...host('unfiltered', strangerKey, 'no'),
      ]);
      for (const name of ['selected', 'unfiltered']) {
        const configured = await router.ssh({ hostname: name, sshConfig: file });
        assert.match(await configured.call(whoami), new RegExp(`^${bed.accounts.key.name}`));
        await configured.shutdown();
      }
      // IdentitiesOnly: the agent's key is not among the identities, so it is never offered.
      await assert.rejects(
        router.ssh({ hostname: 'filtered', sshConfig: file }),
        (error: unknown) => error instanceof AuthenticationError && error.methodsTried.join() === 'publickey',
      );
    } finally {
      process.kill(pid, 'SIGTERM');
    }
  });

  test('~/.ssh/config: a host only in an Included file connects; UserKnownHostsFile is where accept-new writes; StrictHostKeyChecking no', async () => {
    const host = (name: string, lines: string[]) => [
      `Host ${name}`,
      '  HostName 127.0.0.1',
      `  Port ${bed.port}`,
      `  User ${bed.accounts.key.name}`,
      `  IdentityFile ${bed.keyFile}`,
      ...lines,
    ];
    mkdirSync(join(home, '.ssh', 'config.d'), { recursive: true });
    writeFileSync(join(home, '.ssh', 'config'), 'Include config.d/*.conf\n', { mode: 0o600 });
    writeFileSync(
      join(home, '.ssh', 'config.d', 'bed.conf'),
      [
        ...host('bed-included', [`  UserKnownHostsFile ${bed.knownHosts}`]),
        ...host('bed-new', [
          '  UserKnownHostsFile ~/kh/first ~/kh/second',
          '  StrictHostKeyChecking accept-new',
          '  HashKnownHosts yes',
        ]),
        ...host('bed-strict', ['  UserKnownHostsFile ~/kh/first ~/kh/second', '  StrictHostKeyChecking yes']),
        ...host('bed-careless', ['  UserKnownHostsFile ~/kh/changed', '  StrictHostKeyChecking no']),
        '',
      ].join('\n'),
      { mode: 0o600 },
    );
    const first = join(home, 'kh', 'first');
    try {
      const included = await router.ssh({ hostname: 'bed-included' });
      assert.match(await included.call(whoami), new RegExp(`^${bed.accounts.key.name}`));
      await included.shutdown();
      await assert.rejects(
        router.ssh({ hostname: 'bed-strict' }),
        (error: unknown) =>
          error instanceof HostKeyError && error.message.includes(`is not in ${first}, ${join(home, 'kh', 'second')}`),
      );
      const accepted = await router.ssh({ hostname: 'bed-new' });
      await accepted.shutdown();
      const [entry, ...others] = parseKnownHosts(readFileSync(first, 'utf8'));
      assert.equal(others.length, 0);
      assert.ok(entry?.hosts.startsWith('|1|'), 'recorded under a hashed name (HashKnownHosts)');
      assert.ok(hostsMatch(entry.hosts, `[127.0.0.1]:${bed.port}`));
      assert.ok(!existsSync(join(home, 'kh', 'second')));
      assert.ok(!existsSync(join(home, '.ssh', 'known_hosts')), 'nothing written to ~/.ssh/known_hosts');
      const strict = await router.ssh({ hostname: 'bed-strict' });
      await strict.shutdown();
      // As OpenSSH with StrictHostKeyChecking no: a changed key is let through, but no password is sent to it.
      const [type, key] = readFileSync(`${strangerKey}.pub`, 'utf8').split(' ');
      writeFileSync(join(home, 'kh', 'changed'), `[127.0.0.1]:${bed.port} ${type} ${key}\n`);
      const careless = await router.ssh({ hostname: 'bed-careless' });
      await careless.shutdown();
      await assert.rejects(
        router.ssh({
          hostname: 'bed-careless',
          username: bed.accounts.password.name,
          password: bed.accounts.password.password,
          identityFile: strangerKey,
        }),
        (error: unknown) => error instanceof AuthenticationError && error.methodsTried.join() === 'publickey',
      );
    } finally {
      writeFileSync(join(home, '.ssh', 'config'), '');
    }
  });

  test('with DEBUG=tendril:*, every failed attempt is a line naming host and step, and no secret appears', async () => {
    const changedKnownHosts = join(bed.dir, 'known_hosts.changed');
    const [type, key] = readFileSync(`${strangerKey}.pub`, 'utf8').split(' ');
    writeFileSync(changedKnownHosts, `[127.0.0.1]:${bed.port} ${type} ${key}\n`);
    const script = join(ROOT, 'build', 'test', 'fixtures', 'ssh-config', 'debug-master.js');
    const child = spawn(process.execPath, [script], {
      env: {
        ...process.env,
        HOME: home,
        DEBUG: 'tendril:*',
        TENDRIL_DEBUG_BED: JSON.stringify({
          port: bed.port,
          knownHosts: bed.knownHosts,
          changedKnownHosts,
          encryptedKeyFile: bed.encryptedKeyFile,
          passphrase: bed.passphrase,
          password: bed.accounts.password,
          key: { name: bed.accounts.key.name },
        }),
      },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (chunk: Buffer) => {
      stdout += chunk.toString();
    });
    child.stderr.on('data', (chunk: Buffer) => {
      stderr += chunk.toString();
    });
    assert.equal(await new Promise((resolve) => child.on('exit', resolve)), 0, stderr);
    assert.match(
      stdout,
      /refused: ConnectionRefusedError\nunknown host: UnknownHostError\nhost key: HostKeyError\nauthentication: AuthenticationError\npassphrase: PasswordError\njump host: AuthenticationError\ndone/,
    );
    const pw = bed.accounts.password.name;
    for (const line of [
      /tendril:ssh ssh:tendril-key@127\.0\.0\.1:1: TCP connect to 127\.0\.0\.1:1 refused/,
      /tendril:ssh ssh:tendril-key@no-such-host\.invalid:\d+: host name no-such-host\.invalid does not resolve/,
      new RegExp(
        `tendril:ssh ssh:${pw}@127\\.0\\.0\\.1:\\d+: host key rejected: the host key of 127\\.0\\.0\\.1:\\d+ has CHANGED: it presented ${bed.fingerprint.replace(/[+/]/g, '\\$&')}`,
      ),
      new RegExp(
        `tendril:ssh ssh:${pw}@127\\.0\\.0\\.1:\\d+: ${pw}@127\\.0\\.0\\.1:\\d+ refused password \\(the password option\\)`,
      ),
      /tendril:ssh ssh:tendril-key@127\.0\.0\.1:\d+: giving up: .*the passphrase for the private key in \S+ is wrong/,
      new RegExp(
        `tendril:ssh ssh:${pw}@127\\.0\\.0\\.1:\\d+: giving up: .*SSH authentication to tendril-key@127\\.0\\.0\\.1:\\d+ \\(jump host\\), which uses only its own settings.* failed; methods tried: none`,
      ),
    ]) {
      assert.match(stderr, line);
    }
    assert.equal(stderr.match(/tendril:ssh .*giving up/g)?.length, 6, stderr);
    for (const secret of [bed.accounts.password.password, bed.passphrase]) {
      assert.ok(!stderr.includes(secret) && !stdout.includes(secret), 'a secret appeared in the output');
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

  test("with shipNode 'never', a missing Node names the host and what was tried; a too old nodePath is refused", async () => {
    const login = { ...base, username: bed.accounts.key.name, identityFile: bed.keyFile };
    await assert.rejects(
      router.ssh({ ...login, nodeCandidates: ['/nonexistent/node', '"$HOME"/no/node'], shipNode: 'never' }),
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

  test('an SSH context that became ready while another call was in flight keeps its own pending call alive', async () => {
    const options: SshOptions = { ...base, username: bed.accounts.key.name, identityFile: bed.keyFile };
    const script = join(ROOT, 'build', 'test', 'fixtures', 'ssh-started-during-call.js');
    const { stdout } = await promisify(execFile)(process.execPath, [script, JSON.stringify(options)], {
      timeout: 20_000,
    });
    const { pid } = JSON.parse(stdout) as { pid: number };
    assert.ok(pid > 0);
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
