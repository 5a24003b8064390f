import assert from 'node:assert/strict';
import { execFile, spawn } from 'node:child_process';
import { mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { promisify } from 'node:util';
import { type CallError, type Context, InvalidOptionError, type Job, JobError, Router, TimeoutError } from 'tendril';
import { Job as JobHandle } from '#dist/internal.js';
import { impersonate } from './support/hostile.js';
import { nodeBinary } from './support/nodes.js';
import { isAlive, ROOT, sleep, waitFor } from './support/procs.js';
import { sshLogin, startTestbed, type Testbed } from './support/testbed.js';

const fixture = (name: string) => fileURLToPath(new URL(`./fixtures/${name}`, import.meta.url));
const modules = join(ROOT, 'test', 'fixtures', 'modules');

/** The state file a job's supervisor keeps, in the jobs directory `jobs` (read here as root, as an admin could). */
function stateOf(jobs: string, id: string): { supervisor: { pid: number }; pid: number } {
  return JSON.parse(readFileSync(join(jobs, id, 'state'), 'utf8'));
}

/** Processes whose process group is `pgid`. */
function groupMembers(pgid: number): number[] {
  const members: number[] = [];
  for (const name of readdirSync('/proc')) {
    if (!/^\d+$/.test(name)) continue;
    try {
      const stat = readFileSync(`/proc/${name}/stat`, 'latin1');
      const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
      if (Number(fields[2]) === pgid && fields[0] !== 'Z') members.push(Number(name));
    } catch {
      // Gone meanwhile.
    }
  }
  return members;
}

/** The home directory of account `name`, from the account database. */
function homeOf(name: string): string {
  const entry = readFileSync('/etc/passwd', 'utf8')
    .split('\n')
    .find((line) => line.startsWith(`${name}:`));
  if (!entry) throw new Error(`no account ${name}`);
  return entry.split(':')[5] as string;
}

/** The parent PID of `pid`. */
function parentOf(pid: number): number {
  const stat = readFileSync(`/proc/${pid}/stat`, 'latin1');
  return Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]);
}

