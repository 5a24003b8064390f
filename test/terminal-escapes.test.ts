// Remote text reaching the operator's terminal (issue 40, finding 4): a
// hostile child, command, start, intermediate and tarball each write
// title changes (OSC ... BEL), cursor moves (CSI), C1 controls, `\r`
// overwrites, bidi overrides and invisible characters into what the master
// prints: errors (their message, stack, name, code and descriptive
// fields, as `util.inspect`, `String()` and an uncaught exception show
// them), warnings, `debug` lines, names, fleet reports. Each arrives
// escaped (`\x1b`, `\u202e`), in one function's style; the data a program
// needs raw (a command's output, a remote exception's data fields) stays raw.
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { inspect, promisify } from 'node:util';
import {
  BootstrapError,
  CallError,
  ChannelError,
  CommandError,
  type Context,
  ContextDisconnectedError,
  escapeTerminalText,
  FileTransferError,
  Router,
  type RouterWarning,
} from 'tendril';
import { DEL_ROUTE, encode } from '#dist/internal.js';
import { frameBytes, writeBytes } from './support/frames.js';
import { ROOT, waitFor } from './support/procs.js';
import { ESCAPED_TITLE, HOSTILE, unsafeCharacters } from './support/terminal.js';

/** Asserts that `text` (what a printer would write) holds nothing that drives a terminal, and shows the title change escaped. */
function assertInert(text: string, what: string, escaped = true): void {
  assert.deepEqual(
    unsafeCharacters(text),
    [],
    `${what} carries no control or format character: ${JSON.stringify(text)}`,
  );
  if (escaped) {
    // util.inspect writes ESC as \x1B, tendril as \x1b.
    assert.ok(
      text.toLowerCase().includes(ESCAPED_TITLE),
      `${what} shows the hostile text escaped: ${JSON.stringify(text)}`,
    );
  }
}

/** The control characters (C0 but tab and newline, DEL, C1) among `unsafeCharacters(text)`. */
const controlsIn = (text: string) =>
  unsafeCharacters(text).filter((char) => /^U\+00([01][0-9A-F]|7F|[89][0-9A-F])$/.test(char));

/**
 * Every way a program prints an error, each checked. `dataFields`: the
 * error carries raw data fields with format characters (bidi...), which
 * util.inspect shows quoted with its controls escaped but its format
 * characters as they are: then only the controls are checked there.
 */
function assertErrorInert(error: unknown, fields: string[] = [], dataFields = false): void {
  assert.ok(error instanceof Error);
  assertInert(error.message, 'message');
  assertInert(String(error), 'String(error)');
  assertInert(error.stack ?? '', 'stack');
  assertInert(error.name, 'name', false);
  for (const field of fields) assertInert(String((error as unknown as Record<string, unknown>)[field]), field);
  // util.inspect (console.error, an uncaught exception) also shows every own field: data fields included.
  const shown = inspect(error, { depth: 4 });
  if (dataFields) assert.deepEqual(controlsIn(shown), [], `util.inspect(error) has no control character: ${shown}`);
  else assert.deepEqual(unsafeCharacters(shown), [], `util.inspect(error) is inert: ${shown}`);
}

