/**
 * The suite's own SSH and privilege test bed: real accounts, a real sudo
 * and doas configuration, and a real OpenSSH sshd listening on 127.0.0.1
 * on a free port with its own host key and config (never the system
 * service). Needs root; test/run.mjs installs openssh-server, sudo and
 * opendoas first when they are missing.
 */
import { type ChildProcess, execFileSync, spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import {
  chmodSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  readFileSync,
  realpathSync,
  renameSync,
  rmSync,
  statSync,
  writeFileSync,
} from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { MARK_VARIABLE } from './run-mark.js';

/** A test account and the password it has for this run. */
export interface Account {
  name: string;
  password: string;
}

/** Accounts, each set up for one situation. */
export interface Accounts {
  /** SSH by key only. */
  key: Account;
  /** SSH by password; sudo and doas to `target` with its password. */
  password: Account;
  /** SSH by key; passwordless sudo and doas to `target`. */
  sudoer: Account;
  /** SSH by key; not in sudoers. */
  nosudo: Account;
  /** The account others become; su target (with its password); SSH by key. */
  target: Account;
  /** sudo to `target` requires a tty (requiretty). */
  tty: Account;
  /** sudo to `target` with a password, with pwfeedback on. */
  feedback: Account;
  /** SSH by key; sudo to any account, root included, with its password: what the docs' examples do. */
  docs: Account;
  /** su target (with its password) whose login profile fails a command: `cd: /root: Permission denied`. */
  profile: Account;
}

/** A running test bed. */
export interface Testbed {
  accounts: Accounts;
  /** The sshd's port on 127.0.0.1. */
  port: number;
  /** A known_hosts file that knows the sshd's host key under `[127.0.0.1]:port`. */
  knownHosts: string;
  /** SHA256 fingerprint of the sshd's host key. */
  fingerprint: string;
  /** An unencrypted private key authorised for every key account. */
  keyFile: string;
  /** The same kind of key, encrypted with `passphrase`. */
  encryptedKeyFile: string;
  passphrase: string;
  /** Scratch directory of this test bed. */
  dir: string;
  /** What sshd has logged since it started listening (LogLevel VERBOSE; the last MiB). */
  sshdLog(): string;
  /** Stops the sshd and removes the scratch directory. */
  stop(): Promise<void>;
}

/**
 * Options of `router.ssh()` that log into the test bed's sshd with its key,
 * as `account` (default: the sudoer account), checking its host key
 * against its known_hosts and ignoring ~/.ssh/config.
 */
export function sshLogin(bed: Testbed, account: Account = bed.accounts.sudoer) {
  return {
    hostname: '127.0.0.1',
    port: bed.port,
    username: account.name,
    identityFile: bed.keyFile,
    knownHostsFile: bed.knownHosts,
    sshConfig: false as const,
  };
}

/**
 * Arguments that log plain OpenSSH's `ssh` into the suite's loopback sshd
 * as the sudoer account, with the test bed's key and known_hosts, before
 * the remote command. `options` are extra `-o` settings, such as
 * `'Compression=no'`.
 */
export function openSshArgs(bed: Testbed, options: string[] = []): string[] {
  return [
    '-T',
    '-o',
    'BatchMode=yes',
    ...options.flatMap((option) => ['-o', option]),
    '-o',
    `UserKnownHostsFile=${bed.knownHosts}`,
    '-i',
    bed.keyFile,
    '-p',
    String(bed.port),
    `${bed.accounts.sudoer.name}@127.0.0.1`,
  ];
}

const ROLES: Record<keyof Accounts, string> = {
  key: 'tendril-key',
  password: 'tendril-pw',
  sudoer: 'tendril-sudoer',
  nosudo: 'tendril-nosudo',
  target: 'tendril-target',
  tty: 'tendril-tty',
  feedback: 'tendril-fb',
  docs: 'tendril-docs',
  profile: 'tendril-prof',
};

/** sudo-rs, where Debian's package (and test/run.mjs) puts it; it reads the same sudoers. */
export const SUDO_RS = '/usr/bin/sudo-rs';

function run(command: string, args: string[], input?: string): string {
  return execFileSync(command, args, { encoding: 'utf8', input, stdio: ['pipe', 'pipe', 'pipe'] });
}

function requireRoot(): void {
  if (process.env.TENDRIL_TEST_TIER === 'quick') {
    throw new Error(
      'this file starts the SSH and sudo test bed (root, test accounts, sudoers, an sshd), which the quick tier never does: take it out of QUICK in test/run.mjs',
    );
  }
  if (process.getuid?.() !== 0) {
    throw new Error(
      'the SSH and sudo tests need root, to create test accounts and start a private sshd: run the suite as root (CI does)',
    );
  }
  for (const tool of [
    '/usr/sbin/sshd',
    '/usr/bin/sudo',
    SUDO_RS,
    '/usr/bin/doas',
    '/usr/bin/script',
    '/usr/bin/ssh-keygen',
  ]) {
    if (!existsSync(tool)) {
      throw new Error(
        `${tool} is missing: install openssh-server, sudo, sudo-rs, opendoas and bsdutils (npm test does this as root)`,
      );
    }
  }
}

/**
 * Where the accounts' passwords are kept between runs (root only), so that
 * runs reuse them: two suites running at once never change each other's.
 */
const PASSWORD_FILE = '/var/lib/tendril-testbed/passwords.json';

/** Held while the accounts and rules are set up: test files start test beds in parallel. */
const LOCK = '/var/lib/tendril-testbed/lock';

/** Runs `fn` holding LOCK (a directory, created atomically); a lock older than a minute is stale. */
function whileLocked<T>(fn: () => T): T {
  mkdirSync(dirname(LOCK), { recursive: true, mode: 0o700 });
  const deadline = Date.now() + 120_000;
  for (;;) {
    try {
      mkdirSync(LOCK);
      break;
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== 'EEXIST') throw error;
      try {
        if (Date.now() - statSync(LOCK).mtimeMs > 60_000) rmSync(LOCK, { recursive: true, force: true });
      } catch {
        // Released meanwhile.
      }
      if (Date.now() > deadline) throw new Error(`${LOCK} is held by another test run for over 2 minutes`);
      Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, 50);
    }
  }
  try {
    return fn();
  } finally {
    rmSync(LOCK, { recursive: true, force: true });
  }
}

