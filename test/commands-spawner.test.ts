import assert from 'node:assert/strict';
import { chmodSync, mkdirSync, mkdtempSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { CommandError, type Context, ContextDisconnectedError, Router } from 'tendril';
import { isAlive, sleep, waitFor, waitGone, withLimit } from './support/procs.js';
import { sshLogin, startTestbed, type Testbed } from './support/testbed.js';

// The command spawner (src/toolkit/commands/spawner.ts): commands without
// input go through a Perl process once it is ready. Each behaviour is
// checked on a context using it and on one kept on Node's spawn (its
// PATH has no perl), and the two must agree.

/** The pid of the process that started a command: the spawner's, or the context's own. */
async function parentOf(context: Context): Promise<number> {
  return Number((await context.exec('/bin/sh', ['-c', 'echo $PPID'])).stdout);
}

/** Waits until the context's commands go through its spawner; resolves with the spawner's pid. */
async function spawnerOf(context: Context): Promise<number> {
  const own = await context.call(() => process.pid);
  const started = Date.now();
  for (;;) {
    const parent = await parentOf(context);
    if (parent !== own) return parent;
    if (Date.now() - started > 10_000) throw new Error('the spawner never took over the commands');
    await sleep(20);
  }
}

/** The command name of a process, from /proc on the test host (the ssh target is this host too). */
const commOf = (pid: number) => readFileSync(`/proc/${pid}/comm`, 'utf8').trim();

describe('the command spawner', { timeout: 300_000 }, () => {
  let bed: Testbed;
  let router: Router;
  let scratch: string;

  before(async () => {
    bed = await startTestbed();
    router = new Router();
    scratch = mkdtempSync(join(tmpdir(), 'tendril-spawner-'));
    // The ssh account writes here too.
    chmodSync(scratch, 0o1777);
    // A PATH with the shell the local method starts Node with, and no perl.
    mkdirSync(join(scratch, 'bin'));
    symlinkSync('/bin/sh', join(scratch, 'bin', 'sh'));
  });
  after(async () => {
    await router.shutdown();
    await bed.stop();
    rmSync(scratch, { recursive: true, force: true });
  });

  const kinds: Record<string, (name: string) => Promise<Context>> = {
    local: (name) => router.local({ name }),
    ssh: (name) => router.ssh({ name, ...sshLogin(bed) }),
  };

  for (const [kind, start] of Object.entries(kinds)) {
    describe(`in a ${kind} context`, () => {
      let context: Context;
      /** On Node's spawn: a local context whose PATH has no perl (commands named by their path). */
      let plain: Context;
      let spawnerPid: number;
      before(async () => {
        context = await start(`spawner-${kind}`);
        plain = await router.local({ name: `plain-${kind}`, env: { PATH: join(scratch, 'bin') } });
        spawnerPid = await spawnerOf(context);
      });
      const both = () => [context, plain] as const;

      test('commands go through a perl spawner, and without perl on PATH through Node', async () => {
        assert.equal(commOf(spawnerPid), 'perl');
        await plain.exec('/bin/true');
        await sleep(100);
        assert.equal(await parentOf(plain), await plain.call(() => process.pid));
      });

      test('argv: spaces, quotes, newlines, backslashes, empty and non-ASCII arguments, as given', async () => {
        const args = ['a b', `"q" 'r'`, 'line\nnext', 'back\\slash', '', '$HOME *', 'é ☃', '-c'];
        const script = 'for a; do printf "[%s]" "$a"; done';
        const expected = args.map((arg) => `[${arg}]`).join('');
        for (const c of both()) {
          assert.equal((await c.exec('/bin/sh', ['-c', script, 'sh', ...args])).stdout, expected);
          assert.equal((await c.exec('/bin/echo', ['a  b'])).stdout, 'a  b');
        }
        // shell: true joins file and args with spaces for /bin/sh -c, as Node does.
        assert.equal((await context.exec('echo', ['$((2+3))', '"x  y"'], { shell: true })).stdout, '5 x  y');
        assert.equal((await context.exec('echo $0', [], { shell: '/bin/bash' })).stdout, '/bin/bash');
      });

      test('env: exactly the one given with extendEnv: false, in order; else the context environment plus it', async () => {
        const env = { ZED: '1', ALPHA: 'x y\nz', EMPTY: '' };
        for (const c of both()) {
          const alone = await c.exec('/usr/bin/env', { env, extendEnv: false });
          assert.equal(alone.stdout, 'ZED=1\nALPHA=x y\nz\nEMPTY=');
          const added = await c.exec('/usr/bin/env', ['-0'], { env: { ADDED: 'yes\n' }, stripFinalNewline: false });
          const own = await c.call(() => Object.entries(process.env).map(([name, value]) => `${name}=${value}`));
          assert.deepEqual(added.stdout.split('\0').slice(0, -1).sort(), [...own, 'ADDED=yes\n'].sort());
        }
      });

      test('env: each command gets its own, from one command to the next, and its PATH finds its program', async () => {
        // The spawner keeps the last command's environment to fork the next
        // from: a change must reach the next command, and the one after.
        const bin = join(scratch, `own-bin-${kind}`);
        mkdirSync(bin, { recursive: true });
        writeFileSync(join(bin, 'hello-own'), '#!/bin/sh\necho "hello $WHO"\n', { mode: 0o755 });
        chmodSync(bin, 0o755);
        const own = { PATH: `${bin}:/usr/bin:/bin`, WHO: 'own' };
        for (const c of both()) {
          const seen: string[] = [];
          const envs: Record<string, string>[] = [
            { WHO: 'a' },
            { WHO: 'b', MORE: '1' },
            { WHO: 'a' },
            {},
            { WHO: 'a' },
          ];
          for (const env of envs) seen.push((await c.exec('/usr/bin/env', { env, extendEnv: false })).stdout);
          assert.deepEqual(seen, ['WHO=a', 'WHO=b\nMORE=1', 'WHO=a', '', 'WHO=a']);
          assert.equal((await c.exec('hello-own', { env: own, extendEnv: false })).stdout, 'hello own');
          const missing = await c.exec('hello-own').then(
            () => assert.fail('hello-own was found on the context PATH'),
            (error: unknown) => error,
          );
          assert.ok(missing instanceof CommandError);
          assert.match(missing.message, /spawn hello-own ENOENT/);
          assert.equal((await c.exec('hello-own', { env: own, extendEnv: false })).stdout, 'hello own');
        }
      });

      test('cwd, and a missing program, a missing cwd or a cwd that is a file fail as with Node', async () => {
        const file = join(scratch, `file-${kind}`);
        writeFileSync(file, '');
        const failures: string[][] = [];
        for (const c of both()) {
          assert.equal((await c.exec('/bin/pwd', { cwd: '/tmp' })).stdout, '/tmp');
          const messages: string[] = [];
          for (const [program, cwd] of [
            ['/nonexistent/program', undefined],
            ['/bin/true', '/nonexistent/dir'],
            ['/bin/true', file],
            [file, undefined],
          ] as const) {
            const error = await c.exec(program, { cwd }).then(
              () => assert.fail(`${program} ran`),
              (error: unknown) => error,
            );
            assert.ok(error instanceof CommandError);
            assert.equal(error.exitCode, undefined);
            messages.push(error.message.replace(/^[^:]*: /, ''));
          }
          failures.push(messages);
        }
        assert.deepEqual(failures[0], failures[1]);
        assert.match(failures[0]?.[0] ?? '', /spawn \/nonexistent\/program ENOENT/);
        assert.match(failures[0]?.[2] ?? '', /spawn ENOTDIR/);
        assert.match(failures[0]?.[3] ?? '', /EACCES/);
      });

      test('exit codes and signals: 130 and SIGINT stay apart', async () => {
        for (const c of both()) {
          for (const code of [0, 1, 130, 255]) {
            const result = await c.exec('/bin/sh', ['-c', `exit ${code}`], { reject: false });
            assert.equal(result.exitCode, code);
            assert.equal(result.signal, undefined);
          }
          for (const signal of ['SIGTERM', 'SIGKILL', 'SIGINT']) {
            const result = await c.exec('/bin/sh', ['-c', `kill -${signal.slice(3)} $$`], { reject: false });
            assert.equal(result.signal, signal);
            assert.equal(result.exitCode, undefined);
          }
        }
      });

      test('a timeout kills the process group: the command and the sleep it started both go', async () => {
        for (const c of both()) {
          const command = c.exec('/bin/sh', ['-c', 'echo $$; /bin/sleep 1000 & echo $!; wait'], {
            timeout: 500,
            reject: false,
          });
          const pids: number[] = [];
          for await (const line of command.lines()) {
            pids.push(Number(line));
            if (pids.length === 2) break;
          }
          const result = await command;
          assert.equal(result.timedOut, true);
          assert.equal(result.signal, 'SIGTERM');
          await waitGone(pids, 5000);
          // Each command leads a process group and session of its own.
          const [sid, pgid] = (await c.exec('/bin/sh', ['-c', '/bin/ps -o sid=,pgid= -p $$'])).stdout
            .trim()
            .split(/\s+/);
          assert.equal(sid, pgid);
        }
      });

      test('output under flow control: a large output whole, and a reader that stops blocks the command', async () => {
        for (const c of both()) {
          const big = await c.exec('/bin/sh', ['-c', '/usr/bin/head -c 20000000 /dev/zero; echo end >&2'], {
            encoding: 'buffer',
          });
          assert.equal(big.stdout.length, 20_000_000);
          assert.equal(big.stderr.toString(), 'end');
          const progress = join(scratch, `progress-${kind}-${c === context ? 'spawner' : 'plain'}`);
          const writer = c.exec(
            '/bin/sh',
            ['-c', `i=0; while :; do /usr/bin/head -c 65536 /dev/zero; i=$((i+1)); echo $i > ${progress}; done`],
            { buffer: false, timeout: 20_000, reject: false },
          );
          const reader = writer.stdout[Symbol.asyncIterator]();
          await reader.next();
          const blocks = () => {
            try {
              return Number(readFileSync(progress, 'utf8') || 0);
            } catch {
              return 0;
            }
          };
          await waitFor(() => blocks() > 0, 5000);
          // Stalled: the count stops moving, well short of what 2 s of writing would reach.
          let last = -1;
          for (let i = 0; i < 40 && blocks() !== last; i++) {
            last = blocks();
            await sleep(250);
          }
          assert.equal(blocks(), last, 'the writer stopped');
          assert.ok(last < 200, `${last} blocks of 64 KiB written unread`);
          writer.kill('SIGKILL');
          await reader.return?.();
          assert.equal((await withLimit(writer, 10_000)).signal, 'SIGKILL');
        }
      });

      test('a slow reader gets every byte of a command that has already exited, stdout and stderr', async () => {
        // The command ends while output it wrote still waits for the reader:
        // its end must not go out before that output does.
        for (const c of both()) {
          for (let round = 0; round < 2; round++) {
            const command = c.exec('/bin/sh', ['-c', '/usr/bin/head -c 3000000 /dev/zero; echo done >&2'], {
              buffer: false,
              encoding: 'buffer',
            });
            let bytes = 0;
            const errors: Buffer[] = [];
            const stderr = (async () => {
              for await (const chunk of command.stderr) errors.push(chunk);
            })();
            for await (const chunk of command.stdout) {
              bytes += chunk.length;
              await sleep(15);
            }
            await stderr;
            await command;
            assert.equal(bytes, 3_000_000, `round ${round}`);
            assert.equal(Buffer.concat(errors).toString(), 'done\n');
          }
        }
      });

      test('20 commands at once, each with its own output and exit code', async () => {
        for (const c of both()) {
          const results = await Promise.all(
            Array.from({ length: 20 }, (_, i) =>
              c.exec(
                '/bin/sh',
                ['-c', `echo out$1; echo err$1 >&2; /bin/sleep 0.0$(($1 % 5)); exit $1`, 'sh', String(i)],
                {
                  reject: false,
                },
              ),
            ),
          );
          results.forEach((result, i) => {
            assert.equal(result.stdout, `out${i}`);
            assert.equal(result.stderr, `err${i}`);
            assert.equal(result.exitCode, i);
          });
        }
      });

      test('a spawner that dies: its running command ends killed, and later commands run on Node', async () => {
        const victim = await start(`spawner-victim-${kind}`);
        const pid = await spawnerOf(victim);
        const running = victim.exec('/bin/sh', ['-c', 'echo $$; exec /bin/sleep 1000'], { reject: false });
        let leader = 0;
        for await (const line of running.lines()) {
          leader = Number(line);
          break;
        }
        assert.ok(isAlive(leader));
        process.kill(pid, 'SIGKILL');
        const result = await withLimit(running, 10_000);
        assert.equal(result.signal, 'SIGKILL');
        await waitGone([leader], 5000);
        assert.equal((await victim.exec('/bin/echo', ['still'])).stdout, 'still');
        assert.equal(await parentOf(victim), await victim.call(() => process.pid));
        await victim.shutdown();
      });

      test('a context killed with SIGKILL leaves none of its commands behind, what a finished leader left included', async () => {
        const victim = await start(`spawner-killed-${kind}`);
        await spawnerOf(victim);
        // The leader exits at once, its member holds the output open; the other writes without pause.
        const lingering = victim.exec('/bin/sh', ['-c', '/bin/sleep 1000 & echo $!'], { reject: false });
        const flooding = victim.exec('/bin/sh', ['-c', 'echo $$; exec /usr/bin/yes'], { reject: false });
        const firstLine = async (command: typeof lingering) => {
          for await (const line of command.lines()) return Number(line);
          return 0;
        };
        const pids = await Promise.all([firstLine(lingering), firstLine(flooding)]);
        for (const pid of pids) assert.ok(isAlive(pid), `process ${pid} runs`);
        const ends = [lingering, flooding].map((command) =>
          command.then(
            () => 'ended',
            (error: unknown) => error,
          ),
        );
        process.kill(await victim.call(() => process.pid), 'SIGKILL');
        await waitGone(pids, 10_000);
        for (const end of await Promise.all(ends)) assert.ok(end instanceof ContextDisconnectedError, String(end));
      });
    });
  }

  test('commands start as with Node once the directory the context started in has been removed', async () => {
    const results: string[][] = [];
    for (const env of [undefined, { ...process.env, PATH: join(scratch, 'bin') }]) {
      const home = mkdtempSync(join(scratch, 'gone-'));
      const context = await router.local({ name: `spawner-gone-${results.length}`, cwd: home, env });
      try {
        if (env === undefined) await spawnerOf(context);
        rmSync(home, { recursive: true });
        results.push([
          (await context.exec('/bin/echo', ['runs'])).stdout,
          (await context.exec('/bin/pwd', { cwd: '/tmp' })).stdout,
          (await context.exec('/bin/sh', ['-c', '/bin/ls -a | /usr/bin/wc -l'])).stdout.trim(),
        ]);
      } finally {
        await context.shutdown();
      }
    }
    assert.deepEqual(results[0], ['runs', '/tmp', '0']);
    assert.deepEqual(results[0], results[1]);
  });
});