describe('escapeTerminalText', () => {
  test('escapes C0 and C1 controls, DEL, format characters and lone surrogates; keeps tab, joiners and pairs', () => {
    assert.equal(escapeTerminalText('\x1b]0;t\x07\x1b[2J\r\x00\x7f\u009b'), '\\x1b]0;t\\x07\\x1b[2J\\r\\x00\\x7f\\x9b');
    assert.equal(escapeTerminalText('a\nb'), 'a\\nb');
    assert.equal(escapeTerminalText('a\nb\r\n', { keepNewlines: true }), 'a\nb\\r\n');
    assert.equal(
      escapeTerminalText('\u202eevil\u202c \u2066x\u2069 \u200e\u200f\u061c'),
      '\\u202eevil\\u202c \\u2066x\\u2069 \\u200e\\u200f\\u061c',
    );
    assert.equal(
      escapeTerminalText('zw\u200b\u2060\ufeff\u00ad \u2028\u2029'),
      'zw\\u200b\\u2060\\ufeff\\xad \\u2028\\u2029',
    );
    assert.equal(escapeTerminalText('tag \u{e0041} lone \ud800 \udc00'), 'tag \\u{e0041} lone \\ud800 \\udc00');
    // Tab, a surrogate pair, the joiners of emoji sequences and scripts, and ordinary text are left alone.
    const kept = 'tab\there 😀 👨\u200d👩\u200d👧 می\u200cخواهم naïve — ok';
    assert.equal(escapeTerminalText(kept), kept);
    assert.equal(escapeTerminalText(kept, { keepNewlines: true }), kept);
  });

  test('is idempotent, has nothing left to escape in what it wrote, and is linear on 4 MiB of hostile text', () => {
    const once = escapeTerminalText(HOSTILE);
    assert.equal(escapeTerminalText(once), once);
    assert.deepEqual(unsafeCharacters(once), []);
    const started = performance.now();
    const big = escapeTerminalText('\x1b\u202e'.repeat(2 * 1024 * 1024));
    const ms = performance.now() - started;
    assert.equal(big.length, 4 * 1024 * 1024 * 5);
    // About 0.5 s here; a pattern that backtracked or recursed per character would not finish (or overflow the stack).
    assert.ok(ms < 10_000, `4 MiB escaped in ${ms.toFixed(0)} ms`);
  });
});

