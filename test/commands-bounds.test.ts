/**
 * What a command's child can make the master hold, and for how long:
 * output read as it comes, output past `maxBuffer`, output kept for the
 * result, and a child that ignores the kill or never answers.
 */
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { existsSync, rmSync } from 'node:fs';
import { after, before, describe, test } from 'node:test';
import { CommandError, type Context, HeldBytesError, ProtocolError, Router } from 'tendril';
import { heldAfterGc, MiB, mib, rssAfterGc } from './support/heap.js';
import { type Attacker, impersonate } from './support/hostile.js';
import { switchOf } from './support/internals.js';
import { sleep, waitFor, withLimit } from './support/procs.js';

/** How long past a stop the master waits on the context at most (forceKillAfterDelay: false): `BACKSTOP_GRACE`. */
const BACKSTOP_GRACE = 5000;

/** A Channel end as an attacker uses it in the child. */
interface ChildChannel {
  send(value: unknown): Promise<void>;
}

describe('commands: what a child can make the master hold, and for how long', { timeout: 600_000 }, () => {
  let router: Router;
  let context: Context;
  before(async () => {
    router = new Router();
    context = await router.local({ name: 'bounds' });
    // The services module is loaded: what the tests measure is the commands alone.
    await context.exec('true');
  });
  after(() => router.shutdown());

  /** A local child whose exec calls `attack` answers, for the length of `body`. */
  async function withAttacker(
    name: string,
    attack: (this: Attacker, request: unknown, channel: ChildChannel, input?: unknown) => unknown,
    body: (liar: Context) => Promise<void>,
  ): Promise<void> {
    const liar = await router.local({ name });
    try {
      await impersonate(liar, 'exec', attack);
      await body(liar);
    } finally {
      await liar.shutdown();
    }
  }

  test('a legitimate 1 GiB command output read as it comes keeps the master under 64 MiB above its baseline', async (t) => {
    const total = 1024 * MiB;
    const baseline = heldAfterGc();
    const baseRss = rssAfterGc();
    const command = context.exec('head', ['-c', String(total), '/dev/zero'], { buffer: false, encoding: 'buffer' });
    const held: number[] = [];
    let read = 0;
    let measureAt = 128 * MiB;
    for await (const chunk of command.stdout) {
      read += chunk.length;
      if (read >= measureAt) {
        // While it runs: this reader holds one chunk, and the command waits on it.
        held.push(heldAfterGc() - baseline);
        measureAt += 128 * MiB;
      }
    }
    const result = await command;
    held.push(heldAfterGc() - baseline);
    const rss = rssAfterGc() - baseRss;
    t.diagnostic(`held above the baseline as it ran and at the end: ${held.map(mib).join(', ')}; RSS ${mib(rss)}`);
    assert.equal(read, total);
    assert.equal(result.exitCode, 0);
    assert.equal(result.stdout.length, 0);
    assert.ok(held.length >= 8);
    for (const bytes of held) assert.ok(bytes < 64 * MiB, `${mib(bytes)} held above the baseline`);
    // The process as a whole too (the young generation grows once under the load: about 32 MiB of it).
    assert.ok(rss < 64 * MiB, `RSS ${mib(rss)} above the baseline`);
  });

  test('output past maxBuffer is let go at once: a command that ignores the kill and writes 200 MiB more leaves little held', async (t) => {
    const marker = `/tmp/tendril-flood-${randomBytes(6).toString('hex')}`;
    try {
      const baseline = heldAfterGc();
      // Deaf to SIGTERM, it writes on past maxBuffer, says so in a file, and waits to be killed.
      const command = context.exec(
        'sh',
        ['-c', `trap "" TERM; head -c ${200 * MiB} /dev/zero; touch ${marker}; exec sleep 60`],
        { maxBuffer: MiB, forceKillAfterDelay: 100_000, reject: false },
      );
      await waitFor(() => existsSync(marker), 120_000);
      const held = heldAfterGc() - baseline;
      t.diagnostic(`${mib(held)} held above the baseline after 200 MiB past maxBuffer`);
      command.kill('SIGKILL');
      const result = await withLimit(command, 30_000);
      assert.equal(result.isMaxBuffer, true);
      assert.equal(result.stdout.length, MiB);
      assert.ok(held < 32 * MiB, `${mib(held)} held above the baseline`);
    } finally {
      rmSync(marker, { force: true });
    }
  });

  test('a child that ignores the kill and keeps sending past maxBuffer cannot make the master hold its output', async (t) => {
    await withAttacker(
      'bounds-flooder',
      async function (_request, channel) {
        const state = globalThis as { flooded?: number };
        state.flooded = 0;
        const chunk = Buffer.alloc(64 * 1024, 0x79);
        while (state.flooded < 200 * 1024 * 1024) {
          await channel.send([1, chunk]);
          state.flooded += chunk.length;
        }
        return this.never;
      },
      async (liar) => {
        const baseline = heldAfterGc();
        const command = liar.exec('yes', { maxBuffer: MiB, forceKillAfterDelay: 100_000 });
        command.catch(() => {});
        const flooded = () => liar.call(() => (globalThis as { flooded?: number }).flooded ?? 0);
        const deadline = Date.now() + 120_000;
        while ((await flooded()) < 200 * MiB) {
          assert.ok(Date.now() < deadline, 'the flood goes on');
          await sleep(50);
        }
        const held = heldAfterGc() - baseline;
        t.diagnostic(`${mib(held)} held above the baseline after 200 MiB past maxBuffer`);
        assert.ok(held < 32 * MiB, `${mib(held)} held above the baseline`);
      },
    );
  });

  test('output kept for the result costs the master its bytes, not the buffers each chunk arrived in', async (t) => {
    await withAttacker(
      'bounds-sparse',
      async function (_request, channel) {
        const { Message } = this.core as { Message: new (header: object, data: Uint8Array) => unknown };
        // Each byte of output rides with 60 KiB for a handle nobody listens on, so that it arrives in a read of its own.
        const junk = Buffer.alloc(60 * 1024);
        const state = globalThis as { sparse?: number };
        state.sparse = 0;
        for (let i = 0; i < 2000; i++) {
          await channel.send([1, Buffer.from('y')]);
          const header = { dst: 0, src: this.router.id, auth: this.router.id, handle: 999_999, replyTo: 0, flags: 0 };
          this.router.send(new Message(header, junk));
          state.sparse++;
        }
        return this.never;
      },
      async (liar) => {
        const baseline = heldAfterGc();
        const command = liar.exec('yes');
        command.catch(() => {});
        const sent = () => liar.call(() => (globalThis as { sparse?: number }).sparse ?? 0);
        const deadline = Date.now() + 120_000;
        while ((await sent()) < 2000) {
          assert.ok(Date.now() < deadline, 'the output goes on');
          await sleep(50);
        }
        // The last chunks are on their way behind the junk: let them land.
        await sleep(500);
        const held = heldAfterGc() - baseline;
        t.diagnostic(`${mib(held)} held above the baseline for 2000 bytes of output kept`);
        assert.ok(held < 16 * MiB, `${mib(held)} held above the baseline`);
      },
    );
  });

  test('a child that ignores the kill past maxBuffer cannot hold the command: it fails saying so when the backstop passes', async () => {
    await withAttacker(
      'bounds-deaf',
      async (_request, channel) => {
        const chunk = Buffer.alloc(64 * 1024, 0x79);
        // Until the master lets go of the channel.
        for (;;) await channel.send([1, chunk]);
      },
      async (liar) => {
        const command = liar.exec('yes', { maxBuffer: MiB, forceKillAfterDelay: false });
        await assert.rejects(withLimit(command, BACKSTOP_GRACE + 15_000), (error: unknown) => {
          assert.ok(error instanceof CommandError, String(error));
          assert.equal(error.result.isMaxBuffer, true);
          assert.equal(error.result.stdout.length, MiB);
          assert.match(
            error.message,
            /wrote more than maxBuffer \(1048576 bytes\) on stdout, and the context did not report its end within 5000 ms more/,
          );
          return true;
        });
        assert.equal(command.kill(), false, 'it is over');
      },
    );
  });

  test('a child that never answers cannot hold a command past its timeout, nor past an abort', async () => {
    await withAttacker(
      'bounds-silent',
      function () {
        return this.never;
      },
      async (liar) => {
        const timed = liar.exec('sleep', ['30'], { timeout: 200, forceKillAfterDelay: 300 });
        await assert.rejects(withLimit(timed, 200 + 300 + BACKSTOP_GRACE + 15_000), (error: unknown) => {
          assert.ok(error instanceof CommandError, String(error));
          assert.equal(error.result.timedOut, true);
          assert.match(error.message, /timed out after 200 ms, and the context did not report its end within 5300 ms/);
          return true;
        });
        const controller = new AbortController();
        const aborted = liar.exec('sleep', ['30'], { signal: controller.signal, forceKillAfterDelay: false });
        controller.abort();
        await assert.rejects(withLimit(aborted, BACKSTOP_GRACE + 15_000), (error: unknown) => {
          assert.ok(error instanceof CommandError, String(error));
          assert.equal(error.result.isCanceled, true);
          assert.match(error.message, /was aborted, and the context did not report its end within 5000 ms/);
          return true;
        });
      },
    );
  });

  test('a child that sends malformed output and never answers fails the command with a ProtocolError when the backstop passes', async () => {
    await withAttacker(
      'bounds-garbled',
      async function (_request, channel) {
        await channel.send(['not', 'output']);
        return this.never;
      },
      async (liar) => {
        const command = liar.exec('yes', { forceKillAfterDelay: false });
        await assert.rejects(withLimit(command, BACKSTOP_GRACE + 15_000), (error: unknown) => {
          assert.ok(error instanceof ProtocolError, String(error));
          assert.match(error.message, /its output was not \[stream, bytes\]/);
          return true;
        });
      },
    );
  });

  test("after a command has settled, a child that keeps its end of the output channel open cannot keep values queued in the master: the command's receiver is let go of", async () => {
    await withAttacker(
      'bounds-ended',
      async function (this: Attacker, request, channel) {
        const outcome = { pid: 1, exitCode: 0, signal: null, durationMs: 1, timedOut: false, chunks: 0, tail: [] };
        if ((request as { env?: Record<string, string> }).env?.GARBLED === '1') {
          // Output that is not [stream, bytes]: the command fails at the first value, the others unread.
          for (let i = 0; i < 8; i++) void channel.send(['not output', Buffer.alloc(100 * 1024)]);
          await new Promise((resolve) => setTimeout(resolve, 200));
          return outcome;
        }
        // Once the call has settled (its end of the channel closed), eight chunks of stdout written as raw messages to the master's end.
        const master = (channel as unknown as { peer: { contextId: number; handle: number } }).peer;
        const { Message, encode } = this.core as {
          Message: new (header: object, data: Uint8Array) => unknown;
          encode(value: unknown): Uint8Array;
        };
        setTimeout(() => {
          for (let i = 0; i < 8; i++) {
            this.router.send(
              new Message(
                {
                  dst: master.contextId,
                  src: this.router.id,
                  auth: this.router.id,
                  handle: master.handle,
                  replyTo: 0,
                  flags: 0,
                },
                encode([1, Buffer.alloc(100 * 1024)]),
              ),
            );
          }
        }, 100);
        return outcome;
      },
      async (liar) => {
        const core = switchOf(router) as unknown as { handlers: { size: number } };
        const handlersBefore = core.handlers.size;
        for (let i = 0; i < 4; i++) {
          assert.equal((await liar.exec('true')).exitCode, 0);
          await assert.rejects(liar.exec('yes', { env: { GARBLED: '1' } }), ProtocolError);
        }
        await sleep(500);
        const charged = switchOf(router).holdings.snapshot().get(liar.id) ?? 0;
        const handlers = core.handlers.size - handlersBefore;
        assert.ok(
          charged === 0 && handlers <= 0,
          `after 8 commands settled: ${mib(charged)} still charged to the child and queued in the master, ${handlers} more handlers registered`,
        );
      },
    );
  });

  /**
   * An input the master streams to a command: 1024 chunks of 64 KiB, made
   * as they are taken; `ended` once its `finally` has run (its reader let
   * go of it).
   */
  function trackedInput(): { input: AsyncGenerator<Uint8Array>; produced(): number; ended(): boolean } {
    let produced = 0;
    let ended = false;
    async function* input(): AsyncGenerator<Uint8Array> {
      try {
        for (let i = 0; i < 1024; i++) {
          produced++;
          yield Buffer.alloc(64 * 1024, 1);
        }
      } finally {
        ended = true;
      }
    }
    return { input: input(), produced: () => produced, ended: () => ended };
  }

  /** What keeps the master alive: calls, receives and sends in flight. */
  function inflight(): number {
    return (switchOf(router) as unknown as { holds: { count: number } }).holds.count;
  }

  for (const opens of [false, true]) {
    test(`an aborted command lets go of its input${opens ? ' (the child opened its end and returns no credit)' : ' (the child never opens its end)'}: its reader is ended and nothing stays in flight`, async () => {
      await withAttacker(
        `bounds-input-${opens}`,
        function (this: Attacker, _request: unknown, _out: unknown, input?: unknown) {
          // Opening the end (without reading) says hello: the master sends a window, then waits for credit.
          if ((globalThis as { opens?: boolean }).opens) (input as AsyncIterable<unknown>)[Symbol.asyncIterator]();
          return this.never;
        },
        async (liar) => {
          await liar.call((value: boolean) => {
            (globalThis as { opens?: boolean }).opens = value;
          }, opens);
          const tracked = trackedInput();
          const controller = new AbortController();
          const command = liar.exec('cat', {
            input: tracked.input,
            signal: controller.signal,
            forceKillAfterDelay: false,
          });
          await sleep(500);
          controller.abort();
          await assert.rejects(withLimit(command, BACKSTOP_GRACE + 15_000));
          await sleep(100);
          assert.ok(
            tracked.ended() && inflight() === 0,
            `after the command settled: its input was ${tracked.ended() ? '' : 'not '}ended (${tracked.produced()} chunks taken), ${inflight()} waits in flight keep the master alive`,
          );
        },
      );
    });
  }

  test('a command that exits 0 while its child holds its input open and returns no credit lets go of its input: its reader is ended and nothing stays in flight, so the master can exit', async () => {
    await withAttacker(
      'bounds-input-exit',
      async function (this: Attacker, _request: unknown, _out: unknown, input?: unknown) {
        (input as AsyncIterable<unknown>)[Symbol.asyncIterator]();
        // Long enough for the master to fill the input's window (16 chunks) and wait for credit.
        await new Promise((resolve) => setTimeout(resolve, 500));
        return { pid: 1, exitCode: 0, signal: null, durationMs: 1, timedOut: false, chunks: 0, tail: [] };
      },
      async (liar) => {
        const tracked = trackedInput();
        const result = await withLimit(liar.exec('cat', { input: tracked.input }), 15_000);
        assert.equal(result.exitCode, 0);
        await sleep(100);
        assert.ok(
          tracked.ended() && inflight() === 0,
          `after the command settled: its input was ${tracked.ended() ? '' : 'not '}ended (${tracked.produced()} chunks taken), ${inflight()} waits in flight keep the master alive`,
        );
      },
    );
  });

  test("a command's kept output is charged to its child's account: past maxHeldBytes it is killed and fails saying so", async () => {
    const small = new Router({ maxHeldBytes: 4 * MiB });
    try {
      const host = await small.local({ name: 'bounds-small' });
      const account = () => switchOf(small).holdings.snapshot().get(host.id) ?? 0;
      const fits = await host.exec('head', ['-c', String(MiB), '/dev/zero'], { encoding: 'buffer' });
      assert.equal(fits.stdout.length, MiB);
      assert.equal(account(), 0, 'given back once the result is made');
      await assert.rejects(
        host.exec('head', ['-c', String(64 * MiB), '/dev/zero'], { encoding: 'buffer' }),
        (error: unknown) => {
          assert.ok(error instanceof CommandError, String(error));
          assert.ok(error.cause instanceof HeldBytesError, String(error.cause));
          assert.equal(error.result.failed, true);
          assert.ok(error.result.stdout.length <= 4 * MiB);
          // The first line: the rest quotes the output, 4 MiB of NULs.
          assert.match(
            error.message.split('\n')[0] as string,
            /its output kept for the result, with room for the 1048576 bytes more that may be on their way, passed what context 'bounds-small' \(id \d+\) and the contexts behind it may make 'master' hold \(maxHeldBytes, 4194304 bytes/,
          );
          return true;
        },
      );
      assert.equal(account(), 0);
      // A reader slower than the command: its window of output waits in the master, charged to the same
      // account. The command must stop at its own limit; the child must not be cut off for the queue.
      // Some stderr first, so the stdout kept is not all the account holds besides the queue.
      const slow = host.exec('sh', [
        '-c',
        "head -c 60000 /dev/zero >&2; head -c 67108864 /dev/zero | tr '\\0' x | fold -w 49999",
      ]);
      const failed = assert.rejects(slow, (error: unknown) => {
        assert.ok(error instanceof CommandError, String(error));
        assert.ok(error.cause instanceof HeldBytesError, String(error.cause));
        return true;
      });
      for await (const _line of slow.lines()) await new Promise((resolve) => setTimeout(resolve, 20));
      await failed;
      assert.equal(await host.call(() => 'still connected'), 'still connected');
      assert.equal(account(), 0);
      // The same output read as it comes, not kept, is not limited.
      let read = 0;
      for await (const chunk of host.exec('head', ['-c', String(64 * MiB), '/dev/zero'], {
        encoding: 'buffer',
        buffer: false,
      }).stdout)
        read += chunk.length;
      assert.equal(read, 64 * MiB);
    } finally {
      await small.shutdown();
    }
  });
});