describe('jobs: work that outlives the connection', () => {
  let router: Router;
  let context: Context;
  const started: Job[] = [];
  // The contexts keep their jobs in a directory of this run's (XDG_STATE_HOME), not in the account's own.
  const stateHome = mkdtempSync(join(tmpdir(), 'tendril-jobs-'));
  const jobs = join(stateHome, 'tendril', 'jobs');
  const env = { ...process.env, XDG_STATE_HOME: stateHome };

  before(async () => {
    router = new Router();
    context = await router.local({ name: 'jobs', env });
  });
  after(async () => {
    for (const job of started) await job.cancel().catch(() => {});
    await router.shutdown();
    rmSync(stateHome, { recursive: true, force: true });
  });
  const track = <T>(job: Job<T>): Job<T> => {
    started.push(job as Job);
    return job;
  };

  test('a function job runs detached, reports running then succeeded, with its result and output', async () => {
    const job = track(
      await context.startJob(
        { timeout: 30_000, name: 'double' },
        async (n: number) => {
          console.log('working on', n);
          console.error('a warning');
          await new Promise((resolve) => setTimeout(resolve, 800));
          return { doubled: n * 2, pid: process.pid };
        },
        21,
      ),
    );
    assert.match(job.id, /^[0-9a-f]{24}$/);
    const running = await job.status();
    assert.equal(running.state, 'running');
    assert.equal(running.name, 'double');
    assert.ok(running.pid && running.startedAt && running.endedAt === undefined);
    // Its own session and process group, not the context's.
    const sid = (pid: number) => Number(readFileSync(`/proc/${pid}/stat`, 'latin1').split(') ')[1]?.split(' ')[3]);
    assert.equal(sid(running.pid), running.pid, 'the job leads a session of its own');
    assert.notEqual(parentOf(running.pid), context.info.pid);
    const lines = [];
    for await (const line of job.output()) lines.push(line);
    assert.deepEqual(lines, [
      { stream: 'stdout', line: 'working on 21' },
      { stream: 'stderr', line: 'a warning' },
    ]);
    const result = await job.result();
    assert.equal(result.doubled, 42);
    assert.equal(result.pid, running.pid);
    const done = await job.status();
    assert.equal(done.state, 'succeeded');
    assert.ok(done.endedAt && done.endedAt >= (done.startedAt as number));
    assert.deepEqual(done.output, { stdout: 14, stderr: 10, droppedStdout: 0, droppedStderr: 0 });
    const listed = await context.jobs();
    assert.ok(listed.some((status) => status.id === job.id && status.state === 'succeeded'));
  });

  test('a job that throws is failed, and result() carries what it threw', async () => {
    const job = track(
      await context.startJob({ timeout: 10_000 }, () => {
        throw Object.assign(new RangeError('out of range', { cause: new Error('below') }), {
          code: 'E_RANGE',
          limit: 10,
        });
      }),
    );
    await assert.rejects(job.result(), (error: unknown) => {
      assert.ok(error instanceof JobError);
      assert.equal(error.code, 'ERR_TENDRIL_JOB_FAILED');
      assert.equal(error.status?.state, 'failed');
      assert.match(error.message, /RangeError: out of range/);
      const cause = error.cause as CallError;
      assert.equal(cause.remoteCode, 'E_RANGE');
      assert.deepEqual(cause.remoteFields, { code: 'E_RANGE', limit: 10 });
      assert.equal((cause.cause as CallError).remoteMessage, 'below');
      // Its stack names this file, on the line the function throws at.
      const text = readFileSync(fileURLToPath(import.meta.url), 'utf8');
      const line = text.slice(0, text.indexOf("new RangeError('out of range'")).split('\n').length;
      assert.match(cause.remoteStack, new RegExp(`\\n\\s+at [^\\n]*jobs\\.test\\.js:${line}:\\d+`));
      return true;
    });
  });

  test('a command job gives stdout, stderr and the exit status; a non-zero exit is failed', async () => {
    const ok = track(
      await context.execJob('sh', ['-c', 'echo "$GREETING from $(pwd)"; echo done >&2'], {
        timeout: 10_000,
        cwd: '/tmp',
        env: { GREETING: 'hello world' },
      }),
    );
    assert.deepEqual(await ok.result(), {
      stdout: 'hello world from /tmp\n',
      stderr: 'done\n',
      exitCode: 0,
      signal: undefined,
    });
    const bad = track(await context.execJob('sh -c "echo oops >&2; exit 3"', [], { timeout: 10_000, shell: true }));
    await assert.rejects(bad.result(), (error: unknown) => {
      assert.ok(error instanceof JobError);
      assert.equal(error.code, 'ERR_TENDRIL_JOB_FAILED');
      assert.equal(error.result?.exitCode, 3);
      assert.match(error.message, /exit code 3\): oops/);
      return true;
    });
  });

  test('past its timeout a job is timed-out and its whole process group (a pipeline with children) is gone', async () => {
    const job = track(
      await context.execJob('sh', ['-c', "trap '' TERM; echo before; sleep 300 | cat; echo never"], {
        timeout: 1000,
        grace: 500,
      }),
    );
    const { pid } = await job.status();
    assert.ok(pid);
    await waitFor(() => groupMembers(pid).length >= 3, 5000);
    await assert.rejects(job.result(), (error: unknown) => {
      assert.ok(error instanceof JobError);
      assert.equal(error.code, 'ERR_TENDRIL_JOB_TIMED_OUT');
      assert.equal(error.result?.stdout, 'before\n', 'the output so far is kept');
      return true;
    });
    assert.deepEqual(groupMembers(pid), [], 'nothing of the job is left');
    assert.equal((await job.status()).state, 'timed-out');
  });

  test('cancel() kills the job and its group; a timeout must be asked for, none included', async () => {
    const job = track(await context.execJob('sh', ['-c', 'sleep 300 & sleep 300'], { timeout: 'none' }));
    const { pid } = await job.status();
    await waitFor(() => groupMembers(pid as number).length >= 2, 5000);
    // Waiting has its own limit; the job runs on past it.
    await assert.rejects(job.result({ timeout: 300 }), (error: unknown) => error instanceof TimeoutError);
    assert.equal((await job.status()).state, 'running');
    const status = await job.cancel();
    assert.equal(status.state, 'cancelled');
    assert.deepEqual(groupMembers(pid as number), []);
    await assert.rejects(job.result(), { code: 'ERR_TENDRIL_JOB_CANCELLED' });
    await assert.rejects(
      context.startJob(undefined as never, () => 1),
      (error: unknown) => error instanceof InvalidOptionError && error.option === 'timeout',
    );
    await assert.rejects(
      context.execJob('true', [], {} as never),
      (error: unknown) => error instanceof InvalidOptionError && /'none'/.test(error.message),
    );
  });

  test('everything the function loads is preloaded; a computed import outside it fails naming preload', async () => {
    const base = pathToFileURL(join(modules, 'main.js'));
    // @ts-expect-error: resolved from `base` where it runs, not from this file.
    const run = async (name: string) => (await import('./main.js')).plugin(name);
    const without = track(await context.startJob({ timeout: 20_000, base }, run, 'alpha'));
    await assert.rejects(without.result(), (error: unknown) => {
      assert.ok(error instanceof JobError);
      assert.match(error.message, /\.\/plugins\/alpha\.js/);
      assert.match(error.message, /preload option of startJob/);
      return true;
    });
    const withPreload = track(
      await context.startJob({ timeout: 20_000, base, preload: ['./plugins/alpha.js'] }, run, 'alpha'),
    );
    assert.equal(await withPreload.result(), 'alpha ran');
    // A package and its dependencies travel with the function's literal import.
    const summary = track(
      // @ts-expect-error: resolved from `base` where it runs, not from this file.
      await context.startJob({ timeout: 20_000, base }, async () => (await import('./main.js')).summary()),
    );
    assert.equal((await summary.result()).chalkType, 'function');
  });

  test('output past maxOutput keeps the tail and says how much was dropped', async () => {
    const job = track(
      await context.execJob('sh', ['-c', 'for i in $(seq 1 2000); do echo "line $i"; done'], {
        timeout: 10_000,
        maxOutput: 1024,
      }),
    );
    const { stdout } = await job.result();
    assert.ok(stdout.length <= 1024);
    assert.ok(stdout.endsWith('line 2000\n'));
    const status = await job.status();
    assert.ok(status.output.droppedStdout > 0 && status.output.stdout > 10_000);
    const lines = [];
    for await (const line of job.output()) lines.push(line.line);
    assert.match(lines[0] as string, /^\[\.\.\. \d+ bytes of output dropped \.\.\.\]$/);
    assert.equal(lines.at(-1), 'line 2000');
  });

  test('a job whose supervisor is killed is lost, not running for ever; bad IDs and corrupted state are errors', async () => {
    const job = track(await context.execJob('sleep', ['300'], { timeout: 'none' }));
    const state = stateOf(jobs, job.id);
    process.kill(state.supervisor.pid, 'SIGKILL');
    await waitFor(() => !isAlive(state.supervisor.pid), 5000);
    const lost = await job.status();
    assert.equal(lost.state, 'lost');
    assert.match(lost.error as string, /SIGKILL|rebooted/);
    await assert.rejects(job.remove(), { code: 'ERR_TENDRIL_JOB_RUNNING' });
    await job.cancel();
    await waitFor(() => !isAlive(state.pid), 5000);
    await job.remove();
    await assert.rejects(job.status(), { code: 'ERR_TENDRIL_JOB_NOT_FOUND' });

    assert.throws(() => context.job('../x'), InvalidOptionError);
    // Past the master's check, the context refuses it as well: never a path.
    await assert.rejects(new JobHandle(context, '../../../etc').status(), { code: 'ERR_TENDRIL_JOB_NOT_FOUND' });
    await assert.rejects(context.job('0123456789abcdef01234567').status(), { code: 'ERR_TENDRIL_JOB_NOT_FOUND' });

    const corrupt = track(await context.execJob('true', [], { timeout: 10_000 }));
    await corrupt.result();
    writeFileSync(join(jobs, corrupt.id, 'state'), '{"v":1,"id":');
    await assert.rejects(corrupt.status(), (error: unknown) => {
      assert.ok(error instanceof JobError);
      assert.equal(error.code, 'ERR_TENDRIL_JOB_CORRUPT');
      assert.match(error.message, /corrupted/);
      return true;
    });
    const listed = (await context.jobs()).find((status) => status.id === corrupt.id);
    assert.equal(listed?.state, 'lost');
    assert.match(listed?.error as string, /corrupted/);
    rmSync(join(jobs, corrupt.id), { recursive: true });
  });

  test('jobs run on the oldest Node a context may run (12), functions and commands', async () => {
    const old = await router.local({ name: 'jobs-node12', nodePath: nodeBinary(12), env });
    try {
      const job = track(
        await old.startJob({ timeout: 20_000 }, async () => {
          console.log('on', process.version);
          return process.versions.node.split('.')[0];
        }),
      );
      assert.equal(await job.result(), '12');
      const lines = [];
      for await (const line of job.output()) lines.push(line.line);
      assert.deepEqual(lines, [`on ${old.info.nodeVersion}`]);
      const command = track(await old.execJob('sh', ['-c', 'echo $0', 'twelve'], { timeout: 20_000, keep: 0 }));
      assert.equal((await command.result()).stdout, 'twelve\n');
      await job.remove();
      await assert.rejects(job.status(), { code: 'ERR_TENDRIL_JOB_NOT_FOUND' });
    } finally {
      await old.shutdown();
    }
  });

  test('a hostile context lying about jobs gets clear errors in the master, never a hang or a crash', async () => {
    const liar = await router.local({ name: 'jobs-liar', env });
    try {
      // Each attack travels as source: the statuses are written out in it.
      const id = '0123456789abcdef01234567';
      await impersonate(liar, 'jobStart', () => ({
        id: '../../etc',
        kind: 'function',
        state: 'running',
        createdAt: 1,
      }));
      await assert.rejects(
        liar.startJob({ timeout: 1000 }, () => 1),
        /answered a job's start with a malformed id/,
      );
      await impersonate(liar, 'jobStatus', () => ({
        id: 'fedcba9876543210fedcba98',
        kind: 'function',
        state: 'running',
        createdAt: 1,
      }));
      await assert.rejects(liar.job(id).status(), { code: 'ERR_TENDRIL_JOB_MALFORMED' });
      await impersonate(liar, 'jobStatus', (job: string) => ({
        id: job,
        kind: 'function',
        state: 'exploded',
        createdAt: 1,
      }));
      await assert.rejects(liar.job(id).status(), { code: 'ERR_TENDRIL_JOB_MALFORMED' });
      await impersonate(liar, 'jobStatus', (job: string) => ({
        id: job,
        kind: 'function',
        state: 'failed',
        createdAt: 1,
        error: 'x'.repeat(1024 * 1024),
        pid: -5,
      }));
      const bounded = await liar.job(id).status();
      assert.equal(bounded.error?.length, 64 * 1024, 'a long error is cut');
      assert.equal(bounded.pid, undefined, 'a negative PID is dropped');
      // A job the context says runs for ever: the wait still ends at the caller's timeout.
      await impersonate(liar, 'jobResult', (job: string) => ({
        status: { id: job, kind: 'function', state: 'running', createdAt: 1 },
      }));
      await assert.rejects(liar.job(id).result({ timeout: 500 }), (error: unknown) => error instanceof TimeoutError);
      await impersonate(liar, 'jobResult', () => 'done');
      await assert.rejects(liar.job(id).result(), { code: 'ERR_TENDRIL_JOB_MALFORMED' });
      // A command's result without its output.
      await impersonate(liar, 'jobResult', (job: string) => ({
        status: { id: job, kind: 'command', state: 'succeeded', createdAt: 1 },
      }));
      await assert.rejects(liar.job(id).result(), { code: 'ERR_TENDRIL_JOB_MALFORMED' });
      await impersonate(liar, 'jobOutput', async (_id: string, sender: { send(value: unknown): Promise<void> }) => {
        await sender.send([1, 'fine\n']);
        await sender.send([7, { not: 'text' }]);
      });
      const lines: string[] = [];
      await assert.rejects(
        (async () => {
          for await (const { line } of liar.job(id).output()) lines.push(line);
        })(),
        { code: 'ERR_TENDRIL_JOB_MALFORMED' },
      );
      assert.deepEqual(lines, ['fine']);
      await impersonate(liar, 'jobList', () => [
        { id: '0123456789abcdef01234567', kind: 'function', state: 'running', createdAt: 1 },
        42,
      ]);
      await assert.rejects(liar.jobs(), /listed a job with not an object/);
      // A code the jobs never use stays the call's error, not a JobError.
      await impersonate(liar, 'jobStatus', () => {
        throw Object.assign(new Error('made up'), { code: 'ERR_TENDRIL_JOB_WHATEVER' });
      });
      await assert.rejects(liar.job(id).status(), (error: unknown) => !(error instanceof JobError));
      assert.equal(await liar.call(() => 'still serving'), 'still serving');
    } finally {
      await liar.shutdown();
    }
  });

  test('finished jobs are removed past keep', async () => {
    const job = await context.execJob('true', [], { timeout: 10_000, keep: 0 });
    await job.result();
    await sleep(5);
    assert.ok(!(await context.jobs()).some((status) => status.id === job.id));
    await assert.rejects(job.status(), { code: 'ERR_TENDRIL_JOB_NOT_FOUND' });
  });

  test('100 jobs started at once all complete, and each is re-attached from another context', async () => {
    const jobs = await Promise.all(
      Array.from({ length: 100 }, (_, i) =>
        context.startJob({ timeout: 120_000, name: `many-${i}` }, async (n: number) => n * n, i),
      ),
    );
    jobs.forEach(track);
    assert.equal(new Set(jobs.map((job) => job.id)).size, 100);
    const other = await router.local({ name: 'jobs-reader', env });
    try {
      const results = await Promise.all(jobs.map((job) => other.job(job.id).result()));
      assert.deepEqual(
        results,
        jobs.map((_, i) => i * i),
      );
    } finally {
      await other.shutdown();
    }
  });
});