describe('remote text in errors', () => {
  let router: Router;
  let child: Context;
  const warnings: RouterWarning[] = [];

  before(async () => {
    router = new Router({ output: 'events' });
    router.on('warning', (warning) => warnings.push(warning));
    child = await router.local({ name: 'hostile' });
  });
  after(() => router.shutdown());

  test("a remote exception's name, message, stack and code arrive escaped; its data fields raw", async () => {
    const error = await child
      .call((text: string) => {
        const thrown = new Error(text) as Error & { code: string; body: string };
        thrown.name = `Error${text}`;
        thrown.code = `E${text}`;
        thrown.body = `raw \x1b]0;data\x07`;
        thrown.stack = `Error: ${text}\n    at ${text} (/srv/app.js:1:1)\r`;
        throw thrown;
      }, HOSTILE)
      .catch((caught: unknown) => caught);
    assert.ok(error instanceof CallError);
    // Its `code` is a data field too (remoteFields.code, raw): util.inspect shows its bidi override as it is.
    assertErrorInert(error, ['remoteName', 'remoteMessage', 'remoteStack', 'remoteCode'], true);
    assert.ok(error.remoteStack.includes('\n    at '), 'the stack keeps its lines');
    assert.ok(!error.remoteName.includes('\n'), 'the name is kept to one line');
    // The exception's data: as sent, for the program; util.inspect quoted it with its controls escaped (checked above).
    assert.equal((error as CallError & { body: string }).body, 'raw \x1b]0;data\x07');
    assert.equal(error.remoteFields.body, 'raw \x1b]0;data\x07');
  });

  test('a tendril error a child forged (its message, reason and stack) is rebuilt as its class, escaped', async () => {
    const error = await child
      .call((text: string) => {
        const { ChannelError } = require('tendril') as typeof import('tendril');
        const forged = new ChannelError('web1', 7, 'gone');
        // What a compromised child sends: its own fields, past its own constructor's escaping.
        Object.assign(forged, { message: text, reason: text, contextName: text });
        forged.stack = `ChannelError: ${text}\n    at ${text} (/srv/app.js:1:1)`;
        throw forged;
      }, HOSTILE)
      .catch((caught: unknown) => caught);
    assert.ok(error instanceof ChannelError, 'rebuilt as its own class');
    assertErrorInert(error, ['reason', 'contextName']);
    assert.match(error.stack ?? '', /raised in context 'hostile'/);
  });

  test('a remote error of 66 MiB of control characters arrives cut to 64 Ki characters and escaped: the master lives on', async () => {
    // Escaped whole, it made V8 gather more matches than it can hold: a fatal error of the whole master.
    const thrown = await child
      .call(() => {
        const error = new Error(Buffer.alloc(66 * 1024 * 1024).toString('latin1'));
        error.stack = 'Error: a stack cut short, so that the reply fits maxMessageSize';
        throw error;
      })
      .catch((error: unknown) => error);
    assert.ok(thrown instanceof CallError, String(thrown));
    assert.equal(
      thrown.remoteMessage,
      `${'\\x00'.repeat(64 * 1024)}… (${66 * 1024 * 1024 - 64 * 1024} more characters left out)`,
    );
    const returned = await child.call(() => new Error('\x1b'.repeat(66 * 1024 * 1024)));
    assert.ok(returned instanceof Error && returned.message.length < 300 * 1024, 'an Error value is cut too');
  });

  test("a tendril error's declared fields count against the budget of field data: a list of 64 MiB arrives cut", async () => {
    const thrown = await child
      .call(() => {
        const core = require('tendril:core') as { TendrilError: new (message: string, code: string) => Error };
        const error = new core.TendrilError('short message', 'ERR_X') as Error & Record<string, unknown>;
        // Escaped and kept whole, one such list was held as 256 Mi characters; 15 errors kept, the master ran out of heap.
        error.names = Array.from({ length: 1024 }, () => '\u0000'.repeat(64 * 1024));
        error.methodsTried = Array.from({ length: 64 }, () => '\u0000'.repeat(1024));
        throw error;
      })
      .catch((error: unknown) => error as Record<string, unknown>);
    assert.equal(thrown.names, undefined, 'a list past the bounds is left out');
    const tried = thrown.methodsTried as string[];
    assert.ok(Array.isArray(tried) && tried.length === 64, 'a list within them arrives');
    assert.ok(
      tried.every((item) => item === '\\x00'.repeat(1024)),
      'escaped',
    );
  });

  test('a dead reply of 66 MiB of escape characters ends the call with a reason cut short: the master lives on', async () => {
    const liar = await router.local({ name: 'long-reasons' });
    try {
      await liar.call(() => {
        const core = require('tendril:core') as {
          CALL_FUNCTION: number;
          contextRuntime(): {
            router: {
              id: number;
              handlers: Map<number, { fn: (message: { src: number; replyTo: number }) => void }>;
              send(message: unknown): void;
            };
          };
          Message: new (header: object, data: Uint8Array) => unknown;
          encode(value: unknown): Uint8Array;
        };
        const own = core.contextRuntime().router;
        const entry = own.handlers.get(core.CALL_FUNCTION);
        if (entry) {
          entry.fn = (message) =>
            own.send(
              new core.Message(
                { dst: message.src, src: own.id, auth: own.id, handle: message.replyTo, replyTo: 0, flags: 1 },
                core.encode('\x1b'.repeat(66 * 1024 * 1024)),
              ),
            );
        }
      });
      const failed = await liar.call(() => 1).catch((error: unknown) => error);
      assert.ok(failed instanceof ChannelError, String(failed));
      assert.ok(failed.reason.length < 5 * 4 * 1024 + 100, `a reason of ${failed.reason.length} characters`);
      assert.match(failed.reason, /^(\\x1b)+… \(\d+ more characters left out\)$/);
    } finally {
      await liar.shutdown();
    }
  });

  test('an Error returned as a value arrives with its name and message escaped', async () => {
    const value = await child.call((text: string) => {
      const error = new TypeError(text);
      error.name = `TypeError${text}`;
      return error;
    }, HOSTILE);
    assert.ok(value instanceof Error);
    assertErrorInert(value);
  });

  test("a command's stderr is escaped in its CommandError; result.stderr is the raw output", async () => {
    const error = await child.exec('sh', ['-c', 'printf "%s" "$1" >&2; exit 3', 'sh', HOSTILE]).catch((e) => e);
    assert.ok(error instanceof CommandError);
    assert.equal(error.exitCode, 3);
    assertInert(error.message, 'message');
    assertInert(String(error), 'String(error)');
    assertInert(error.stack ?? '', 'stack');
    // What the command wrote, byte for byte but the lone surrogate (UTF-8 cannot carry it: U+FFFD).
    assert.equal(error.result.stderr, HOSTILE.replace('\ud800', '\ufffd'));
  });

  test('a start whose program prints a hostile banner and exits: the BootstrapError quotes it escaped', async () => {
    const error = await router
      .command({ name: 'bannered', argv: ['sh', '-c', 'printf "%s\\n" "$0" >&2; exit 1', HOSTILE] })
      .catch((e: unknown) => e);
    assert.ok(error instanceof BootstrapError, String(error));
    assertErrorInert(error, ['lastOutput']);
  });

  test("a module name a child asks for reaches the Router's warning and the child's error escaped", async () => {
    const before = warnings.length;
    const error = await child.call((text: string) => require(`left-pad/../${text}`), HOSTILE).catch((e) => e);
    assert.ok(error instanceof CallError);
    assertErrorInert(error);
    await waitFor(() => warnings.length > before);
    const refused = warnings.slice(before).find((warning) => warning.code === 'module-refused');
    assert.ok(refused, 'a module-refused warning');
    assertInert(refused.message, 'warning message');
  });

  test('a path a transfer names in its error is escaped', () => {
    // The error a receiving side makes of an entry the sending side named (a made-up name is the attack).
    const error = new FileTransferError('ERR_TENDRIL_BAD_ENTRY', 'hostile', `dir/${HOSTILE}`, 'cannot write');
    assertErrorInert(error, ['path']);
  });

  test("a fleet's report escapes labels, values and failures, each kept to its line", async () => {
    const fleet = router.fleet([child], async (context) =>
      context.call((text: string) => `value ${text}\nfake line`, HOSTILE),
    );
    const summary = await fleet.summary();
    for (const values of [true, (value: string) => value]) {
      const report = summary.format({ values: values as never });
      assertInert(report, 'the report');
      assert.equal(report.split('\n').length, 4, `one line per entry: ${report}`);
    }
    const failing = router.fleet([child], (context) =>
      context.call((text: string) => {
        throw new Error(text);
      }, HOSTILE),
    );
    const failed = await failing.summary();
    assertInert(failed.format(), 'the report of a failure');
  });
});

