// Runs the compiled test suite with the leak check loaded into every test
// file. Usage: node test/run.mjs [test files...] (default: all).
//
// The SSH and sudo tests need a real OpenSSH server, sudo, doas and
// util-linux's script; when they are missing and this runs as root (CI
// does), they are installed with apt-get first. Otherwise this says what
// to install and fails: a skipped test would read as a pass.
import { execFileSync, spawnSync } from 'node:child_process';
import { existsSync, readdirSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const SYSTEM_TOOLS = [
  ['/usr/sbin/sshd', 'openssh-server'],
  ['/usr/bin/ssh', 'openssh-client'],
  ['/usr/bin/sudo', 'sudo'],
  ['/usr/bin/doas', 'opendoas'],
  ['/usr/bin/script', 'bsdutils'],
  ['/usr/bin/python3', 'python3'],
];

function provision() {
  const missing = SYSTEM_TOOLS.filter(([path]) => !existsSync(path)).map(([, pkg]) => pkg);
  if (missing.length === 0) return;
  if (process.getuid?.() !== 0 || !existsSync('/usr/bin/apt-get')) {
    console.error(
      `The tests need these packages, which are missing: ${missing.join(' ')}. Install them (as root: apt-get install -y ${missing.join(' ')}) and run again.`,
    );
    process.exit(1);
  }
  console.log(`Installing ${missing.join(' ')} with apt-get (needed by the SSH and sudo tests)...`);
  const env = { ...process.env, DEBIAN_FRONTEND: 'noninteractive' };
  execFileSync('apt-get', ['update', '-qq'], { stdio: 'inherit', env });
  execFileSync('apt-get', ['install', '-y', '-qq', ...missing], { stdio: 'inherit', env });
}

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
const built = join(root, 'build', 'test');
provision();
const files =
  process.argv.length > 2
    ? process.argv.slice(2)
    : readdirSync(built)
        .filter((name) => name.endsWith('.test.js'))
        .sort()
        .map((name) => join(built, name));
const result = spawnSync(
  process.execPath,
  ['--import', join(built, 'support', 'leak-check.js'), '--test', '--test-reporter=spec', ...files],
  { stdio: 'inherit', cwd: root },
);
process.exit(result.status ?? 1);