describe('jobs over ssh -> sudo survive their master', () => {
  let bed: Testbed;

  before(async () => {
    bed = await startTestbed();
  });
  after(async () => {
    await bed?.stop();
  });

  test('a 20 s job outlives its master killed with SIGKILL; a new master re-attaches by ID', async () => {
    const config = { ssh: sshLogin(bed), username: bed.accounts.target.name };
    const first = spawn(process.execPath, [fixture('job-master.js'), 'start', JSON.stringify(config)], {
      stdio: ['ignore', 'pipe', 'inherit'],
    });
    const started = await new Promise<{ id: string; contextPid: number; status: { state: string; pid: number } }>(
      (resolve, reject) => {
        first.stdout.once('data', (chunk: Buffer) => resolve(JSON.parse(chunk.toString())));
        first.once('exit', (code) => reject(new Error(`the first master exited (${code}) before the job started`)));
      },
    );
    assert.equal(started.status.state, 'running');
    const state = stateOf(join(homeOf(bed.accounts.target.name), '.local', 'state', 'tendril', 'jobs'), started.id);
    const supervisor = state.supervisor.pid as number;
    // Never a child of the context: started through sh, which was gone before the job ran.
    assert.notEqual(parentOf(supervisor), started.contextPid);
    assert.equal(parentOf(started.status.pid), supervisor);
    const exited = new Promise((resolve) => first.once('exit', resolve));
    first.kill('SIGKILL');
    await exited;
    await waitFor(() => !isAlive(started.contextPid), 5000);
    assert.ok(isAlive(started.status.pid), 'the job runs on without its master');

    const { stdout } = await promisify(execFile)(
      process.execPath,
      [fixture('job-master.js'), 'attach', JSON.stringify({ ...config, id: started.id })],
      { timeout: 60_000 },
    );
    const seen = JSON.parse(stdout) as {
      first: { state: string };
      lines: { line: string }[];
      result: { seconds: number; user: string };
      last: { state: string };
    };
    assert.equal(seen.first.state, 'running');
    assert.deepEqual(seen.result, { seconds: 20, user: bed.accounts.target.name });
    assert.equal(seen.last.state, 'succeeded');
    assert.deepEqual(
      seen.lines.map((line) => line.line),
      Array.from({ length: 20 }, (_, i) => `tick ${i}`),
    );
  });
});