describe('names and reasons an intermediate reports', () => {
  let router: Router;
  let via: Context;
  const routes: string[] = [];

  before(async () => {
    router = new Router({ output: 'events' });
    router.on('route', (_id: number, name: string) => routes.push(name));
    via = await router.local({ name: 'intermediate' });
    // The intermediate names whatever it starts as it likes: its CONNECT handler renames each new context.
    await via.call((text: string) => {
      const core = require('tendril:core') as {
        contextRuntime(): { router: unknown };
        CONNECT: number;
        Message: { encoded(header: object, value: unknown): unknown };
      };
      const own = core.contextRuntime().router as {
        handlers: Map<number, { fn: (message: unknown, stream: unknown) => void }>;
      };
      const entry = own.handlers.get(core.CONNECT);
      if (!entry) throw new Error('no CONNECT handler');
      const honest = entry.fn;
      entry.fn = (message, stream) => {
        const m = message as {
          dst: number;
          src: number;
          auth: number;
          handle: number;
          replyTo: number;
          unpack(): unknown;
        };
        const request = m.unpack() as { options: Record<string, unknown> };
        request.options = { ...request.options, name: `child ${text}` };
        honest(
          core.Message.encoded({ dst: m.dst, src: m.src, auth: m.auth, handle: m.handle, replyTo: m.replyTo }, request),
          stream,
        );
      };
    }, HOSTILE);
  });
  after(() => router.shutdown());

  test('the name of a context an intermediate started arrives escaped: its Context, route event and errors', async () => {
    const renamed = await router.local({ name: 'asked-for', via });
    assertInert(renamed.name, 'context name');
    assert.ok(
      routes.some((name) => name === renamed.name),
      `the route event names it so: ${routes}`,
    );
    for (const name of routes) assertInert(name, 'route event name', false);
    const error = await renamed
      .call(() => {
        throw new Error('plain');
      })
      .catch((e: unknown) => e);
    assert.ok(error instanceof CallError);
    assertInert(error.message, 'message naming the context');
    assertInert(error.contextName, 'contextName');
  });

  test('why an intermediate says a context went away (DEL_ROUTE) arrives escaped in the errors of calls to it', async () => {
    const lost = await router.local({ name: 'to-lose', via });
    await via.call(
      writeBytes,
      frameBytes({ dst: 0, src: via.id, handle: DEL_ROUTE }, encode([lost.id, `gone ${HOSTILE}`])),
    );
    let gone: unknown;
    for (let i = 0; i < 100 && gone === undefined; i++) {
      gone = await lost
        .call(() => 1)
        .then(
          () => undefined,
          (e: unknown) => e,
        );
      if (gone === undefined) await new Promise((resolve) => setTimeout(resolve, 20));
    }
    assert.ok(gone instanceof ContextDisconnectedError, String(gone));
    assertErrorInert(gone, ['reason']);
  });
});

