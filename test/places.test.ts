// Places a context takes from an environment another account gave it
// (issue 40, finding 2 and its class): the attacker is a real second
// account on this machine (the test bed's key account, logged in over
// SSH), which starts `su` to the target account with an environment of
// its choosing, as `su` without -l keeps it, and then plays against what
// the target's context makes there.
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import {
  chmodSync,
  chownSync,
  existsSync,
  lchownSync,
  mkdirSync,
  mkdtempSync,
  readFileSync,
  rmSync,
  symlinkSync,
  writeFileSync,
} from 'node:fs';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { BootstrapError, type ConnectionMethod, type Context, HostKeyError, type LocalOptions, Router } from 'tendril';
import { checkPlace, distrustInheritedPlaces, localMethod, PLACES_FUNCTIONS, PLACES_PRELUDE } from '#dist/internal.js';
import shellModule from './fixtures/user-method/shell.cjs';
import { plantedCoreCache } from './support/planted-cache.js';
import { tinyRuntimePackage } from './support/runtimes.js';
import { sshLogin, startTestbed, type Testbed } from './support/testbed.js';

/** The release of the small runtime shipped here (test/support/runtimes.ts). */
const VERSION = '24.99.2';

/** `local`, but the shell looks for Node as on a remote target, and may ask for one to be shipped. */
const nodeless: ConnectionMethod<LocalOptions> = {
  name: 'nodeless',
  defaultNode: () => undefined,
  start: (argv, options, session) => localMethod.start(argv, options, session),
};

/** The uid of `name`. */
const uidOf = (name: string): number => Number(execFileSync('id', ['-u', name], { encoding: 'utf8' }).trim());

