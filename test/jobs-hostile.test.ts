// Another process of the account, or a hostile context, against the jobs:
// a FIFO or a link put in place of a job's files must never wedge the
// context (its calls run on one thread) nor be followed, and a status the
// master keeps holds what its bounds say, not the string it was cut from.
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import {
  closeSync,
  constants,
  mkdtempSync,
  openSync,
  renameSync,
  rmSync,
  symlinkSync,
  unlinkSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { type Context, type JobStatus, Router } from 'tendril';
import { heldAfterGc, MiB, mib } from './support/heap.js';
import { impersonate } from './support/hostile.js';
import { settledWithin, withLimit } from './support/procs.js';

/** Far longer than a refusal takes: an operation still pending then was waiting on the FIFO. */
const HANG = 5000;

/**
 * Lets a reader blocked in open(2) on the FIFO at `path` go on (a writer
 * comes and goes: it reads end of file), so a test that failed does not
 * leave its context wedged for ever.
 */
function releaseFifo(path: string): void {
  try {
    closeSync(openSync(path, constants.O_WRONLY | constants.O_NONBLOCK));
  } catch {
    // No reader waits (ENXIO), or it is gone.
  }
}

/** Puts a FIFO at `path` (what was there is kept beside it), runs `check`, and puts the file back. */
async function withFifo(path: string, check: () => Promise<void>): Promise<void> {
  renameSync(path, `${path}.real`);
  execFileSync('mkfifo', ['-m', '600', path]);
  try {
    await check();
  } finally {
    releaseFifo(path);
    unlinkSync(path);
    renameSync(`${path}.real`, path);
  }
}

describe('jobs against another process of the account and a hostile context', { timeout: 120_000 }, () => {
  let router: Router;
  let context: Context;
  // The contexts keep their jobs in a directory of this run's (XDG_STATE_HOME), not in the account's own.
  const stateHome = mkdtempSync(join(tmpdir(), 'tendril-jobs-hostile-'));
  const jobs = join(stateHome, 'tendril', 'jobs');
  const env = { ...process.env, XDG_STATE_HOME: stateHome };

  before(async () => {
    router = new Router();
    context = await router.local({ name: 'jobs-fifo', env });
  });
  after(async () => {
    await router.shutdown();
    rmSync(stateHome, { recursive: true, force: true });
  });

  /** `operation` must be refused promptly, and the context must answer a call right after. */
  async function refusedPromptly(operation: Promise<unknown>, pattern: RegExp, code = 'ERR_TENDRIL_JOB_CORRUPT') {
    const settled = await settledWithin(operation, HANG);
    assert.notEqual(settled, 'pending', `still waiting after ${HANG} ms: the context is blocked in open(2)`);
    assert.ok(typeof settled === 'object' && 'error' in settled, 'refused');
    const error = settled.error as { code?: string; message: string };
    assert.equal(error.code, code, error.message);
    assert.match(error.message, pattern);
    assert.equal(
      await withLimit(
        context.call(() => 'still answering'),
        HANG,
      ),
      'still answering',
    );
  }

  test("a FIFO in place of a job's state or result file is refused at once; the context answers on", async () => {
    const job = await context.startJob({ timeout: 60_000 }, () => 42);
    assert.equal(await job.result(), 42);
    const directory = join(jobs, job.id);
    await withFifo(join(directory, 'state'), async () => {
      await refusedPromptly(job.status(), /state .*FIFO/);
      await refusedPromptly(context.job(job.id).cancel(), /FIFO/);
      // Listed as lost, with why, rather than waited on.
      const listed = await withLimit(context.jobs(), HANG);
      const entry = listed.find((status) => status.id === job.id);
      assert.equal(entry?.state, 'lost');
      assert.match(entry?.error ?? '', /FIFO/);
    });
    await withFifo(join(directory, 'result'), async () => {
      await refusedPromptly(job.result(), /result file .*FIFO/);
    });
    assert.equal(await job.result(), 42, 'the real files read as before');
    await job.remove();
  });

  test("a FIFO in place of a command job's output is skipped: result() and output() end", async () => {
    const job = await context.execJob('echo', ['kept'], { timeout: 60_000 });
    assert.equal((await job.result()).stdout, 'kept\n');
    await withFifo(join(jobs, job.id, 'stdout'), async () => {
      const result = await settledWithin(job.result(), HANG);
      assert.notEqual(result, 'pending', `result() still waiting after ${HANG} ms`);
      assert.deepEqual(result, { value: { stdout: '', stderr: '', exitCode: 0, signal: undefined } });
      const lines: string[] = [];
      const following = (async () => {
        for await (const { line } of job.output()) lines.push(line);
      })();
      assert.notEqual(await settledWithin(following, HANG), 'pending', `output() still waiting after ${HANG} ms`);
      assert.deepEqual(lines, []);
    });
    await job.remove();
  });

  test("a link in place of a job's state is not followed: what it points to never reaches the master", async () => {
    const job = await context.startJob({ timeout: 60_000 }, () => 'done');
    await job.result();
    const secret = join(stateHome, 'secret');
    writeFileSync(secret, 'secret-token-4f1c', { mode: 0o600 });
    const state = join(jobs, job.id, 'state');
    renameSync(state, `${state}.real`);
    symlinkSync(secret, state);
    try {
      const settled = await settledWithin(job.status(), HANG);
      assert.ok(typeof settled === 'object' && 'error' in settled, 'refused');
      const { code, message } = settled.error as { code: string; message: string };
      assert.equal(code, 'ERR_TENDRIL_JOB_CORRUPT', message);
      assert.match(message, /ELOOP/);
      assert.doesNotMatch(message, /secret-tok/, 'the linked file was read');
    } finally {
      unlinkSync(state);
      renameSync(`${state}.real`, state);
    }
    await job.remove();
  });

  test('ten statuses cut from 32 MiB names hold their 64 KiB each, not the 320 MiB they were cut from', async () => {
    const liar = await router.local({ name: 'jobs-long-names', env });
    try {
      await impersonate(liar, 'jobStatus', (id: string) => ({
        id,
        kind: 'function',
        state: 'running',
        createdAt: 1,
        name: 'n'.repeat(32 * 1024 * 1024),
        error: 'e'.repeat(32 * 1024 * 1024),
      }));
      const job = liar.job('0123456789abcdef01234567');
      await job.status();
      const base = heldAfterGc();
      const kept: JobStatus[] = [];
      for (let i = 0; i < 10; i++) kept.push(await job.status());
      const held = heldAfterGc() - base;
      assert.equal(kept[9]?.name?.length, 64 * 1024, 'the name is cut');
      assert.equal(kept[9]?.error?.length, 64 * 1024, 'the error is cut');
      // 10 x 2 x 64 KiB kept; the 640 MiB of the strings they were cut from must be free.
      assert.ok(held < 16 * MiB, `10 statuses hold ${mib(held)}`);
      assert.equal(kept.length, 10);
    } finally {
      await liar.shutdown();
    }
  });

  test("a job's output sent in 32 MiB pieces is refused as malformed, at once, holding nothing", async () => {
    const liar = await router.local({ name: 'jobs-big-chunks', env });
    try {
      await impersonate(
        liar,
        'jobOutput',
        async (_id: string, sender: { send(value: unknown): Promise<void>; close(): void }) => {
          // Short lines in one piece of 32 MiB: as views each kept line held the piece (320 MiB for ten);
          // split, 16 million lines stalled the master's event loop for 22 s.
          await sender.send([1, 'a line\n'.repeat(4 * 1024 * 1024)]);
          sender.close();
        },
      );
      const base = heldAfterGc();
      const started = Date.now();
      const lines: string[] = [];
      await assert.rejects(
        (async () => {
          for await (const { line } of liar.job('0123456789abcdef01234567').output()) lines.push(line);
        })(),
        (error: Error) =>
          (error as { code?: string }).code === 'ERR_TENDRIL_JOB_MALFORMED' &&
          /output in a piece of \d+ characters, more than a context sends at once/.test(error.message),
      );
      const ms = Date.now() - started;
      assert.deepEqual(lines, []);
      assert.ok(ms < 5000, `refused after ${ms} ms`);
      assert.ok(heldAfterGc() - base < 16 * MiB, 'nothing of it is kept');
    } finally {
      await liar.shutdown();
    }
  });

  test("a command's output sent in a 32 MiB piece fails the command as malformed, holding nothing", async () => {
    const liar = await router.local({ name: 'commands-big-chunks' });
    try {
      await impersonate(liar, 'exec', async (_request: unknown, channel: unknown) => {
        const out = channel as { send(value: unknown): Promise<void> };
        await out.send([1, Buffer.from('a line\n'.repeat(4 * 1024 * 1024))]);
        return new Promise(() => {});
      });
      const base = heldAfterGc();
      const command = liar.exec('true', [], { buffer: false });
      const lines: string[] = [];
      const reading = (async () => {
        for await (const line of command.lines()) lines.push(line);
      })();
      // The readers end with the command's error.
      reading.catch(() => {});
      await assert.rejects(
        command,
        /its output came in a piece of \d+ bytes, more than the 1048576 a context sends at once/,
      );
      await assert.rejects(reading, /its output came in a piece/);
      assert.deepEqual(lines, []);
      // The codec keeps the last payload it decoded (msgpackr's source) until the next: decode another.
      await liar.call(() => null);
      const held = heldAfterGc() - base;
      assert.ok(held < 16 * MiB, `${mib(held)} of it is kept`);
    } finally {
      await liar.shutdown();
    }
  });
});