describe('what a master process prints', () => {
  /** Runs test/fixtures/hostile-error-master.js in `mode`; its exit code and stderr. */
  async function runMaster(mode: string, env: NodeJS.ProcessEnv = {}): Promise<{ code: number; stderr: string }> {
    const file = join(ROOT, 'build', 'test', 'fixtures', 'hostile-error-master.js');
    try {
      await promisify(execFile)(process.execPath, [file, mode], {
        env: { ...process.env, DEBUG: '', ...env },
        timeout: 30_000,
      });
      return { code: 0, stderr: '' };
    } catch (error) {
      const { code, stderr } = error as { code: number; stderr: string };
      return { code, stderr };
    }
  }

  for (const mode of ['call', 'revived', 'value', 'command', 'start']) {
    test(`an uncaught error (${mode}) is printed inert by Node`, async () => {
      const { code, stderr } = await runMaster(mode);
      assert.equal(code, 1, stderr);
      assert.ok(stderr.includes(ESCAPED_TITLE), stderr);
      // No ESC, BEL, CSI or \r but as escapes; bidi and invisible characters only inside the quoted data fields util.inspect shows.
      // Data fields are raw (a remote exception's remoteFields; a command's result, and its command, given by the
      // program): util.inspect shows them quoted, their controls escaped, their format characters as they are.
      const outsideData = stderr
        .split('\n')
        .filter((line) => !/^\s+(code: 'E|command: `|stderr: ')/.test(line))
        .join('\n');
      assert.deepEqual(unsafeCharacters(outsideData), [], stderr);
      assert.deepEqual(controlsIn(stderr), [], `no control character anywhere: ${stderr}`);
    });
  }

  test("with DEBUG=tendril:*, debug lines and the program's printed warnings are inert too", async () => {
    const { code, stderr } = await runMaster('module', { DEBUG: 'tendril:*' });
    assert.equal(code, 1, stderr);
    assert.match(stderr, /tendril:responder .*refused/);
    assert.match(stderr, /^warning: the master refused/m);
    assert.deepEqual(unsafeCharacters(stderr), [], stderr);
  });
});

describe('the tendril-runtime command', () => {
  let scratch: string;
  before(() => {
    scratch = mkdtempSync(join(tmpdir(), 'tendril-terminal-'));
  });
  after(() => rmSync(scratch, { recursive: true, force: true }));

  test('a tarball whose manifest names itself with control characters is refused, its name escaped', async () => {
    const pkg = join(scratch, 'package');
    mkdirSync(pkg);
    writeFileSync(join(pkg, 'package.json'), JSON.stringify({ name: `node-linux-${HOSTILE}`, version: '1.0.0' }));
    const tarball = join(scratch, 'hostile.tgz');
    await promisify(execFile)('tar', ['-czf', tarball, '-C', scratch, 'package']);
    const bin = join(ROOT, 'dist', 'bin', 'tendril-runtime.js');
    const failure = await promisify(execFile)(process.execPath, [
      bin,
      'add',
      tarball,
      '--directory',
      join(scratch, 'store'),
    ]).then(
      () => assert.fail('the tarball was added'),
      (error: { code: number; stderr: string }) => error,
    );
    assert.equal(failure.code, 1, failure.stderr);
    assert.match(failure.stderr, /is not a Node runtime package/);
    assertInert(failure.stderr, 'its stderr');
  });
});
