import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { readFileSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { Readable } from 'node:stream';
import { after, before, describe, test } from 'node:test';
import {
  type Command,
  CommandError,
  type Context,
  ContextDisconnectedError,
  InvalidOptionError,
  type OutputLine,
  Router,
} from 'tendril';
import { nodeBinary } from './support/nodes.js';
import { isAlive, ROOT, waitFor, waitGone, withLimit } from './support/procs.js';
import { sshLogin, startTestbed, type Testbed } from './support/testbed.js';

/** A shell that prints its own pid and that of a `sleep` it started in the background (same process group), then waits. */
const SHELL_AND_SLEEPER = ['-c', 'echo $$; sleep 1000 & echo $!; wait'];

/** The first two lines of a command: the pids SHELL_AND_SLEEPER prints. */
async function pidsOf(command: Command<string>): Promise<number[]> {
  const pids: number[] = [];
  for await (const line of command.lines()) {
    pids.push(Number(line));
    if (pids.length === 2) break;
  }
  for (const pid of pids) assert.ok(isAlive(pid), `process ${pid} runs`);
  return pids;
}

/**
 * Writes 64 KiB blocks to stdout for ever, and after each one records its
 * pid and the bytes written so far in the file named by its argument
 * (replaced whole, so a reader never sees it half written).
 */
const WRITER = `
import os, sys
total = 0
block = b'y' * 65536
while True:
    total += os.write(1, block)
    with open(sys.argv[1] + '.new', 'w') as f:
        f.write('%d %d' % (os.getpid(), total))
    os.replace(sys.argv[1] + '.new', sys.argv[1])
`;

/** [pid, bytes written] from the WRITER's record, or undefined before its first write. */
function writerRecord(file: string): [number, number] | undefined {
  try {
    const [pid, total] = readFileSync(file, 'utf8').split(' ').map(Number);
    return pid && total ? [pid, total] : undefined;
  } catch {
    return undefined;
  }
}

/** True when `pid` sleeps inside write(2) on its fd 1: blocked on a full pipe. */
function blockedWritingStdout(pid: number): boolean {
  try {
    const state = readFileSync(`/proc/${pid}/stat`, 'latin1').split(') ')[1]?.[0];
    const syscall = readFileSync(`/proc/${pid}/syscall`, 'latin1').split(' ');
    return state === 'S' && syscall[0] === '1' && syscall[1] === '0x1';
  } catch {
    return false;
  }
}

/** SIGKILLs `pid` if it is still there (a test's own leftovers, when it failed). */
function reap(pid: number): void {
  try {
    if (pid > 0 && isAlive(pid)) process.kill(pid, 'SIGKILL');
  } catch {
    // Gone already.
  }
}

describe('commands', { timeout: 300_000 }, () => {
  let bed: Testbed;
  let router: Router;

  before(async () => {
    bed = await startTestbed();
    router = new Router();
  });
  after(async () => {
    await router.shutdown();
    await bed.stop();
  });

  const ssh = (name: string) => router.ssh({ name, ...sshLogin(bed) });

  /** Starts a context of each kind the commands are tested in. */
  const kinds: Record<string, (name: string) => Promise<Context>> = {
    local: (name) => router.local({ name }),
    'Node 12': (name) => router.local({ name, nodePath: nodeBinary(12) }),
    ssh,
    'via ssh (a grandchild)': async (name) => router.local({ name, via: await ssh(`${name}-ssh`) }),
  };

  for (const [kind, start] of Object.entries(kinds)) {
    describe(`in a ${kind} context`, () => {
      let context: Context;
      before(async () => {
        context = await start(`commands-${kind.split(' ')[0]}`);
      });

      test('runs a program with an argument vector, no shell: stdout, stderr, exit code, one final newline stripped', async () => {
        const result = await context.exec('sh', ['-c', 'echo "$1"; echo err >&2', 'sh', '$HOME a b']);
        assert.equal(result.stdout, '$HOME a b');
        assert.equal(result.stderr, 'err');
        assert.equal(result.exitCode, 0);
        assert.equal(result.signal, undefined);
        assert.equal(result.failed, false);
        assert.equal(result.command, "sh -c 'echo \"$1\"; echo err >&2' sh '$HOME a b'");
        assert.equal(typeof result.durationMs, 'number');
        assert.equal((await context.exec('echo', ['$((1+2))'])).stdout, '$((1+2))');
        assert.equal((await context.exec('echo $((1+2))', [], { shell: true })).stdout, '3');
        assert.equal((await context.exec('printf', ['a\n\n'], { stripFinalNewline: false })).stdout, 'a\n\n');
        const bytes = await context.exec('printf', ['\\000\\001\\n'], { encoding: 'buffer' });
        assert.deepEqual(bytes.stdout, Buffer.from([0, 1]));
      });

      test('the template tag: literal text split on whitespace, each value one argument, arrays several', async () => {
        const dir = 'a dir; rm -rf /';
        assert.equal((await context.$`echo ${dir} ${['x y', 'z']} n${1}m`).stdout, 'a dir; rm -rf / x y z n1m');
        assert.equal((await context.$({ cwd: '/tmp' })`pwd`).stdout, '/tmp');
        assert.throws(() => context.$`echo ${{} as string}`, TypeError);
      });

      test('cwd, env added to the context environment, and extendEnv: false replacing it', async () => {
        assert.equal((await context.exec('pwd', { cwd: '/tmp' })).stdout, '/tmp');
        const added = await context.exec('sh', ['-c', 'echo "$GREETING:$(test -n "$PATH" && echo has path)"'], {
          env: { GREETING: 'hi' },
        });
        assert.equal(added.stdout, 'hi:has path');
        const only = await context.exec('/usr/bin/env', [], { env: { ONLY: 'this' }, extendEnv: false });
        assert.equal(only.stdout, 'ONLY=this');
      });

      test('the environment a command gets is the context’s as it is now: changed by a running call, put back after', async () => {
        const show = () => context.exec('sh', ['-c', 'echo "[$TENDRIL_SEEN]"']);
        assert.equal((await show()).stdout, '[]');
        const release = await context.call(() => {
          process.env.TENDRIL_SEEN = 'set by a call';
          return 'set';
        });
        // That call has ended: its change was put back.
        assert.equal(release, 'set');
        assert.equal((await show()).stdout, '[]');
        // A call still running keeps its change while it runs, and the command sees it.
        const running = context.call(async () => {
          process.env.TENDRIL_SEEN = 'while running';
          await new Promise((resolve) => setTimeout(resolve, 1500));
        });
        await new Promise((resolve) => setTimeout(resolve, 300));
        assert.equal((await show()).stdout, '[while running]');
        await running;
        assert.equal((await show()).stdout, '[]');
      });

      test('input: a string, a Buffer, a large string, and a Node stream', async () => {
        assert.equal((await context.exec('cat', { input: 'typed\n' })).stdout, 'typed');
        assert.equal((await context.exec('wc', ['-c'], { input: Buffer.alloc(1000) })).stdout.trim(), '1000');
        const large = 'x'.repeat(3_000_000);
        assert.equal((await context.exec('cat', { input: large })).stdout, large);
        const stream = Readable.from(
          (function* () {
            for (let i = 0; i < 50; i++) yield Buffer.alloc(100_000, i);
          })(),
        );
        assert.equal((await context.exec('wc', ['-c'], { input: stream })).stdout.trim(), '5000000');
        // A command that does not read its input still ends.
        assert.equal((await context.exec('true', { input: Readable.from([Buffer.alloc(5_000_000)]) })).exitCode, 0);
      });

      test('a failure rejects with a CommandError naming the context and command, carrying the whole result', async () => {
        await assert.rejects(context.exec('sh', ['-c', 'echo partial; echo broken >&2; exit 3']), (error: unknown) => {
          assert.ok(error instanceof CommandError);
          assert.equal(error.code, 'ERR_TENDRIL_COMMAND');
          assert.equal(error.contextName, context.name);
          assert.equal(error.exitCode, 3);
          assert.equal(error.result.stdout, 'partial');
          assert.equal(error.result.stderr, 'broken');
          assert.equal(error.result.failed, true);
          assert.match(error.message, new RegExp(`context '${context.name}'.*sh -c .*exit code 3\\nbroken`));
          return true;
        });
        const tolerated = await context.exec('sh', ['-c', 'exit 4'], { reject: false });
        assert.equal(tolerated.exitCode, 4);
        assert.equal(tolerated.failed, true);
        await assert.rejects(context.exec('no-such-program-here', ['x']), (error: unknown) => {
          assert.ok(error instanceof CommandError);
          assert.equal(error.exitCode, undefined);
          assert.match(error.message, /no-such-program-here x: could not be started: .*ENOENT.*PATH/);
          return true;
        });
        await assert.rejects(context.exec('pwd', { cwd: '/no/such/dir' }), CommandError);
      });

      test('options are checked before anything runs', () => {
        assert.throws(() => context.exec('true', { timeout: -1 }), InvalidOptionError);
        assert.throws(() => context.exec('true', { env: { A: 1 as unknown as string } }), InvalidOptionError);
        assert.throws(() => context.exec('true', { killSignal: 'SIGNOPE' }), InvalidOptionError);
        assert.throws(() => context.exec('true', { colour: true } as never), /option colour of context.exec\(\)/);
        assert.throws(() => context.exec('true', [1 as unknown as string]), InvalidOptionError);
        assert.throws(() => context.exec('', []), InvalidOptionError);
      });

      test('iterators attached right after exec() see every chunk and every line, in order', async () => {
        const command = context.exec('seq', ['1', '100000']);
        const chunks: string[] = [];
        const lines: string[] = [];
        const all: string[] = [];
        await Promise.all([
          (async () => {
            for await (const chunk of command.stdout) chunks.push(chunk);
          })(),
          (async () => {
            for await (const line of command.lines()) lines.push(line);
          })(),
          (async () => {
            for await (const line of command.lines('all')) all.push(line);
          })(),
        ]);
        const result = await command;
        assert.equal(lines.length, 100000);
        assert.equal(lines[99999], '100000');
        assert.deepEqual(all, lines);
        assert.equal(chunks.join(''), `${result.stdout}\n`);
        const mixed = context.exec('sh', ['-c', 'echo out; echo err >&2; echo out2']);
        const both: string[] = [];
        const errors: string[] = [];
        await Promise.all([
          (async () => {
            for await (const line of mixed.lines('all')) both.push(line);
          })(),
          (async () => {
            for await (const chunk of mixed.stderr) errors.push(chunk);
          })(),
        ]);
        await mixed;
        assert.deepEqual([...both].sort(), ['err', 'out', 'out2']);
        assert.equal(errors.join(''), 'err\n');
      });

      test('onOutput gets each line as it comes, tagged with the context name', async () => {
        const seen: OutputLine[] = [];
        await context.exec('sh', ['-c', 'echo one; echo two >&2; printf three'], {
          onOutput: (line) => seen.push(line),
        });
        const sorted = [...seen].sort((a, b) => a.line.localeCompare(b.line));
        assert.deepEqual(sorted, [
          { context: context.name, stream: 'stdout', line: 'one' },
          { context: context.name, stream: 'stdout', line: 'three' },
          { context: context.name, stream: 'stderr', line: 'two' },
        ]);
      });

      test('a timeout kills the whole process group, a grandchild the command started included', async () => {
        const command = context.exec('sh', SHELL_AND_SLEEPER, { timeout: 1000 });
        const pids = await pidsOf(command);
        await assert.rejects(command, (error: unknown) => {
          assert.ok(error instanceof CommandError);
          assert.equal(error.result.timedOut, true);
          assert.equal(error.signal, 'SIGTERM');
          assert.match(error.message, /timed out after 1000 ms and was killed with SIGTERM/);
          return true;
        });
        await waitGone(pids, 5000);
      });

      test('an AbortSignal kills the process group; an aborted signal starts nothing', async () => {
        const controller = new AbortController();
        const command = context.exec('sh', SHELL_AND_SLEEPER, { signal: controller.signal });
        const pids = await pidsOf(command);
        controller.abort();
        await assert.rejects(command, (error: unknown) => error instanceof CommandError && error.result.isCanceled);
        await waitGone(pids, 5000);
        await assert.rejects(context.exec('true', { signal: controller.signal }), /aborted before it started/);
      });

      test('kill() signals the process group, SIGKILL after forceKillAfterDelay when it holds on', async () => {
        const command = context.exec('sh', SHELL_AND_SLEEPER, { reject: false });
        const pids = await pidsOf(command);
        assert.equal(command.kill('SIGKILL'), true);
        const result = await command;
        assert.equal(result.signal, 'SIGKILL');
        assert.equal(command.kill(), false, 'nothing to kill once it has finished');
        await waitGone(pids, 5000);
        // A shell that ignores SIGTERM is killed with SIGKILL once the delay passes.
        const stubborn = context.exec('sh', ['-c', "trap '' TERM; echo $$; sleep 1000 & echo $!; wait; wait"], {
          forceKillAfterDelay: 200,
          reject: false,
        });
        const stubbornPids = await pidsOf(stubborn);
        stubborn.kill();
        assert.equal((await stubborn).signal, 'SIGKILL');
        await waitGone(stubbornPids, 5000);
      });

      test('maxBuffer: past it the command is killed and rejects saying so', async () => {
        await assert.rejects(context.exec('yes', { maxBuffer: 10_000, stripFinalNewline: false }), (error: unknown) => {
          assert.ok(error instanceof CommandError);
          assert.equal(error.result.isMaxBuffer, true);
          assert.equal(error.result.stdout.length, 10_000);
          assert.match(error.message, /more than maxBuffer \(10000 bytes\) on stdout/);
          return true;
        });
      });

      test('with buffer: false and a reader that stops, the command blocks on its full pipe and nothing piles up', async () => {
        const record = `/tmp/tendril-writer-${randomBytes(6).toString('hex')}`;
        const command = context.exec('/usr/bin/python3', ['-c', WRITER, record], { buffer: false, reject: false });
        try {
          const reader = command.stdout[Symbol.asyncIterator]();
          assert.equal((await reader.next()).done, false);
          // The reader stops here: the writer must end up asleep in write(1, ...), its pipe full.
          let pid = 0;
          await waitFor(() => {
            pid = writerRecord(record)?.[0] ?? 0;
            return pid > 0 && blockedWritingStdout(pid);
          }, 20_000);
          const [, written] = writerRecord(record) as [number, number];
          // All it ever wrote: the pipe, the context's read buffer, the 1 MiB window, one chunk held by the reader.
          assert.ok(written <= 3 * 1024 * 1024, `${written} bytes were written while nobody read`);
          // The context may still take a last read from the pipe after the first sighting, so the writer can
          // wake for one more write; what matters is that it blocks again and the bound holds.
          await waitFor(() => blockedWritingStdout(pid), 20_000);
          const later = (writerRecord(record) as [number, number])[1];
          assert.ok(later <= 3 * 1024 * 1024, `${later} bytes were written while nobody read`);
          // Reading again lets it run on, far past that.
          let read = 0;
          for (;;) {
            const next = await reader.next();
            read += (next.value as string).length;
            if (read > 20 * 1024 * 1024) break;
          }
          assert.ok((writerRecord(record)?.[1] ?? 0) > 10 * 1024 * 1024);
          command.kill();
          await reader.return?.();
          const result = await command;
          assert.equal(result.signal, 'SIGTERM');
          assert.equal(result.stdout, '');
        } finally {
          // Ended first when an assertion failed: a writer left running would make its record again.
          command.kill('SIGKILL');
          await command;
          rmSync(record, { force: true });
          rmSync(`${record}.new`, { force: true });
        }
      });

      test('the SIGKILL after forceKillAfterDelay reaches a group member that ignores SIGTERM after the leader has gone', async () => {
        // The leader (sh) dies of SIGTERM; the member ignores it and holds no pipe of the command's.
        const command = context.exec(
          'sh',
          ['-c', '(trap "" TERM; exec sleep 61) >/dev/null 2>&1 & echo $!; sleep 30'],
          {
            timeout: 200,
            forceKillAfterDelay: 300,
            reject: false,
          },
        );
        let pid = 0;
        for await (const line of command.lines()) {
          pid = Number(line);
          break;
        }
        try {
          const result = await command;
          assert.equal(result.timedOut, true);
          await waitGone([pid], 5000);
        } finally {
          reap(pid);
        }
      });

      test('shutting the context down kills what a finished command left running in its group', async () => {
        const doomed = await start(`commands-leftover-${kind.split(' ')[0]}`);
        const { stdout, exitCode } = await doomed.exec('sh', ['-c', 'sleep 62 >/dev/null 2>&1 & echo $!']);
        const pid = Number(stdout);
        try {
          assert.equal(exitCode, 0);
          assert.ok(isAlive(pid), 'the command left its sleep behind');
          await doomed.shutdown();
          await waitGone([pid], 5000);
        } finally {
          reap(pid);
        }
      });

      test('shutting the context down kills the process groups of its commands', async () => {
        const doomed = await start(`commands-doomed-${kind.split(' ')[0]}`);
        const command = doomed.exec('sh', SHELL_AND_SLEEPER);
        const pids = await pidsOf(command);
        await doomed.shutdown();
        await assert.rejects(command, ContextDisconnectedError);
        await waitGone(pids, 5000);
      });
    });
  }

  test('a context that stops answering cannot hold a command past its timeout, nor past an abort', async () => {
    const wedged = await router.local({ name: 'commands-wedged' });
    try {
      await wedged.exec('true'); // the services module is loaded: what follows waits on the command alone
      process.kill(wedged.info.pid, 'SIGSTOP');
      const timed = wedged.exec('sleep', ['30'], { timeout: 200, forceKillAfterDelay: 300 });
      await assert.rejects(withLimit(timed, 30_000), (error: unknown) => {
        assert.ok(error instanceof CommandError, String(error));
        assert.equal(error.result.timedOut, true);
        assert.equal(error.result.failed, true);
        assert.match(error.message, /timed out after 200 ms.*did not report/);
        return true;
      });
      const controller = new AbortController();
      const aborted = wedged.exec('sleep', ['30'], { signal: controller.signal, forceKillAfterDelay: 300 });
      controller.abort();
      await assert.rejects(withLimit(aborted, 30_000), (error: unknown) => {
        assert.ok(error instanceof CommandError, String(error));
        assert.equal(error.result.isCanceled, true);
        assert.equal(error.result.timedOut, false);
        return true;
      });
      assert.equal(aborted.kill(), false, 'it is over');
    } finally {
      process.kill(wedged.info.pid, 'SIGCONT');
      await wedged.shutdown();
    }
  });

  test('an attached reader paces the command: breaking out lets it finish; one never read ends with the timeout', async () => {
    const context = await router.local({ name: 'commands-readers' });
    try {
      const counted = context.exec('seq', ['1', '200000']);
      for await (const line of counted.lines()) if (line === '10') break;
      const unread = counted.stdout[Symbol.asyncIterator]();
      await unread.return?.();
      const result = await withLimit(counted, 30_000);
      assert.equal(result.stdout.split('\n').length, 200000);
      // Attached and never read: the command waits on it until the timeout's backstop gives up.
      const held = context.exec('yes', { timeout: 200, forceKillAfterDelay: 100, buffer: false });
      const reader = held.lines();
      await assert.rejects(withLimit(held, 30_000), (error: unknown) => {
        assert.ok(error instanceof CommandError, String(error));
        assert.equal(error.result.timedOut, true);
        assert.match(error.message, /stopped reading/);
        return true;
      });
      // The reader gets what it was handed, then the error.
      await assert.rejects(async () => {
        for await (const _line of reader);
      }, CommandError);
    } finally {
      await context.shutdown();
    }
  });

  test('when the master is killed, the commands of its child and grandchild die with them', async () => {
    const script = `
      import { Router } from ${JSON.stringify(join(ROOT, 'dist', 'index.js'))};
      const router = new Router();
      const child = await router.local({ name: 'orphan-child' });
      const grandchild = await router.local({ name: 'orphan-grandchild', via: child });
      const pids = [];
      for (const context of [child, grandchild]) {
        const command = context.exec('sh', ['-c', 'echo $$; sleep 1000 & echo $!; wait']);
        for await (const line of command.lines()) {
          pids.push(Number(line));
          if (pids.length % 2 === 0) break;
        }
      }
      process.stdout.write(JSON.stringify(pids) + '\\n');
      setInterval(() => {}, 1000);
    `;
    const master = spawn(process.execPath, ['--input-type=module', '-e', script], {
      stdio: ['ignore', 'pipe', 'inherit'],
    });
    const pids = await new Promise<number[]>((resolve, reject) => {
      master.stdout.once('data', (chunk: Buffer) => resolve(JSON.parse(chunk.toString())));
      master.once('exit', () => reject(new Error('the master exited early')));
    });
    assert.equal(pids.length, 4);
    for (const pid of pids) assert.ok(isAlive(pid));
    const exited = new Promise((resolve) => master.once('exit', resolve));
    master.kill('SIGKILL');
    await exited;
    await waitGone(pids, 5000);
  });
});