function ensureAccounts(): Accounts {
  const accounts = {} as Accounts;
  let known: Record<string, string> = {};
  try {
    known = JSON.parse(readFileSync(PASSWORD_FILE, 'utf8')) as Record<string, string>;
  } catch {
    // First run on this machine.
  }
  const changed: string[] = [];
  for (const [role, name] of Object.entries(ROLES) as [keyof Accounts, string][]) {
    let created = false;
    try {
      run('id', [name]);
    } catch {
      run('useradd', ['--create-home', '--shell', '/bin/bash', name]);
      created = true;
    }
    let password = known[name];
    if (password === undefined || created) {
      password = `Pw-${randomBytes(9).toString('base64url')}`;
      known[name] = password;
      changed.push(`${name}:${password}`);
    }
    accounts[role] = { name, password };
  }
  if (changed.length > 0) {
    run('chpasswd', [], `${changed.join('\n')}\n`);
    mkdirSync(dirname(PASSWORD_FILE), { recursive: true, mode: 0o700 });
    writeFileSync(PASSWORD_FILE, JSON.stringify(known), { mode: 0o600 });
  }
  const { password, sudoer, target, tty, feedback } = accounts;
  const sudoers = [
    '# tendril test bed (test/support/testbed.ts)',
    `${sudoer.name} ALL=(${target.name}) NOPASSWD: ALL`,
    `${password.name} ALL=(${target.name}) ALL`,
    `Defaults:${tty.name} requiretty`,
    `${tty.name} ALL=(${target.name}) NOPASSWD: ALL`,
    `Defaults:${feedback.name} pwfeedback`,
    `${feedback.name} ALL=(${target.name}) ALL`,
    // For chains of two sudos: the target may become the key account.
    `${target.name} ALL=(${accounts.key.name}) NOPASSWD: ALL`,
    // The docs' examples: ssh to a host, then sudo to root with a password.
    `${accounts.docs.name} ALL=(ALL) ALL`,
    '',
  ].join('\n');
  // A login profile that prints an error, as real ones do: su's refusals must not match it.
  const profileHome = run('getent', ['passwd', accounts.profile.name]).split(':')[5] as string;
  replaceFile(
    join(profileHome, '.bash_profile'),
    '# tendril test bed (test/support/testbed.ts)\ncd /root\ncd\n',
    0o644,
  );
  const sudoersFile = '/etc/sudoers.d/tendril-test';
  replaceFile(sudoersFile, sudoers, 0o440, (draft) => run('visudo', ['-cf', draft]));
  // The leak check's mark survives sudo, so a run knows its own processes
  // (test/support/leak-check.ts). A file of its own, which a run of an
  // older checkout, rewriting the rules above, leaves in place.
  replaceFile(
    `${sudoersFile}-mark`,
    `# tendril test bed (test/support/testbed.ts)\nDefaults env_keep += "${MARK_VARIABLE}"\n`,
    0o440,
    (draft) => run('visudo', ['-cf', draft]),
  );
  const doasConf = '/etc/doas.conf';
  if (existsSync(doasConf) && !readFileSync(doasConf, 'utf8').startsWith('# tendril test bed')) {
    throw new Error(`${doasConf} exists and is not the test bed's; not overwriting it`);
  }
  replaceFile(
    doasConf,
    [
      '# tendril test bed (test/support/testbed.ts)',
      `permit nopass setenv { ${MARK_VARIABLE} } ${sudoer.name} as ${target.name}`,
      `permit setenv { ${MARK_VARIABLE} } ${password.name} as ${target.name}`,
      '',
    ].join('\n'),
    0o600,
  );
  return accounts;
}

