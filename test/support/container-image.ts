import { execFileSync } from 'node:child_process';
import { createHash, randomBytes } from 'node:crypto';
import { existsSync, mkdirSync, renameSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { ROOT } from './procs.js';

/** The image's second account: may sudo to root without a password; `su` to root takes ROOT_PASSWORD. */
export const IMAGE_USER = 'app';
/** Root's password inside the image (a throwaway image, built for the tests only). */
export const ROOT_PASSWORD = 'tendril-test-root';

/** The user and passwords of every test image. */
const ACCOUNTS = [
  `--customize-hook=chroot "$1" useradd --create-home --shell /bin/sh --uid 1000 ${IMAGE_USER}`,
  `--customize-hook=echo '${IMAGE_USER} ALL=(ALL) NOPASSWD: ALL' > "$1/etc/sudoers.d/${IMAGE_USER}" && chmod 0440 "$1/etc/sudoers.d/${IMAGE_USER}"`,
  `--customize-hook=echo 'root:${ROOT_PASSWORD}' | chroot "$1" chpasswd`,
];

/** What goes into each image; a recipe's hash names its cached tarball, so a change rebuilds it. */
const RECIPES = {
  /** Debian's minimal variant with its nodejs (18) and sudo. */
  node: ['--variant=minbase', '--include=nodejs,sudo', ...ACCOUNTS, 'bookworm'],
  /** Debian's minimal variant with sudo and no Node at all, as most images are: tendril ships one. */
  bare: ['--variant=minbase', '--include=sudo', ...ACCOUNTS, 'bookworm'],
};

const CACHE = join(ROOT, '.cache', 'images');

/** The Debian archive apt uses here (the only one this machine may reach). */
function debianArchive(): string {
  const archive = execFileSync('apt-get', ['indextargets', '--format', '$(REPO_URI) $(RELEASE)'], { encoding: 'utf8' })
    .split('\n')
    .map((line) => line.split(' '))
    .find(([uri, release]) => uri?.includes('/debian') && release === 'bookworm')?.[0];
  if (!archive) throw new Error("no Debian bookworm archive in apt's sources, to build the test image from");
  return archive;
}

/**
 * The image's root file system as a tarball, built on first use (about
 * 20 s and 90 MB of packages) and kept in .cache/images/.
 * @throws Error saying what failed when mmdebstrap cannot build it.
 */
export function nodeImageTarball(): string {
  return imageTarball('node');
}

/** The root file system of the image without Node, as `nodeImageTarball` builds and keeps it. */
export function bareImageTarball(): string {
  return imageTarball('bare');
}

function imageTarball(kind: keyof typeof RECIPES): string {
  const recipe = RECIPES[kind];
  const hash = createHash('sha256').update(recipe.join('\0')).digest('hex').slice(0, 16);
  const tarball = join(CACHE, `debian-${kind}-${hash}.tar`);
  if (existsSync(tarball)) return tarball;
  mkdirSync(CACHE, { recursive: true });
  // Built beside its final name and renamed: a run building it at the same time never reads half a file.
  const partial = `${tarball}.${process.pid}.${randomBytes(4).toString('hex')}.tar`;
  try {
    execFileSync('mmdebstrap', ['--quiet', ...recipe, partial, debianArchive()], {
      stdio: ['ignore', 'ignore', 'pipe'],
    });
  } catch (error) {
    rmSync(partial, { force: true });
    const stderr = String((error as { stderr?: Buffer }).stderr ?? '').trim();
    throw new Error(`the test image could not be built with mmdebstrap: ${stderr || (error as Error).message}`);
  }
  renameSync(partial, tarball);
  return tarball;
}

/** Fails with a message saying why, for files that need root and the container tools. */
export function requireContainerTools(tools: string[]): void {
  if (process.env.TENDRIL_TEST_TIER === 'quick') {
    throw new Error(
      'this file starts container runtimes, which the quick tier never does: take it out of QUICK in test/run.mjs',
    );
  }
  if (process.getuid?.() !== 0)
    throw new Error('the container tests need root, to run container runtimes: run the suite as root (CI does)');
  for (const tool of tools) {
    if (!existsSync(tool))
      throw new Error(`${tool} is missing: npm test installs the container tools as root (test/run.mjs)`);
  }
}

/** Options every test container is created with: crun refuses this machine's cgroups, and runc needs limits it may set. */
export const CONTAINER_LIMITS = ['--ulimit', 'nofile=1024:1024', '--ulimit', 'nproc=1024:1024'];