describe('places another account can change are never a context’s own', () => {
  let bed: Testbed;
  let router: Router;
  let attacker: Context;
  let attackerUid: number;
  /** A directory of the test's own (0755, root's); what the attacker owns is made in it. */
  let base: string;

  before(async () => {
    bed = await startTestbed();
    router = new Router();
    attacker = await router.ssh(sshLogin(bed, bed.accounts.key));
    attackerUid = uidOf(bed.accounts.key.name);
    base = mkdtempSync('/tmp/tendril-places-');
    chmodSync(base, 0o755);
  });
  after(async () => {
    await router?.shutdown();
    if (base) rmSync(base, { recursive: true, force: true });
    await bed?.stop();
  });

  /** A directory the attacker owns, with `mode`. */
  const attackerDirectory = (name: string, mode = 0o777): string => {
    const path = join(base, name);
    mkdirSync(path);
    chownSync(path, attackerUid, attackerUid);
    chmodSync(path, mode);
    return path;
  };

  /** A directory of the test's own (root's) with `mode`: 0777 is one any account may rename entries in. */
  const ownDirectory = (name: string, mode: number): string => {
    const path = join(base, name);
    mkdirSync(path);
    chmodSync(path, mode);
    return path;
  };

  /**
   * Which directories on the way to `path` the attacker can rename (each
   * one it could, it renamed back at once).
   */
  const renamable = (path: string): Promise<string[]> =>
    attacker.call((target: string) => {
      const fs = require('node:fs') as typeof import('node:fs');
      const found: string[] = [];
      for (let dir = require('node:path').dirname(target); dir !== '/'; dir = require('node:path').dirname(dir)) {
        try {
          fs.renameSync(dir, `${dir}.aside`);
          fs.renameSync(`${dir}.aside`, dir);
          found.push(dir);
        } catch {
          // Not the attacker's to rename: as it should be.
        }
      }
      return found;
    }, path);

  /** A file the attacker owns, with `mode`. */
  const attackerFile = (path: string, text: string, mode: number): string => {
    writeFileSync(path, text);
    chownSync(path, attackerUid, attackerUid);
    chmodSync(path, mode);
    return path;
  };

  /**
   * The target account reached with su from a shell of the attacker's
   * whose environment adds `env` (and whose working directory is `cwd`).
   */
  const suFromAttacker = async (env: Record<string, string>, cwd?: string): Promise<Context> => {
    const shell = await router.local({
      via: attacker,
      env: { PATH: '/usr/bin:/bin', HOME: `/home/${bed.accounts.key.name}`, ...env },
      ...(cwd !== undefined && { cwd }),
    });
    return router.su({ via: shell, username: bed.accounts.target.name, password: bed.accounts.target.password });
  };

  /** The lines of `file` (none when it is missing). */
  const lines = (file: string): string[] =>
    existsSync(file)
      ? readFileSync(file, 'utf8')
          .split('\n')
          .filter((line) => line !== '')
      : [];

  test('the rule, in Node and in the shell alike, on places of root, of this account and of another', async () => {
    const rules = ownDirectory('rules', 0o755);
    const make = (name: string, mode: number, uid = 0): void => {
      mkdirSync(join(rules, name));
      chmodSync(join(rules, name), mode);
      chownSync(join(rules, name), uid, uid);
    };
    const link = (name: string, to: string, uid = 0): void => {
      symlinkSync(to, join(rules, name));
      lchownSync(join(rules, name), uid, uid);
    };
    make('ok', 0o755);
    writeFileSync(join(rules, 'ok', 'file'), '', { mode: 0o644 });
    writeFileSync(join(rules, 'ok', 'open-file'), '');
    chmodSync(join(rules, 'ok', 'open-file'), 0o666);
    make('theirs', 0o755, attackerUid);
    make('theirs/sub', 0o755);
    make('open', 0o777);
    make('group', 0o775);
    make('sticky', 0o1777);
    make('sticky/mine', 0o700);
    make('sticky/theirs', 0o700, attackerUid);
    link('sticky/their-link', '/usr', attackerUid);
    link('into-theirs', 'theirs/sub');
    link('to-ok', 'ok');
    // [path, trusted by root, trusted by the attacker's account]
    const cases: [string, boolean, boolean][] = [
      ['ok', true, true],
      ['ok/file', true, true],
      ['ok/open-file', false, false],
      ['theirs', false, true],
      ['theirs/sub', false, true],
      ['open', false, false],
      ['group', false, false],
      ['sticky', true, true],
      ['sticky/mine', true, true],
      ['sticky/theirs', false, true],
      ['sticky/their-link', false, true],
      ['into-theirs', false, true],
      ['to-ok/../ok/file', true, true],
      ['ok/missing', false, false],
    ];
    const script = `${PLACES_PRELUDE} ${PLACES_FUNCTIONS} for p do if _s "$p"; then echo yes; else echo no; fi; done`;
    const paths = cases.map(([name]) => join(rules, name));
    const shellSays = (run: (argv: string[]) => string): boolean[] =>
      run(['/bin/sh', '-c', script, 'sh', ...paths])
        .trim()
        .split('\n')
        .map((word) => word === 'yes');
    const asRoot = shellSays((argv) => execFileSync(argv[0] as string, argv.slice(1), { encoding: 'utf8' }));
    const asAttacker = shellSays((argv) =>
      execFileSync(
        'setpriv',
        ['--reuid', String(attackerUid), '--regid', String(attackerUid), '--clear-groups', ...argv],
        {
          encoding: 'utf8',
        },
      ),
    );
    cases.forEach(([name, root, theirs], i) => {
      const path = paths[i] as string;
      assert.equal('real' in checkPlace(path, { uid: 0 }), root, `Node, for root: ${name}`);
      assert.equal('real' in checkPlace(path, { uid: attackerUid }), theirs, `Node, for the attacker: ${name}`);
      assert.equal(asRoot[i], root, `the shell, as root: ${name}`);
      assert.equal(asAttacker[i], theirs, `the shell, as the attacker: ${name}`);
    });
    // A place that does not exist yet passes only where nobody else could make it.
    assert.ok('real' in checkPlace(join(rules, 'ok', 'missing'), { uid: 0, allowMissing: true }));
    assert.ok('problem' in checkPlace(join(rules, 'sticky', 'missing'), { uid: 0, allowMissing: true }));
  });

  test('a hostile environment costs a bounded time and says a bounded amount', () => {
    // 2 MiB of PATH (as much as the kernel passes), half of it entries of the attacker's.
    const theirs = attackerDirectory('many', 0o755);
    const entries = Array.from({ length: 100_000 }, (_, i) => (i % 2 ? `${theirs}/${i}` : `/no-such-${i}`));
    const env: NodeJS.ProcessEnv = { PATH: entries.join(':'), TMP: `${theirs}/${'x'.repeat(100_000)}` };
    const started = performance.now();
    const dropped = distrustInheritedPlaces(env, { uid: 0 });
    const took = performance.now() - started;
    assert.ok(took < 2000, `took ${took} ms`);
    const said = dropped.map(({ text }) => text).join('; ');
    assert.ok(said.length < 16 * 1024, `said ${said.length} characters`);
    assert.match(said, /and \d+ more/);
    assert.equal(env.TMP, undefined);
    assert.ok(!(env.PATH as string).includes(theirs), 'an entry of the attacker’s was kept');
  });

  test("a list entry that does not exist, in a directory anyone may write (npm's /tmp/node_modules/.bin), goes without a word", () => {
    const missing = `/tmp/tendril-no-such-${process.pid}/node_modules/.bin`;
    const theirs = attackerDirectory('listed', 0o755);
    const env: NodeJS.ProcessEnv = { PATH: `/usr/bin:${missing}:${theirs}`, NODE_PATH: missing };
    const dropped = distrustInheritedPlaces(env, { uid: 0 });
    assert.equal(env.PATH, '/usr/bin', 'both are taken out');
    assert.equal(env.NODE_PATH, undefined);
    const said = new Map(dropped.map(({ variable, text }) => [variable, text]));
    // The one another account owns is said; the missing one is not, though its variable is named as changed.
    assert.match(said.get('PATH') ?? '', new RegExp(`^from PATH: ${theirs} \\(`));
    assert.ok(!(said.get('PATH') ?? '').includes(missing), said.get('PATH'));
    assert.equal(said.get('NODE_PATH'), '');
  });

  test("su keeping the attacker's TMP: the context tmpdir is made where the attacker cannot swap it", async () => {
    // Sticky, so that the attacker's own context keeps it (it is the attacker's alone), and anyone may write in it.
    const evil = attackerDirectory('tmp', 0o1777);
    // glibc drops TMPDIR for su, which is set-user-ID; TMP and TEMP, which os.tmpdir() reads next, stay.
    const victim = await suFromAttacker({ TMPDIR: evil, TMP: evil });
    const dir = await victim.tmpdir();
    // The attacker renames the directory aside and puts its own in its place, with a file waiting to be written.
    const swapped = await attacker.call((path: string) => {
      const fs = require('node:fs') as typeof import('node:fs');
      try {
        fs.renameSync(path, `${path}.aside`);
        fs.mkdirSync(path);
        fs.chmodSync(path, 0o777);
        fs.writeFileSync(`${path}/secret`, '');
        fs.chmodSync(`${path}/secret`, 0o666);
        return 'swapped';
      } catch (error) {
        return (error as NodeJS.ErrnoException).code;
      }
    }, dir);
    // The victim writes a secret where its tmpdir is, as a program would.
    await victim.call((path: string) => {
      require('node:fs').writeFileSync(`${path}/secret`, 'the secret');
    }, dir);
    const read = await attacker.call((path: string) => {
      try {
        return require('node:fs').readFileSync(`${path}/secret`, 'utf8') as string;
      } catch (error) {
        return (error as NodeJS.ErrnoException).code;
      }
    }, dir);
    assert.notEqual(read, 'the secret', `the attacker read the secret from ${dir} (its swap: ${swapped})`);
    assert.notEqual(swapped, 'swapped', `the attacker swapped ${dir}`);
    assert.ok(!dir.startsWith(`${evil}/`), `${dir} is in the attacker's TMPDIR`);
    await victim.shutdown();
  });

  test('the context tmpdir passes over a TMPDIR another account owns, whenever it is set', async () => {
    const evil = attackerDirectory('tmp-set-later', 0o1777);
    const context = await router.local();
    // Set by code in the context (the environment it started with was judged as it started).
    const dir = await context.call((path: string) => {
      process.env.TMPDIR = path;
      return require('tendril/child').thisContext().tmpdir() as string;
    }, evil);
    assert.ok(!dir.startsWith(`${evil}/`), `${dir} is in a directory another account owns`);
    assert.deepEqual(await renamable(join(dir, 'x')), [], `another account could swap ${dir}`);
    await context.shutdown();
  });

  test('a runtime cache below a directory another account may rename is passed over, by the shell and by an intermediate', async () => {
    // XDG_CACHE_HOME names a directory of this account's (root's, 0700) in one any account may rename entries in.
    const shared = ownDirectory('shared-runtimes', 0o777);
    const xdg = join(shared, 'xdg');
    mkdirSync(xdg, { mode: 0o700 });
    const home = ownDirectory('home-runtimes', 0o700);
    const tiny = tinyRuntimePackage(base, VERSION);
    const shipping = new Router({
      nodeRuntime: { directory: join(base, 'store'), tarballs: [tiny], version: VERSION },
    });
    try {
      const env = { PATH: '/usr/bin:/bin', HOME: home, XDG_CACHE_HOME: xdg };
      // The shell keeps the runtime it is sent, and runs it from there.
      const shipped = await shipping.connect(nodeless, { nodeCandidates: ['/nonexistent/node'], env });
      assert.equal(await shipped.call(() => process.env.TENDRIL_TINY_RUNTIME), VERSION);
      // An intermediate running its own Node keeps the package for its children in its cache too.
      const intermediate = await shipping.local({ env });
      const child = await shipping.connect(shellModule.shell as ConnectionMethod<LocalOptions>, {
        via: intermediate,
        nodeCandidates: ['/nonexistent/node'],
        runtimeDirectory: join(base, 'grandchild-runtimes'),
      });
      assert.equal(await child.call(() => process.env.TENDRIL_TINY_RUNTIME), VERSION);
      // Where the shell and the intermediate kept it (the tiny runtime's node is a script that runs this Node).
      const kept = execFileSync('find', [base, '-path', `*/${VERSION}-x64-*`, '-name', 'node*'], { encoding: 'utf8' })
        .trim()
        .split('\n');
      assert.ok(kept.length >= 3, kept.join(', '));
      for (const path of kept) {
        assert.ok(!path.startsWith(`${shared}/`), `${path} was kept in a directory any account may rename`);
        assert.deepEqual(await renamable(path), [], `another account could swap ${path}`);
      }
    } finally {
      await shipping.shutdown();
    }
  });

  test("the master's runtime store below a directory another account may rename is refused, not shipped from", async () => {
    const shared = ownDirectory('shared-store', 0o777);
    const tiny = tinyRuntimePackage(base, VERSION);
    const shipping = new Router({
      nodeRuntime: { directory: join(shared, 'store'), tarballs: [tiny], version: VERSION },
    });
    try {
      await assert.rejects(
        shipping.connect(nodeless, {
          nodeCandidates: ['/nonexistent/node'],
          runtimeDirectory: join(base, 'unused-runtimes'),
        }),
        (error: unknown) =>
          error instanceof BootstrapError &&
          error.message.includes(`the master's runtime store ${join(shared, 'store')}`) &&
          error.message.includes(`${shared} may be written by group or others`),
      );
    } finally {
      await shipping.shutdown();
    }
  });

  test('the target code cache is neither written nor taken below a directory another account may rename', async () => {
    // HOME names a directory of this account's (0700) in one any account may rename entries in.
    const shared = ownDirectory('shared-code-cache', 0o777);
    const home = join(shared, 'home');
    mkdirSync(home, { mode: 0o700 });
    const cached = new Router({ targetCodeCache: true });
    // `node` from PATH, not the master's very binary by name: the parent sends no cache, the child looks for one.
    const start = async () => {
      const context = await cached.local({ env: { PATH: '/usr/bin:/bin', HOME: home }, nodePath: 'node' });
      assert.equal(await context.call(() => 6 * 7), 42);
      await context.shutdown();
    };
    try {
      await start();
      assert.ok(
        !existsSync(join(home, '.cache', 'tendril')),
        'a code cache was written where another account could swap it',
      );
      // What that account could put there by renaming in a tree of root's it was given: a cache of other code.
      const marker = join(base, 'planted-code-cache-ran');
      const planted = plantedCoreCache(marker);
      mkdirSync(join(home, '.cache', 'tendril'), { recursive: true, mode: 0o700 });
      writeFileSync(join(home, '.cache', 'tendril', planted.name), planted.data, { mode: 0o600 });
      await start();
      assert.ok(!existsSync(marker), 'the planted code cache ran');
    } finally {
      await cached.shutdown();
    }
  });

  test("a known_hosts file another account can change vouches for no host key, and is never written through a link of that account's", async () => {
    const theirs = attackerDirectory('ssh', 0o755);
    // The attacker vouches for the key of its choosing (here the test bed's own, so that trusting it would connect).
    const vouching = attackerFile(join(theirs, 'known_hosts'), readFileSync(bed.knownHosts, 'utf8'), 0o644);
    await assert.rejects(
      router.ssh({ ...sshLogin(bed), knownHostsFile: vouching }),
      (error: unknown) =>
        error instanceof HostKeyError &&
        error.message.includes(`${vouching} was not read`) &&
        /is owned by another account \(uid \d+\)/.test(error.message),
    );
    // accept-new records a new key: never through a link the attacker put where the file would be.
    const victim = join(base, 'victim-file');
    writeFileSync(victim, 'root’s own\n', { mode: 0o600 });
    symlinkSync(victim, join(theirs, 'record'));
    lchownSync(join(theirs, 'record'), attackerUid, attackerUid);
    const accepted = await router.ssh({
      ...sshLogin(bed),
      knownHostsFile: join(theirs, 'record'),
      hostKeyPolicy: 'accept-new',
    });
    await accepted.shutdown();
    assert.equal(readFileSync(victim, 'utf8'), 'root’s own\n', 'the key was appended to the file the link named');
  });

  test("su keeping the attacker's PATH and NVM_BIN: the target account never runs the attacker's node", async () => {
    const bin = attackerDirectory('bin', 0o755);
    const ran = attackerFile(join(base, 'bin', 'ran'), '', 0o666);
    // A node that notes who ran it, then is the real one, so the start goes on either way.
    attackerFile(join(bin, 'node'), `#!/bin/sh\nid -un >> ${ran}\nexec ${process.execPath} "$@"\n`, 0o755);
    const victim = await suFromAttacker({ PATH: `${bin}:/usr/bin:/bin`, NVM_BIN: bin });
    const [user, execPath, path] = await victim.call(() => [
      require('node:os').userInfo().username as string,
      process.execPath,
      process.env.PATH as string,
    ]);
    assert.equal(user, bed.accounts.target.name);
    assert.deepEqual(lines(ran), [], `the attacker's node ran (as ${lines(ran).join(', ')})`);
    assert.ok(!execPath.startsWith(`${bin}/`), execPath);
    // What the context itself runs later is not looked up there either.
    assert.ok(!path.split(':').includes(bin), `the context's PATH still has ${bin}: ${path}`);
    assert.equal((await victim.exec('id', ['-un'])).stdout.trim(), bed.accounts.target.name);
    await victim.shutdown();
  });

  test("su with the attacker's BASH_ENV, SHELLOPTS and PS4, NODE_OPTIONS and working directory: none of it runs as the target", async () => {
    const home = attackerDirectory('home', 0o755);
    const ran = attackerFile(join(home, 'ran'), '', 0o666);
    attackerFile(join(home, 'bash-env'), `id -un | sed 's/^/BASH_ENV /' >> ${ran}\n`, 0o644);
    attackerFile(
      join(home, 'require.js'),
      `require('fs').appendFileSync(${JSON.stringify(ran)}, 'NODE_OPTIONS ' + require('os').userInfo().username + '\\n');\n`,
      0o644,
    );
    mkdirSync(join(home, 'node_modules', 'planted'), { recursive: true });
    attackerFile(
      join(home, 'node_modules', 'planted', 'index.js'),
      `require('fs').appendFileSync(${JSON.stringify(ran)}, 'module ' + require('os').userInfo().username + '\\n');\n`,
      0o644,
    );
    const victim = await suFromAttacker(
      {
        BASH_ENV: join(home, 'bash-env'),
        SHELLOPTS: 'xtrace',
        PS4: `$(id -un | sed 's/^/PS4 /' >> ${ran})`,
        NODE_OPTIONS: `--require ${join(home, 'require.js')}`,
        'BASH_FUNC_sh%%': `() { id -un | sed 's/^/function /' >> ${ran}; }`,
        // Where the context's container tools would look for their daemon and their configuration.
        DOCKER_HOST: `unix://${join(home, 'docker.sock')}`,
        KUBECONFIG: join(home, 'kubeconfig'),
        DOCKER_CONFIG: home,
      },
      home,
    );
    const [user, cwd, env] = await victim.call(() => [
      require('node:os').userInfo().username as string,
      process.cwd(),
      Object.keys(process.env).filter((name) =>
        /^(BASH_ENV|SHELLOPTS|PS4|NODE_OPTIONS|BASH_FUNC_|DOCKER_HOST|KUBECONFIG$|DOCKER_CONFIG)/.test(name),
      ),
    ]);
    assert.equal(user, bed.accounts.target.name);
    // A bare name resolved from the working directory would now find the attacker's package.
    const planted = await victim.call(() => {
      try {
        return require.resolve('planted', { paths: [process.cwd()] });
      } catch {
        return 'not found';
      }
    });
    // (The attacker's own shell ran its NODE_OPTIONS, as its own: only what ran as the target counts.)
    const asTarget = lines(ran).filter((line) => line.endsWith(` ${bed.accounts.target.name}`));
    assert.deepEqual(asTarget, [], `the target ran what the attacker set: ${asTarget.join('; ')}`);
    assert.deepEqual(env, []);
    assert.notEqual(cwd, home, 'the context kept the attacker’s directory as its own');
    assert.equal(planted, 'not found');
    await victim.shutdown();
  });
});