/**
 * Replaces `path` with `content` in one step (a rename), so that another
 * run's sudo, doas or su reading it meanwhile sees the old file or the new
 * one, never a half-written one. `check` may refuse the draft by throwing.
 */
function replaceFile(path: string, content: string, mode: number, check?: (draft: string) => void): void {
  const draft = `${path}.${process.pid}.new`;
  try {
    writeFileSync(draft, content, { mode });
    chmodSync(draft, mode);
    check?.(draft);
    renameSync(draft, path);
  } finally {
    rmSync(draft, { force: true });
  }
}

function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.listen(0, '127.0.0.1', () => {
      const address = server.address();
      server.close(() =>
        typeof address === 'object' && address ? resolve(address.port) : reject(new Error('no port')),
      );
    });
  });
}

/** Bytes of sshd's log a test bed keeps. */
const MAX_SSHD_LOG = 1024 * 1024;

/**
 * Starts sshd with `config` (after `wrapper`, a command that execs its
 * arguments); resolves once it listens on `port`, rejects with its log if
 * it exits first.
 */
async function startSshd(config: string, port: number, wrapper: string[] = []): Promise<ChildProcess> {
  const argv = [...wrapper, '/usr/sbin/sshd', '-D', '-e', '-f', config];
  const sshd = spawn(argv[0] as string, argv.slice(1), { stdio: ['ignore', 'ignore', 'pipe'] });
  const log: string[] = [];
  await new Promise<void>((resolve, reject) => {
    const onData = (chunk: Buffer) => {
      log.push(chunk.toString());
      if (log.join('').includes(`Server listening on 127.0.0.1 port ${port}`)) {
        sshd.stderr?.off('data', onData);
        resolve();
      }
    };
    sshd.stderr?.on('data', onData);
    sshd.once('exit', (code) => reject(new Error(`sshd exited with ${code}: ${log.join('')}`)));
  });
  return sshd;
}

/** Where a shell looks for `node` and `nodejs` without a profile: sshd's PATH and the usual prefixes. */
const NODE_PLACES = ['/usr/local/sbin', '/usr/local/bin', '/usr/sbin', '/usr/bin', '/sbin', '/bin', '/snap/bin'];

