// tendril's reading of ssh configs, compared field by field with what
// OpenSSH itself makes of the same files: `ssh -G` for the settings,
// `ssh -v` for the identity files (which -G prints unexpanded), and, for
// ProxyJump chains, the ProxyCommand OpenSSH says it would run for each
// hop ("Setting implicit ProxyCommand from ProxyJump"), followed hop by hop.
//
// ssh runs with HOME at a scratch directory, so `~` in Include and relative
// Includes resolve there as they do for tendril. OpenSSH expands `~` and
// `%d` in the other directives to the passwd entry's home instead; those
// paths are mapped onto the scratch home before comparing (tendril uses
// one home for everything: see src/connection/ssh-config/index.ts).
import assert from 'node:assert/strict';
import { type SpawnSyncReturns, spawnSync } from 'node:child_process';
import { chmodSync, existsSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir, userInfo } from 'node:os';
import { dirname, join } from 'node:path';
import { after, describe, test } from 'node:test';
import {
  type JumpHost,
  MAX_JUMP_HOPS,
  parseProxyJump,
  type ResolvedHost,
  resolveChain,
  resolveHost,
} from '#dist/internal.js';

const scratch = mkdtempSync(join(tmpdir(), 'tendril-ssh-config-'));
const passwdHome = userInfo().homedir;
const localUser = userInfo().username;
let homes = 0;

/** A fresh home directory holding `files` (paths relative to it), none writable by group or others. */
function makeHome(files: Record<string, string>): string {
  const home = join(scratch, `home${++homes}`);
  mkdirSync(join(home, '.ssh'), { recursive: true, mode: 0o755 });
  for (const [path, text] of Object.entries(files)) {
    const file = join(home, path);
    mkdirSync(dirname(file), { recursive: true, mode: 0o755 });
    writeFileSync(file, text.replaceAll('$HOME', home));
    chmodSync(file, 0o644);
  }
  return home;
}

/** What stands in for ssh's command line: `-l`, `-p`, `-J`. */
interface Command {
  user?: string;
  port?: number;
  jump?: string;
}

function commandArgs(command: Command): string[] {
  return [
    ...(command.user !== undefined ? ['-l', command.user] : []),
    ...(command.port !== undefined ? ['-p', String(command.port)] : []),
    ...(command.jump !== undefined ? ['-J', command.jump] : []),
  ];
}

function sshEnv(home: string): Record<string, string> {
  return { PATH: process.env.PATH ?? '/usr/bin:/bin', HOME: home, LANG: 'C', TENDRIL_TEST_DIR: join(home, 'from-env') };
}

