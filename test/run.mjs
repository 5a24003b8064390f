// Runs the compiled test suite with the leak check loaded into every test
// file. Usage:
//   node test/run.mjs                 every file (npm test; CI, as root)
//   node test/run.mjs --quick         the quick tier, QUICK below (npm run test:unit; no root)
//   node test/run.mjs build/test/x.test.js ...   those files
//
// The SSH and sudo tests need a real OpenSSH server, sudo, sudo-rs, doas
// and util-linux's script; when they are missing and this runs as root (CI
// does), they are installed with apt-get first. Otherwise this says what
// to install and fails: a skipped test would read as a pass. The quick tier
// installs nothing: its files need none of that.
import { execFileSync, spawnSync } from 'node:child_process';
import {
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  renameSync,
  rmSync,
  symlinkSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';

/**
 * The quick tier: the files a contributor runs without root in under a
 * minute, declared here and nowhere else. They use in-process router pairs
 * and local children only: no test bed (accounts, sudoers, sshd), no other
 * Node versions, no network, no apt-get. A file listed here that needs any
 * of that fails saying so (test/support/testbed.ts, test/support/nodes.ts
 * read TENDRIL_TEST_TIER): it is never skipped. Left out, besides those:
 * bench (80 s), commands-bounds (40 s) and files-hostile (25 s), which are
 * slow, and listener, which runs workers as another uid.
 */
const QUICK = [
  'bootstrap',
  'calls',
  'cancellation',
  'channels',
  'codec',
  'cold-path',
  'copy-progress-example',
  'errors',
  'fifo-paths',
  'first-script',
  'fleet',
  'flow',
  'framing',
  'fuzz',
  'heartbeat',
  'hostile-text',
  'jobs-hostile',
  'known-hosts',
  'lifecycle',
  'logs',
  'module-roots',
  'module-trust',
  'modules',
  'options',
  'package',
  'per-sender',
  'receiver-bounds',
  'router-pair',
  'routing',
  'runtime-requests',
  'senders',
  'ssh-config',
  'terminal-escapes',
  'trust',
];

/**
 * Quick-tier files run this many at a time, whatever the cores: most of
 * their time is spent waiting out timeouts, not computing.
 */
const QUICK_CONCURRENCY = 4;

/**
 * The whole suite runs two files at a time (node --test runs one on two
 * cores): much of its time is spent waiting for containers, daemons and
 * sshd to start, and every file keeps to beds of its own, so two at once
 * took 390 s where one at a time took 600 to 730 s.
 */
const FULL_CONCURRENCY = 2;

const SYSTEM_TOOLS = [
  ['/usr/sbin/sshd', 'openssh-server'],
  ['/usr/bin/ssh', 'openssh-client'],
  ['/usr/bin/sudo', 'sudo'],
  ['/usr/bin/doas', 'opendoas'],
  ['/usr/bin/script', 'bsdutils'],
  ['/usr/bin/python3', 'python3'],
  // The UNIX listener reads its peers' credentials (SO_PEERCRED) with perl.
  ['/usr/bin/perl', 'perl-base'],
  // Debian's sudo-rs package: /usr/lib/cargo/bin/sudo, linked as /usr/bin/sudo-rs.
  ['/usr/bin/sudo-rs', 'sudo-rs'],
  // The benchmark's peers, which test/bench.test.ts runs in smoke mode.
  ['/usr/lib/python3/dist-packages/mitogen/__init__.py', 'python3-mitogen'],
  ['/usr/bin/ansible-playbook', 'ansible-core'],
  ['/usr/lib/python3/dist-packages/ansible_mitogen/__init__.py', 'ansible-mitogen'],
  // The container methods' runtimes, and mmdebstrap to build their test image (test/support/containers.ts).
  ['/usr/bin/podman', 'podman'],
  ['/usr/bin/buildah', 'buildah'],
  ['/usr/sbin/runc', 'runc'],
  ['/usr/bin/newuidmap', 'uidmap'],
  ['/usr/sbin/dockerd', 'docker.io'],
  ['/usr/bin/lxc-attach', 'lxc'],
  ['/usr/bin/lxd', 'lxd'],
  ['/usr/bin/lxc', 'lxd-client'],
  ['/usr/bin/mmdebstrap', 'mmdebstrap'],
  // Incus (its daemon and client, without the virtual machine parts): from Debian 13 on in main,
  // for Debian 12 in bookworm-backports, which installBackported below reaches.
  ['/usr/libexec/incus/incusd', 'incus-base'],
];

/** Packages that Debian 12 has only in its backports suite: installed from there when the system's sources lack them. */
const BACKPORTED = ['incus-base'];

function provision() {
  const missing = SYSTEM_TOOLS.filter(([path]) => !existsSync(path)).map(([, pkg]) => pkg);
  if (missing.length === 0) return;
  if (process.getuid?.() !== 0 || !existsSync('/usr/bin/apt-get')) {
    console.error(
      `The tests need these packages, which are missing: ${missing.join(' ')}. Install them (as root: apt-get install -y ${missing.join(' ')}; before Debian 13 sudo-rs is not packaged, and running this as root unpacks Debian 13's) and run again.`,
    );
    process.exit(1);
  }
  console.log(`Installing ${missing.join(' ')} with apt-get (needed by the SSH, sudo and container tests)...`);
  const env = { ...process.env, DEBIAN_FRONTEND: 'noninteractive' };
  // Another run on this machine may be installing too: wait for its dpkg lock rather than fail.
  const wait = ['-o', 'DPkg::Lock::Timeout=600'];
  execFileSync('apt-get', [...wait, 'update', '-qq'], { stdio: 'inherit', env });
  const lacking = missing.filter((pkg) => !hasCandidate(pkg));
  const installable = missing.filter((pkg) => !lacking.includes(pkg));
  if (installable.length > 0)
    execFileSync('apt-get', [...wait, 'install', '-y', '-qq', ...installable], { stdio: 'inherit', env });
  const backported = lacking.filter((pkg) => BACKPORTED.includes(pkg));
  if (backported.length > 0) installBackported(backported, env);
  for (const pkg of lacking.filter((pkg) => !backported.includes(pkg))) {
    if (pkg !== 'sudo-rs') {
      console.error(`apt-get cannot install ${pkg} on this system; the tests need it.`);
      process.exit(1);
    }
    unpackSudoRs(env);
  }
}

/** True when apt can install `pkg` on this system. */
function hasCandidate(pkg) {
  const policy = execFileSync('apt-cache', ['policy', pkg], { encoding: 'utf8' });
  return /Candidate: (?!\(none\))\S/.test(policy);
}

/**
 * sudo-rs is packaged from Debian 13 (trixie) on. Its trixie build needs
 * only glibc 2.34, so on Debian 12 it runs as it is: apt fetches the
 * package from the system's own Debian archive with a private package list
 * (the system's sources are not touched), and its files are unpacked where
 * the package puts them, without registering it with dpkg (whose
 * dependencies name trixie's libc). Fails loudly when that does not work.
 */
function unpackSudoRs(env) {
  const { codename, archive } = systemArchive();
  if (!archive) {
    console.error(
      `sudo-rs: no apt package for it here, and no Debian archive for release ${codename} to fetch trixie's from.`,
    );
    process.exit(1);
  }
  console.log(`sudo-rs is not packaged for ${codename}: unpacking the trixie package's binary...`);
  const dir = mkdtempSync(join(tmpdir(), 'tendril-sudo-rs-'));
  try {
    const apt = privateApt(dir, `deb ${archive} trixie main\n`, { systemSources: false });
    execFileSync('apt-get', [...apt, 'update', '-qq'], { stdio: 'inherit', env });
    execFileSync('apt-get', [...apt, 'download', '-qq', 'sudo-rs'], { stdio: 'inherit', env, cwd: dir });
    const deb = readdirSync(dir).find((name) => name.startsWith('sudo-rs_') && name.endsWith('.deb'));
    if (!deb) throw new Error('apt-get download left no sudo-rs package');
    execFileSync('dpkg-deb', ['-x', join(dir, deb), join(dir, 'root')]);
    mkdirSync('/usr/lib/cargo/bin', { recursive: true });
    // setuid root, as the package's postinst makes it.
    execFileSync('install', [
      '-o',
      'root',
      '-g',
      'root',
      '-m',
      '4755',
      join(dir, 'root/usr/lib/cargo/bin/sudo'),
      '/usr/lib/cargo/bin/sudo',
    ]);
    // By rename, so that a run unpacking it at the same time never sees it missing.
    const link = `/usr/bin/.sudo-rs.${process.pid}`;
    rmSync(link, { force: true });
    symlinkSync('../lib/cargo/bin/sudo', link);
    renameSync(link, '/usr/bin/sudo-rs');
    console.log(execFileSync('/usr/bin/sudo-rs', ['--version'], { encoding: 'utf8' }).trim());
  } catch (error) {
    console.error(`sudo-rs could not be installed, and the sudo-rs tests need it: ${error.message}`);
    process.exit(1);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

/** This system's release codename and the Debian archive apt fetches it from (undefined when none). */
function systemArchive() {
  const codename = /^VERSION_CODENAME=(\S+)$/m.exec(readFileSync('/etc/os-release', 'utf8'))?.[1];
  const archive = execFileSync('apt-get', ['indextargets', '--format', '$(REPO_URI) $(RELEASE)'], { encoding: 'utf8' })
    .split('\n')
    .map((line) => line.split(' '))
    .find(([, release]) => release === codename)?.[0];
  return { codename, archive };
}

/**
 * apt-get options for a private package list in `dir`, from `sources` (a
 * sources.list text), with or without the system's own sources: the
 * system's sources and lists are never changed.
 */
function privateApt(dir, sources, { systemSources }) {
  for (const sub of ['lists/partial', 'cache/archives/partial']) mkdirSync(join(dir, sub), { recursive: true });
  writeFileSync(join(dir, 'sources.list'), sources);
  return [
    '-o',
    `Dir::Etc::sourcelist=${join(dir, 'sources.list')}`,
    ...(systemSources ? [] : ['-o', 'Dir::Etc::sourceparts=-']),
    '-o',
    `Dir::State::Lists=${join(dir, 'lists')}`,
    '-o',
    `Dir::Cache=${join(dir, 'cache')}`,
    '-o',
    'APT::Sandbox::User=root',
  ];
}

/**
 * Installs `packages` from the system's backports suite (Debian 12:
 * bookworm-backports), through a private package list that adds that suite
 * to the system's sources for this one install; the system's sources are
 * not changed, so later upgrades keep to them. Fails loudly when that does
 * not work.
 */
function installBackported(packages, env) {
  const { codename, archive } = systemArchive();
  if (!archive) {
    console.error(
      `${packages.join(' ')}: no apt package here, and no Debian archive for ${codename} to fetch backports from.`,
    );
    process.exit(1);
  }
  console.log(`${packages.join(' ')}: not in ${codename}'s sources; installing from ${codename}-backports...`);
  const dir = mkdtempSync(join(tmpdir(), 'tendril-backports-'));
  try {
    const apt = [
      ...privateApt(dir, `deb ${archive} ${codename}-backports main\n`, { systemSources: true }),
      '-o',
      'DPkg::Lock::Timeout=600',
    ];
    execFileSync('apt-get', [...apt, 'update', '-qq'], { stdio: 'inherit', env });
    execFileSync(
      'apt-get',
      [...apt, 'install', '-y', '-qq', '--no-install-recommends', '-t', `${codename}-backports`, ...packages],
      { stdio: 'inherit', env },
    );
  } catch (error) {
    console.error(
      `${packages.join(' ')} could not be installed from ${codename}-backports, and the tests need it: ${error.message}`,
    );
    process.exit(1);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
const built = join(root, 'build', 'test');
const { values: flags, positionals } = parseArgs({
  options: { quick: { type: 'boolean', default: false }, help: { type: 'boolean', short: 'h', default: false } },
  allowPositionals: true,
});
if (flags.help) {
  console.log(
    'Usage: node test/run.mjs [--quick] [build/test/<name>.test.js ...]\n  (no arguments: every test file; --quick: the quick tier, QUICK in test/run.mjs)',
  );
  process.exit(0);
}
const env = { ...process.env };
let files;
if (flags.quick) {
  if (positionals.length > 0) {
    console.error('--quick runs the files QUICK in test/run.mjs lists; give either --quick or files');
    process.exit(2);
  }
  files = QUICK.map((name) => join(built, `${name}.test.js`));
  const absent = files.filter((file) => !existsSync(file));
  if (absent.length > 0) {
    console.error(`QUICK in test/run.mjs names test files that are not built: ${absent.join(', ')}`);
    process.exit(1);
  }
  env.TENDRIL_TEST_TIER = 'quick';
} else {
  provision();
  files =
    positionals.length > 0
      ? positionals
      : readdirSync(built)
          .filter((name) => name.endsWith('.test.js'))
          .sort()
          .map((name) => join(built, name));
}
const result = spawnSync(
  process.execPath,
  [
    '--import',
    join(built, 'support', 'leak-check.js'),
    '--test',
    '--test-reporter=spec',
    `--test-concurrency=${flags.quick ? QUICK_CONCURRENCY : FULL_CONCURRENCY}`,
    ...files,
  ],
  { stdio: 'inherit', cwd: root, env },
);
process.exit(result.status ?? 1);