/**
 * A command that execs its arguments in a mount namespace of their own
 * where every directory of `NODE_PLACES` that holds `node` or `nodejs` is
 * an overlay whose upper layer deletes them (whiteouts), so nothing
 * started under it finds Node without being told where one is. The
 * overlays' layers live in `dir`.
 */
function withoutNode(dir: string): string[] {
  const byDirectory = new Map<string, Set<string>>();
  for (const place of NODE_PLACES) {
    for (const name of ['node', 'nodejs']) {
      if (!existsSync(join(place, name))) continue;
      const real = realpathSync(place);
      byDirectory.set(real, (byDirectory.get(real) ?? new Set()).add(name));
    }
  }
  const mounts: string[] = [];
  let n = 0;
  for (const [directory, names] of byDirectory) {
    const upper = join(dir, 'nodeless', `upper${n}`);
    const work = join(dir, 'nodeless', `work${n++}`);
    mkdirSync(upper, { recursive: true });
    mkdirSync(work, { recursive: true });
    // A whiteout: a character device 0/0 in the upper layer hides the name below it.
    for (const name of names) run('mknod', [join(upper, name), 'c', '0', '0']);
    mounts.push(`mount -t overlay overlay -o lowerdir=${directory},upperdir=${upper},workdir=${work} ${directory}`);
  }
  const check =
    'for n in node nodejs; do if command -v "$n" >/dev/null; then echo "tendril test bed: $n is still visible at $(command -v "$n")" >&2; exit 1; fi; done';
  const script = `set -e; ${mounts.join('; ')}; set +e; ${check}; exec "$@"`;
  return ['unshare', '--mount', '--propagation', 'private', '--', 'sh', '-c', script, 'sh'];
}

/**
 * Starts the test bed: accounts, keys, and an sshd on a free port of
 * 127.0.0.1. With `withoutNode`, the sshd runs where the host's Node is
 * hidden (see `withoutNode`): every session it serves sees no Node, as on
 * a host that has none (`nodePath` can still name one elsewhere).
 */