/** OpenSSH's paths with its home (the passwd entry's, or an unexpanded `~/`) moved to the scratch home. */
function mapHome(value: string, home: string): string {
  return value.replaceAll(`${passwdHome}/`, `${home}/`).replace(/(^| )~\//g, `$1${home}/`);
}

/** `ssh -G` for a host, as a map of lowercase keyword to its lines. */
function sshG(home: string, config: string, host: string, command: Command = {}): Map<string, string[]> {
  const result = spawnSync('ssh', ['-G', '-F', config, ...commandArgs(command), host], {
    env: sshEnv(home),
    encoding: 'utf8',
  });
  assert.equal(result.status, 0, `ssh -G ${host} failed: ${result.stderr}`);
  const settings = new Map<string, string[]>();
  for (const line of result.stdout.split('\n')) {
    const space = line.indexOf(' ');
    if (space === -1) continue;
    const key = line.slice(0, space);
    settings.set(key, [...(settings.get(key) ?? []), line.slice(space + 1)]);
  }
  return settings;
}

/**
 * The identity files `ssh -v` loads for a host: it connects through
 * `ProxyCommand=true`, which ends at once. A `-J` is left out: ssh refuses
 * it beside a ProxyCommand, and jump hosts change no identity file.
 */
function sshIdentityFiles(home: string, config: string, host: string, command: Command = {}): string[] {
  const { jump: _jump, ...direct } = command;
  const result = spawnSync(
    'ssh',
    ['-v', '-F', config, '-o', 'ProxyCommand=true', '-o', 'BatchMode=yes', ...commandArgs(direct), host, 'true'],
    { env: sshEnv(home), encoding: 'utf8', timeout: 10_000 },
  );
  const files: string[] = [];
  for (const [, file] of result.stderr.matchAll(/^debug1: identity file (.*) type -?\d+$/gm)) {
    const mapped = mapHome(file as string, home);
    // Each identity is followed by its certificate's name.
    if (mapped === `${files[files.length - 1]}-cert`) continue;
    files.push(mapped);
  }
  return files;
}

const STRICT: Record<string, string> = { true: 'yes', false: 'no', ask: 'ask', 'accept-new': 'accept-new' };

/** The fields tendril resolves, as OpenSSH printed them. */
function opensshView(home: string, config: string, host: string, command: Command = {}) {
  const g = sshG(home, config, host, command);
  const one = (key: string) => g.get(key)?.[0];
  const list = (key: string) => {
    const value = one(key);
    return value === undefined || value === 'none' ? '' : mapHome(value, home);
  };
  const connectTimeout = one('connecttimeout');
  const agent = one('identityagent');
  return {
    hostname: one('hostname'),
    port: Number(one('port')),
    user: one('user'),
    identityFiles: sshIdentityFiles(home, config, host, command),
    // Printed on one line, joined with spaces (even inside names): compared as such.
    userKnownHostsFiles: list('userknownhostsfile'),
    globalKnownHostsFiles: list('globalknownhostsfile'),
    strictHostKeyChecking: STRICT[one('stricthostkeychecking') as string],
    identitiesOnly: one('identitiesonly') === 'yes',
    identityAgent: agent === undefined ? undefined : mapHome(agent, home),
    proxyJump: one('proxyjump'),
    proxyCommand: one('proxycommand'),
    connectTimeout: connectTimeout === 'none' ? undefined : Number(connectTimeout),
    serverAliveInterval: Number(one('serveraliveinterval')),
    serverAliveCountMax: Number(one('serveralivecountmax')),
    hashKnownHosts: one('hashknownhosts') === 'yes',
    hostKeyAlias: one('hostkeyalias'),
  };
}

function tendrilView(resolved: ResolvedHost) {
  return {
    hostname: resolved.hostname,
    port: resolved.port,
    user: resolved.user,
    identityFiles: resolved.identityFiles,
    userKnownHostsFiles: resolved.userKnownHostsFiles.join(' '),
    globalKnownHostsFiles: resolved.globalKnownHostsFiles.join(' '),
    strictHostKeyChecking: resolved.strictHostKeyChecking,
    identitiesOnly: resolved.identitiesOnly,
    identityAgent: resolved.identityAgent,
    proxyJump: resolved.proxyJump,
    proxyCommand: resolved.proxyCommand,
    connectTimeout: resolved.connectTimeout,
    // OpenSSH prints 0 for "not set"; tendril keeps the difference (it then probes every 15 s).
    serverAliveInterval: resolved.serverAliveInterval ?? 0,
    serverAliveCountMax: resolved.serverAliveCountMax,
    hashKnownHosts: resolved.hashKnownHosts,
    hostKeyAlias: resolved.hostKeyAlias,
  };
}

/** Asserts that tendril resolves each host as OpenSSH does. */
function compare(
  home: string,
  hosts: (string | ({ host: string } & Command))[],
  config = join(home, '.ssh', 'config'),
) {
  for (const entry of hosts) {
    const { host, ...command } = typeof entry === 'string' ? { host: entry } : entry;
    const mine = resolveHost(host, {
      configFile: config,
      home,
      env: sshEnv(home),
      ...command,
      proxyJump: command.jump,
    });
    assert.deepEqual(
      tendrilView(mine),
      opensshView(home, config, host, command),
      `${host} ${JSON.stringify(command)} resolves as ssh -G does`,
    );
  }
}

/**
 * The hops OpenSSH goes through to reach `host`: for each, `ssh -G` with
 * the arguments of the ProxyCommand it builds for the previous one.
 */
function opensshChain(
  home: string,
  config: string,
  host: string,
  command: Command = {},
): ({ host: string } & Command)[] {
  const chain: ({ host: string } & Command)[] = [];
  let next: ({ host: string } & Command) | undefined = { host, ...command };
  while (next) {
    chain.unshift(next);
    if (chain.length > MAX_JUMP_HOPS + 1) break;
    const result: SpawnSyncReturns<string> = spawnSync(
      'ssh',
      ['-v', '-G', '-F', config, ...commandArgs(next), next.host],
      {
        env: sshEnv(home),
        encoding: 'utf8',
      },
    );
    assert.equal(result.status, 0, result.stderr);
    const implicit = /Setting implicit ProxyCommand from ProxyJump: (.*)$/m.exec(result.stderr)?.[1];
    if (implicit === undefined) break;
    // e.g. ssh -l u3 -p 2203 -J u1@j1:2201,j2 -F config -v -W '[%h]:%p' j3
    const words = implicit.split(' ').slice(1);
    const hop: { host: string } & Command = { host: words[words.length - 1] as string };
    for (let i = 0; i < words.length - 1; i++) {
      const word = words[i];
      const value = words[i + 1] as string;
      if (word === '-l') hop.user = value;
      else if (word === '-p') hop.port = Number(value);
      else if (word === '-J') hop.jump = value;
    }
    next = hop;
  }
  return chain;
}

after(() => rmSync(scratch, { recursive: true, force: true }));

describe('ssh config, compared with OpenSSH (ssh -G)', () => {
  test('Include: globs in lexical order, relative to ~/.ssh, ~, absolute, nested, inside Host blocks, hidden files skipped', () => {
    const home = makeHome({
      '.ssh/config': [
        'Include config.d/*.conf',
        'Include ~/.ssh/extra $HOME/other/absolute.conf',
        'Include nomatch/*.conf',
        'Host web',
        '  Include web.d/*',
        '  User web-user',
        'Host *',
        '  IdentityFile ~/.ssh/id_default',
        '',
      ].join('\n'),
      // Read before b.conf: its Port wins.
      '.ssh/config.d/a.conf': [
        'Host beta',
        '  Port 2201',
        'Host alpha',
        '  HostName alpha.internal',
        '  Include nested.conf',
        '# A Match that ends with this file: the including file carries on as before.',
        'Match host *.internal',
        '  User internal-user',
        '',
      ].join('\n'),
      '.ssh/config.d/b.conf': 'Host beta\n  HostName beta.example.org\n  Port 2202\n  User beta-user\n',
      '.ssh/config.d/.hidden.conf': 'Host *\n  Port 9999\n',
      '.ssh/config.d/not-conf': 'Host *\n  Port 9998\n',
      '.ssh/nested.conf': 'IdentityFile ~/.ssh/id_nested_%h\nHost gamma\n  Port 2203\n',
      '.ssh/extra': 'Host extra\n  Port 2204\n  UserKnownHostsFile ~/.ssh/extra_known_hosts\n',
      'other/absolute.conf': 'Host absolute\n  HostName abs.example\n',
      // Included from inside `Host web`: applies to web only, and its Host line ends with the file.
      '.ssh/web.d/01-port': 'Port 2205\nHost *\n  ConnectTimeout 7\n',
    });
    compare(home, ['beta', 'alpha', 'gamma', 'extra', 'absolute', 'web', 'other', 'sub.internal']);
    const alpha = resolveHost('alpha', { configFile: join(home, '.ssh', 'config'), home });
    assert.deepEqual(alpha.configFiles, [
      join(home, '.ssh', 'config'),
      join(home, '.ssh', 'config.d', 'a.conf'),
      join(home, '.ssh', 'nested.conf'),
      join(home, '.ssh', 'config.d', 'b.conf'),
      join(home, '.ssh', 'extra'),
      join(home, 'other', 'absolute.conf'),
      join(home, '.ssh', 'web.d', '01-port'),
    ]);
  });

  test('Match host, originalhost, user, localuser, all, final, canonical, negation; Host patterns', () => {
    const home = makeHome({
      '.ssh/config': [
        'Host alias1',
        '  HostName Real1.Example.com',
        '# host is matched after HostName, lowercased',
        'Match host real1.example.com',
        '  Port 2301',
        'Match originalhost ALIAS1 user bob',
        '  IdentityFile ~/.ssh/id_bob',
        'Match user alice',
        '  HostKeyAlias alice-alias',
        'Match !host *.example.com !originalhost web*',
        '  ServerAliveInterval 42',
        `Match localuser ${localUser}`,
        '  ConnectTimeout 9',
        'Match localuser nobody-at-all',
        '  ConnectTimeout 8',
        'Match exec "exit 1"',
        '  User exec-user',
        'Match !exec "exit 1" host web9',
        '  HashKnownHosts yes',
        '# Host patterns are case sensitive; ? is exactly one character',
        'Host ALIAS2',
        '  Port 2304',
        'Host web? !web9',
        '  User webuser',
        '# Only in the final pass that Match final asks for; in it, Host matches the resolved name',
        'Match final host real1.example.com',
        '  User final-user',
        'Match canonical',
        '  User canonical-user',
        'Host real1.example.com',
        '  IdentitiesOnly yes',
        'Match all',
        '  ServerAliveCountMax 7',
        '',
      ].join('\n'),
    });
    compare(home, [
      'alias1',
      { host: 'alias1', user: 'bob' },
      { host: 'alias1', user: 'alice' },
      'ALIAS2',
      'alias2',
      'web1',
      'web9',
      'webby',
      'other',
    ]);
  });

  test('Match exec is never run unless asked; asked, it runs as OpenSSH runs it', () => {
    const marker = join(scratch, 'match-exec-ran');
    const home = makeHome({
      '.ssh/config': [
        `Match exec "touch ${marker}-%n"`,
        '  Port 2201',
        `Match exec "test %h = execme && test %r = ${localUser}"`,
        '  User exec-user',
        '',
      ].join('\n'),
    });
    const config = join(home, '.ssh', 'config');
    const resolved = resolveHost('execme', { configFile: config, home });
    assert.equal(resolved.user, localUser);
    assert.equal(resolved.port, 22);
    assert.ok(!existsSync(`${marker}-execme`));
    const asked = resolveHost('execme', { configFile: config, home, matchExec: true });
    assert.equal(asked.user, 'exec-user');
    assert.equal(asked.port, 2201);
    assert.ok(existsSync(`${marker}-execme`), 'the command ran, its tokens expanded');
    // The same as OpenSSH, which runs them too.
    for (const host of ['execme', 'other']) {
      const mine = tendrilView(resolveHost(host, { configFile: config, home, env: sshEnv(home), matchExec: true }));
      assert.deepEqual(mine, opensshView(home, config, host), host);
    }
  });

  test('tokens %h %p %r %u %d %% %n %l %L %C %i %k, ~ and environment variables where OpenSSH expands them; quoting and = separators', () => {
    const home = makeHome({
      '.ssh/config': [
        'Host tok',
        '  HostName %h.tokens.example',
        '  User tokuser',
        '  Port 2400',
        '  IdentityFile ~/.ssh/id_%r@%h:%p',
        '  IdentityFile %d/keys/%u-%n-%l-%L-%C-%i-%k-%%',
        // biome-ignore lint/suspicious/noTemplateCurlyInString: OpenSSH's own ${VAR} syntax.
        '  IdentityFile ${TENDRIL_TEST_DIR}/k_%h',
        // biome-ignore lint/suspicious/noTemplateCurlyInString: OpenSSH's own ${VAR} syntax.
        '  UserKnownHostsFile ~/kh/%h_%p ${TENDRIL_TEST_DIR}/kh3 %d/kh/%C',
        '  IdentityAgent ~/agent/%C.sock',
        '  HostKeyAlias TokAlias',
        'Host agent-none',
        '  IdentityAgent none',
        'Host agent-env',
        '  IdentityAgent $SSH_AUTH_SOCK',
        'Host agent-literal',
        '  IdentityAgent SSH_AUTH_SOCK',
        'Host quoted',
        '  IdentityFile "~/.ssh/id with space"',
        '  IdentityFile ~/.ssh/escaped\\ space',
        "  UserKnownHostsFile=~/eq1 '~/eq2'",
        '  HostName = Quoted.Example # a comment',
        '  ConnectTimeout=1m30s',
        '',
      ].join('\n'),
    });
    compare(home, [
      'tok',
      { host: 'tok', user: 'other', port: 2401 },
      'agent-none',
      'agent-env',
      'agent-literal',
      'quoted',
    ]);
  });

  test('known hosts settings, StrictHostKeyChecking, IdentitiesOnly, timeouts', () => {
    const home = makeHome({
      '.ssh/config': [
        'Host strict-yes',
        '  StrictHostKeyChecking yes',
        'Host strict-no',
        '  StrictHostKeyChecking no',
        'Host strict-off',
        '  StrictHostKeyChecking off',
        'Host strict-new',
        '  StrictHostKeyChecking accept-new',
        'Host strict-ask',
        '  StrictHostKeyChecking ask',
        'Host strict-true',
        '  StrictHostKeyChecking true',
        'Host global',
        '  GlobalKnownHostsFile /etc/ssh/a ~/b',
        '  UserKnownHostsFile none',
        '  HashKnownHosts yes',
        '  IdentitiesOnly yes',
        '  ServerAliveInterval none',
        'Host zero',
        '  ConnectTimeout 0',
        'Host *',
        '  UserKnownHostsFile ~/first_known_hosts ~/second_known_hosts',
        '  ConnectTimeout 1h1m1s',
        '  ServerAliveInterval 2m',
        '  ServerAliveCountMax 5',
        '',
      ].join('\n'),
    });
    compare(home, [
      'strict-yes',
      'strict-no',
      'strict-off',
      'strict-new',
      'strict-ask',
      'strict-true',
      'global',
      'zero',
      'plain',
    ]);
  });

  test('defaults with no file at all, and -l/-p/-J over the config', () => {
    const home = makeHome({ '.ssh/config': 'Host h\n  User config-user\n  Port 2500\n  ProxyJump config-jump\n' });
    compare(home, [
      'h',
      { host: 'h', user: 'cmd-user', port: 2501, jump: 'cmd-jump:2502' },
      { host: 'h', jump: 'none' },
    ]);
    const none = resolveHost('h', { configFile: false, home });
    assert.equal(none.user, localUser);
    assert.equal(none.port, 22);
    assert.deepEqual(none.userKnownHostsFiles, [join(home, '.ssh', 'known_hosts'), join(home, '.ssh', 'known_hosts2')]);
    assert.deepEqual(none.configFiles, []);
  });

  test('ProxyJump: comma lists, ssh:// URIs, none, jump hosts with their own ProxyJump, ProxyCommand first', () => {
    const home = makeHome({
      '.ssh/config': [
        'Host dest',
        '  ProxyJump u1@j1:2201,j2,ssh://u3@j3:2203',
        'Host j1',
        '  ProxyJump jj',
        'Host j3',
        '  User cfg3',
        '  UserKnownHostsFile ~/j3_known_hosts',
        '  ProxyJump not-used-as-j3-is-given-its-jumps',
        'Host jj',
        '  HostName JJ.example',
        '  User jjuser',
        '  IdentityFile ~/.ssh/jj_key',
        'Host v6',
        '  ProxyJump admin@[fe80::1]:2222,10.0.0.1',
        'Host direct',
        '  ProxyJump none',
        'Host viacmd',
        '  ProxyCommand nc %h %p',
        '  ProxyJump ignored-after-proxycommand',
        'Host *',
        '  ConnectTimeout 3',
        '',
      ].join('\n'),
    });
    const config = join(home, '.ssh', 'config');
    compare(home, ['dest', 'j1', 'j3', 'jj', 'v6', 'direct', 'viacmd']);
    for (const [host, command] of [
      ['dest', {}],
      ['v6', {}],
      ['direct', {}],
      ['dest', { jump: 'j3,u@other:2600' }],
    ] as [string, Command][]) {
      const theirs = opensshChain(home, config, host, command);
      const mine = resolveChain(host, {
        configFile: config,
        home,
        env: sshEnv(home),
        ...(command.jump !== undefined && { proxyJump: command.jump }),
      });
      assert.deepEqual(
        mine.map((hop) => hop.host),
        theirs.map((hop) => hop.host),
        `the hops to ${host}`,
      );
      theirs.forEach((hop, i) => {
        assert.deepEqual(
          tendrilView(mine[i] as ResolvedHost),
          opensshView(home, config, hop.host, hop),
          `hop ${i + 1} to ${host}: ${hop.host} ${JSON.stringify(hop)}`,
        );
      });
    }
    assert.deepEqual(parseProxyJump('ssh://u%40x@[::1]:22,plain # comment'), [
      { user: 'u@x', host: '::1', port: 22 },
      { host: 'plain' },
    ]);
  });

  test('ProxyJump as objects: each comes back as the jump of its hop; the first hop may bring more from the config', () => {
    const home = makeHome({ '.ssh/config': 'Host first\n  ProxyJump zeroth\nHost second\n  User second-user\n' });
    const config = join(home, '.ssh', 'config');
    const first: JumpHost = { host: 'first' };
    const second: JumpHost = { host: 'second', port: 2700 };
    const chain = resolveChain('dest', { configFile: config, home, proxyJump: [first, second] });
    assert.deepEqual(
      chain.map((hop) => [hop.host, hop.user, hop.port]),
      opensshChain(home, config, 'dest', { jump: 'first,second:2700' }).map((hop) => {
        const g = sshG(home, config, hop.host, hop);
        return [hop.host, g.get('user')?.[0], Number(g.get('port')?.[0])];
      }),
    );
    assert.equal(chain[1]?.jump, first);
    assert.equal(chain[2]?.jump, second);
    assert.equal(chain[3]?.jump, undefined);
  });

  test('errors OpenSSH also refuses: a jump host that is itself, a loop through the config, deep Includes, unsafe permissions, bad lines', () => {
    const home = makeHome({
      '.ssh/config': [
        'Host self',
        '  ProxyJump self',
        'Host cycle-a',
        '  ProxyJump cycle-b',
        'Host cycle-b',
        '  ProxyJump cycle-a',
        '',
      ].join('\n'),
      '.ssh/loop.conf': 'Include loop.conf\n',
      '.ssh/writable.conf': 'Host *\n  Port 1\n',
      '.ssh/includes-writable': 'Include writable.conf\n',
      '.ssh/bad-port': 'Port 0\n',
      '.ssh/bad-jump': 'Host nothing-matches-this\n  ProxyJump ssh://h:0\n',
      '.ssh/bad-strict': 'StrictHostKeyChecking maybe\n',
    });
    chmodSync(join(home, '.ssh', 'writable.conf'), 0o666);
    const config = join(home, '.ssh', 'config');
    const fails = (file: string, host: string, pattern: RegExp, chain = false) => {
      const result = spawnSync('ssh', ['-G', '-F', file, host], { env: sshEnv(home), encoding: 'utf8' });
      assert.notEqual(result.status, 0, `OpenSSH accepted ${file} for ${host}`);
      const resolve = chain ? resolveChain : resolveHost;
      assert.throws(() => resolve(host, { configFile: file, home }), pattern);
    };
    fails(config, 'self', /jumphost loop via self/, true);
    fails(join(home, '.ssh', 'loop.conf'), 'x', /Include nested more than 16 deep/);
    fails(join(home, '.ssh', 'includes-writable'), 'x', /bad owner or permissions on the ssh config .*writable\.conf/);
    fails(join(home, '.ssh', 'bad-port'), 'x', /bad-port line 1: bad port '0'/);
    fails(join(home, '.ssh', 'bad-jump'), 'x', /bad-jump line 2: cannot parse ProxyJump entry 'ssh:\/\/h:0'/);
    fails(join(home, '.ssh', 'bad-strict'), 'x', /StrictHostKeyChecking must be/);
    fails(join(home, '.ssh', 'missing'), 'x', /cannot read the ssh config .*missing/);
    // OpenSSH would start ssh after ssh forever; tendril stops.
    assert.ok(opensshChain(home, config, 'cycle-a').length > MAX_JUMP_HOPS);
    assert.throws(() => resolveChain('cycle-a', { configFile: config, home }), /longer than 16 hops/);
  });

  test('without a file given: ~/.ssh/config of the home directory, then the system config', () => {
    const home = makeHome({ '.ssh/config': 'Include d/*\n', '.ssh/d/x': 'Host included-only\n  Port 2800\n' });
    const resolved = resolveHost('included-only', { home });
    assert.equal(resolved.port, 2800);
    assert.equal(resolved.configFiles[0], join(home, '.ssh', 'config'));
    assert.ok(resolved.configFiles.includes('/etc/ssh/ssh_config') || !existsSync('/etc/ssh/ssh_config'));
  });
});
