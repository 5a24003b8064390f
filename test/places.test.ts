// Places a context takes from an environment another account gave it
// (issue 40, finding 2 and its class): the attacker is a real second
// account on this machine (the test bed's key account, logged in over
// SSH), which starts `su` to the target account with an environment of
// its choosing, as `su` without -l keeps it, and then plays against what
// the target's context makes there.
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { chmodSync, chownSync, existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { type Context, Router } from 'tendril';
import { sshLogin, startTestbed, type Testbed } from './support/testbed.js';

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
      },
      home,
    );
    const [user, cwd, env] = await victim.call(() => [
      require('node:os').userInfo().username as string,
      process.cwd(),
      Object.keys(process.env).filter((name) => /^(BASH_ENV|SHELLOPTS|PS4|NODE_OPTIONS|BASH_FUNC_)/.test(name)),
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