export async function startTestbed(options: { withoutNode?: boolean } = {}): Promise<Testbed> {
  requireRoot();
  const accounts = whileLocked(ensureAccounts);
  const dir = mkdtempSync(join(tmpdir(), 'tendril-testbed-'));
  chmodSync(dir, 0o755);
  const wrapper = options.withoutNode ? withoutNode(dir) : [];
  const hostKey = join(dir, 'ssh_host_ed25519_key');
  run('ssh-keygen', ['-q', '-t', 'ed25519', '-N', '', '-f', hostKey]);
  const keyFile = join(dir, 'id_ed25519');
  run('ssh-keygen', ['-q', '-t', 'ed25519', '-N', '', '-f', keyFile]);
  const passphrase = `Pp-${randomBytes(9).toString('base64url')}`;
  const encryptedKeyFile = join(dir, 'id_encrypted');
  run('ssh-keygen', ['-q', '-t', 'ed25519', '-N', passphrase, '-f', encryptedKeyFile]);
  const authorized = join(dir, 'authorized_keys');
  mkdirSync(authorized);
  const publicKeys = `${readFileSync(`${keyFile}.pub`, 'utf8')}${readFileSync(`${encryptedKeyFile}.pub`, 'utf8')}`;
  const keyUsers = ['key', 'sudoer', 'nosudo', 'target', 'password', 'tty', 'feedback', 'docs'] as const;
  for (const role of keyUsers) writeFileSync(join(authorized, accounts[role].name), publicKeys, { mode: 0o644 });

  const config = join(dir, 'sshd_config');
  const mark = process.env[MARK_VARIABLE];
  const sshdConfig = (port: number) =>
    [
      `Port ${port}`,
      'ListenAddress 127.0.0.1',
      `HostKey ${hostKey}`,
      `PidFile ${join(dir, 'sshd.pid')}`,
      `AuthorizedKeysFile ${authorized}/%u`,
      // The scratch directory lives under /tmp, which StrictModes would reject.
      'StrictModes no',
      'UsePAM no',
      'PubkeyAuthentication yes',
      'PasswordAuthentication yes',
      'KbdInteractiveAuthentication no',
      'PermitRootLogin no',
      // One session channel per connection: tendril never needs more.
      'MaxSessions 1',
      'LogLevel VERBOSE',
      // Every session carries the leak check's mark of the run that started this sshd.
      ...(mark ? [`SetEnv ${MARK_VARIABLE}=${mark}`] : []),
      `AllowUsers ${Object.values(accounts)
        .map((a) => a.name)
        .join(' ')}`,
      `Match User ${accounts.key.name},${accounts.sudoer.name},${accounts.nosudo.name},${accounts.target.name},${accounts.docs.name}`,
      '  PasswordAuthentication no',
      '',
    ].join('\n');
  mkdirSync('/run/sshd', { recursive: true });
  // Another run may take the free port before sshd binds it: then try another.
  let started: { sshd: ChildProcess; port: number } | undefined;
  for (let attempt = 1; started === undefined; attempt++) {
    const port = await freePort();
    writeFileSync(config, sshdConfig(port));
    try {
      started = { sshd: await startSshd(config, port, wrapper), port };
    } catch (error) {
      if (attempt >= 5 || !/Address already in use/.test((error as Error).message)) throw error;
    }
  }
  const { sshd, port } = started;
  // Keep draining sshd's log so it never blocks, and keep its recent lines for tests that count connections.
  let recent = '';
  sshd.stderr?.on('data', (chunk: Buffer) => {
    if (process.env.TENDRIL_SSHD_LOG) process.stderr.write(chunk);
    recent = `${recent}${chunk.toString()}`.slice(-MAX_SSHD_LOG);
  });

  const publicHostKey = readFileSync(`${hostKey}.pub`, 'utf8').trim().split(' ');
  const knownHosts = join(dir, 'known_hosts');
  writeFileSync(knownHosts, `[127.0.0.1]:${port} ${publicHostKey[0]} ${publicHostKey[1]}\n`);
  const fingerprint = run('ssh-keygen', ['-l', '-E', 'sha256', '-f', `${hostKey}.pub`]).split(' ')[1] as string;

  return {
    accounts,
    port,
    knownHosts,
    fingerprint,
    keyFile,
    encryptedKeyFile,
    passphrase,
    dir,
    sshdLog: () => recent,
    async stop() {
      if (sshd.exitCode === null) {
        const exited = new Promise((resolve) => sshd.once('exit', resolve));
        sshd.kill('SIGTERM');
        await exited;
      }
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

/**
 * Makes `home` a scratch home directory whose ~/.ssh/config maps the hosts
 * `web1` and `web2` to the test bed's sshd, logging in as `account`
 * (default: the docs account, which may sudo with its password), so
 * examples can be run as written.
 * @returns an environment for running them: HOME set, no agent, no DEBUG, and
 *   `SUDO_PASSWORD` the account's password.
 */
export function sshHome(bed: Testbed, home: string, account: Account = bed.accounts.docs): NodeJS.ProcessEnv {
  mkdirSync(join(home, '.ssh'), { recursive: true, mode: 0o700 });
  const knownHosts = join(home, '.ssh', 'known_hosts');
  writeFileSync(knownHosts, readFileSync(bed.knownHosts));
  writeFileSync(
    join(home, '.ssh', 'config'),
    [
      'Host web1 web2',
      '  HostName 127.0.0.1',
      `  Port ${bed.port}`,
      `  User ${account.name}`,
      `  IdentityFile ${bed.keyFile}`,
      `  UserKnownHostsFile ${knownHosts}`,
      '',
    ].join('\n'),
    { mode: 0o600 },
  );
  const env: NodeJS.ProcessEnv = { ...process.env, HOME: home, SUDO_PASSWORD: account.password };
  delete env.SSH_AUTH_SOCK;
  delete env.DEBUG;
  return env;
}
