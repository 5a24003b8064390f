/**
 * Text a target, a child or another account controls, played for real:
 * MiBs of what makes a backtracking pattern quadratic, written by real
 * processes on a start's path (a su that prints before its prompt, a
 * container tool that complains at length, a child whose error has a
 * hostile stack, a child that sends its output a byte at a time), and
 * every regular expression in src/ run over text built from its own words.
 * Each bound is generous: the linear code takes milliseconds where the
 * quadratic code it replaced took seconds to minutes.
 */
import assert from 'node:assert/strict';
import { chmodSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, relative } from 'node:path';
import { after, before, describe, test } from 'node:test';
import * as acorn from 'acorn';
import { stop as stopEsbuild, transformSync } from 'esbuild';
import { BootstrapError, CallError, ConnectTimeoutError, type Context, NotAllowedError, Router } from 'tendril';
import { hostsMatch, PASSWORD_PROMPT, parseKnownHosts, toRemoteErrorInfo } from '#dist/internal.js';
import { type Attacker, impersonate } from './support/hostile.js';
import {
  assertLinear,
  assertPatternLinear,
  hostileFamilies,
  longestStall,
  MiB,
  repeated,
  wordsOf,
} from './support/hostile-text.js';
import { ROOT, withLimit } from './support/procs.js';

/** Milliseconds `body` took, and what it settled with (a rejection is returned, not thrown). */
async function timed(body: () => Promise<unknown>): Promise<{ ms: number; outcome: unknown }> {
  const started = Date.now();
  let outcome: unknown;
  try {
    outcome = await body();
  } catch (error) {
    outcome = error;
  }
  return { ms: Date.now() - started, outcome };
}

describe('text a target controls', { timeout: 300_000 }, () => {
  let router: Router;
  let dir: string;
  /** Writes an executable script of the test's own, removed with `dir`. */
  const script = (name: string, body: string): string => {
    const path = join(dir, name);
    writeFileSync(path, `#!/bin/sh\n${body}\n`);
    chmodSync(path, 0o755);
    return path;
  };
  /** Writes `text` to a file of the test's own. */
  const file = (name: string, text: string): string => {
    const path = join(dir, name);
    writeFileSync(path, text);
    return path;
  };

  before(() => {
    // The hostile lines are a child's output too: kept as log events, not printed on the test's stderr.
    router = new Router({ output: 'events' });
    dir = mkdtempSync(join(tmpdir(), 'tendril-hostile-text-'));
  });
  after(async () => {
    await router.shutdown();
    rmSync(dir, { recursive: true, force: true });
  });

  describe('a become conversation (issue 40, finding 1)', () => {
    /** 4 MiB of "password" without a colon: what made the prompt pattern quadratic. */
    const passwords = () => file('passwords', repeated('password', 4 * MiB));

    test('su through a shell that writes 4 MiB of "password" before a prompt split across chunks: answered, and the master never stalls', async (t) => {
      const hostile = passwords();
      // A su as a hostile target account's profile makes it: the text, then the real prompt, in two writes.
      const su = script(
        'su-after-passwords',
        [
          `cat '${hostile}' >&2`,
          "printf '\\nPass' >&2",
          'sleep 0.3',
          "printf 'word: ' >&2",
          'read -r answer',
          `[ "$answer" = 'right horse' ] || { echo 'su: Authentication failure' >&2; exit 1; }`,
          'while [ "$1" != -c ]; do shift; done',
          'exec /bin/sh -c "$2"',
        ].join('\n'),
      );
      const { value: context, stall } = await longestStall(() =>
        router.su({ suPath: su, username: 'nobody', password: 'right horse', connectTimeout: 60_000 }),
      );
      t.diagnostic(`the master's longest stall while the start wrote 4 MiB: ${stall} ms`);
      assert.equal(await context.call(() => 6 * 7), 42);
      // Generous: a loaded machine or a collection can stall a second; the quadratic pattern froze it for minutes.
      assert.ok(stall < 3000, `the master's event loop stalled for ${stall} ms`);
      await context.shutdown();
    });

    test('connectTimeout holds while a start writes "password" without end', async (t) => {
      // One process (a shell pipeline would leave its writer behind when the start is killed).
      const su = script(
        'su-forever',
        `exec '${process.execPath}' -e "const b = Buffer.from('password'.repeat(8192)); for (;;) require('fs').writeSync(2, b)"`,
      );
      const { ms, outcome } = await timed(() => router.su({ suPath: su, username: 'nobody', connectTimeout: 2000 }));
      t.diagnostic(`a connectTimeout of 2000 ms ended the start after ${ms} ms`);
      assert.ok(outcome instanceof ConnectTimeoutError, String(outcome));
      assert.ok(ms < 6000, `the start ended after ${ms} ms`);
    });

    test('a refusal after MiBs of hostile text is still recognised, and its error quotes a bounded tail ending with it', async () => {
      const hostile = passwords();
      const su = script(
        'su-refusing',
        `cat '${hostile}' >&2; printf '\\nsu: user nosuch does not exist or the user entry does not contain all the required fields\\n' >&2; exit 1`,
      );
      const { ms, outcome } = await timed(() => router.su({ suPath: su, username: 'nosuch', connectTimeout: 30_000 }));
      assert.ok(outcome instanceof NotAllowedError, String(outcome));
      assert.ok(ms < 5000, `the refusal took ${ms} ms`);
      assert.match(outcome.lastOutput, /su: user nosuch does not exist[^\n]*$/);
      assert.ok(outcome.lastOutput.length <= 4096, `${outcome.lastOutput.length} characters quoted`);
    });

    test('sudo: a target that learnt the prompt marker (it is on the command line) and repeats it cannot stall the master', async (t) => {
      // "[tendril:<token>] password:" is sudo's -p argument: a wrapper sees it as any local process could.
      const sudo = script(
        'sudo-repeating-marker',
        [
          'while [ "$1" != -p ]; do shift; done',
          `exec '${process.execPath}' -e "const m = process.argv[1] + ']x'; const line = m.repeat(Math.floor(60000 / m.length)) + '\\\\ny\\\\n'; for (let i = 0; i < 64; i++) require('fs').writeSync(2, line); process.exit(1)" "$2"`,
        ].join('\n'),
      );
      const { value, stall } = await longestStall(() =>
        timed(() => router.sudo({ sudoPath: sudo, username: 'nobody', connectTimeout: 30_000 })),
      );
      t.diagnostic(`failed after ${value.ms} ms with ${String(value.outcome)}; longest stall ${stall} ms`);
      // Where a read ends inside the marker's line, the target has forged sudo's prompt: a PasswordError then.
      assert.ok(value.outcome instanceof BootstrapError, String(value.outcome));
      assert.ok(stall < 3000, `the master's event loop stalled for ${stall} ms`);
    });

    test('the prompt pattern is linear on 2 MiB of hostile text, and still knows its prompts', () => {
      const words = [...wordsOf(PASSWORD_PROMPT), 'password:', 'password x', 'Mot de passe'];
      assertPatternLinear(PASSWORD_PROMPT, hostileFamilies(words, 2 * MiB));
      for (const prompt of [
        'Password: ',
        'Passwort: ',
        'Mot de passe : ',
        'Пароль: ',
        'パスワード：',
        'password password x:\n',
      ]) {
        assert.match(prompt, PASSWORD_PROMPT, prompt);
      }
      for (const other of ['Last login: yesterday', 'password\nthen: ', 'password: then more']) {
        assert.doesNotMatch(other, PASSWORD_PROMPT, other);
      }
    });
  });

  describe("a start's complaints, read for the error (tool methods, openssh, the shell)", () => {
    /**
     * What the start's error is looked for in: the last 20 lines of up to
     * 64 KiB. 4 MiB is written, of which 20 lines of `lines` (cycled)
     * reach the patterns: 1.25 MiB. A line is a start, then a unit
     * repeated to 64 KiB.
     */
    const complaining = (name: string, lines: Line[]) => {
      const text: string[] = [repeated(lines[0]?.[1] ?? 'x', 2 * MiB)];
      for (let i = 0; text.length < 64; i++) {
        const [start, unit] = lines[i % lines.length] as Line;
        text.push(start + repeated(unit, 64 * 1024 - 1 - start.length));
      }
      return script(name, `cat '${file(`${name}.txt`, `${text.join('\n')}\n`)}' >&2; exit 1`);
    };
    /** A line of hostile text: how it starts, and the unit repeated after that. */
    type Line = [string, string];
    /** For each table, the lines that made its patterns quadratic: a pattern's start repeated without its end. */
    const UNITS: Record<string, Line[]> = {
      chroot: [['', 'cannot change root directory to ']],
      podman: [
        ['', 'no container with name or ID '],
        ['', 'short-name '],
        ['', 'unable to connect to Podman socket'],
      ],
      docker: [
        ['', 'permission denied while trying to connect to the Docker daemon at unix://x'],
        ['', 'Cannot connect to the Docker daemon'],
      ],
      kubectl: [['', 'The connection to the server ']],
      openssh: [['', 'Permission denied (']],
      shell: [
        ['', 'tendril: Node v1 at '],
        [': ', 'node '],
      ],
      other: [
        ['Error: ', 'open /'],
        ['', 'Error from server (NotFound): pods "'],
        ['', 'No x'],
        ['', 'SHA256:'],
        ['', 'Insufficent privileges'],
        ['', '; the target: '],
      ],
    };
    const ALL = Object.values(UNITS).flat();
    const cases: [string, (path: string) => Promise<Context>, Line[]][] = [
      ['chroot', (path) => router.chroot({ path: '/nonexistent', chrootPath: path }), UNITS.chroot],
      ['podman', (path) => router.podman({ container: 'web', podmanPath: path }), UNITS.podman],
      ['docker', (path) => router.docker({ container: 'web', dockerPath: path }), UNITS.docker],
      ['buildah', (path) => router.buildah({ container: 'web', buildahPath: path }), ALL],
      ['kubectl', (path) => router.kubectl({ pod: 'web', kubectlPath: path }), UNITS.kubectl],
      ['lxc', (path) => router.lxc({ container: 'web', lxcAttachPath: path }), ALL],
      ['lxd', (path) => router.lxd({ container: 'web', lxcPath: path }), ALL],
      ['incus', (path) => router.incus({ container: 'web', incusPath: path }), ALL],
      ['openssh', (path) => router.openssh({ hostname: 'web', sshPath: path }), UNITS.openssh],
      ['command', (path) => router.command({ argv: [path] }), UNITS.shell],
      ['su', (path) => router.su({ suPath: path }), [...UNITS.shell, ['', 'password'], ['su: ', ' ']]],
      ['sudo', (path) => router.sudo({ sudoPath: path }), [...UNITS.shell, ['', 'user '], ['', 'is not allowed to ']]],
      ['doas', (path) => router.doas({ doasPath: path }), [...UNITS.shell, ['', 'password']]],
    ];
    for (const [method, start, lines] of cases) {
      test(`${method}: 4 MiB of hostile complaints fail the start at once`, async (t) => {
        const tool = complaining(`${method}-complaining`, lines);
        const { value, stall } = await longestStall(() => timed(() => start(tool)));
        t.diagnostic(`failed after ${value.ms} ms (longest stall ${stall} ms): ${String(value.outcome).slice(0, 100)}`);
        assert.ok(value.outcome instanceof BootstrapError, String(value.outcome));
        // Generous: a loaded machine or a collection can stall a second; the quadratic patterns took 5 to 70 s.
        assert.ok(value.ms < 5000, `the start took ${value.ms} ms to fail`);
        assert.ok(stall < 3000, `the master's event loop stalled for ${stall} ms`);
      });
    }
  });

  describe('errors and output a child sends', () => {
    let child: Context;
    before(async () => {
      child = await router.local({ name: 'hostile-text' });
    });

    /** A stack of 4 MiB that was quadratic for the frame patterns: newlines, then whitespace, then a frame. */
    const HOSTILE_STACK = (size: number) =>
      `Error: x\n${'\n'.repeat(size)}${' '.repeat(size)}x\n    at tendril:core:1:1`;

    test("a call's error with a 4 MiB hostile stack and message is answered at once", async () => {
      const { ms, outcome } = await timed(() =>
        withLimit(
          child.call((size: number) => {
            // Newlines not followed by a frame: `\n\s+at` scanned them again from each.
            const error = new ReferenceError('x is not defined');
            error.stack = `ReferenceError: x is not defined${'\n'.repeat(size)}x`;
            throw error;
          }, 4 * MiB),
          20_000,
        ),
      );
      assert.ok(outcome instanceof CallError, String(outcome));
      assert.ok(ms < 5000, `the call took ${ms} ms to fail`);
    });

    test('a stray error with a 4 MiB hostile stack leaves the child answering', async () => {
      await child.call(
        (stack: string) => {
          setTimeout(() => {
            const error = new Error('stray');
            error.stack = stack;
            throw error;
          }, 0);
        },
        HOSTILE_STACK(4 * MiB),
      );
      const { ms, outcome } = await timed(() =>
        withLimit(
          child.call(() => 'still here'),
          20_000,
        ),
      );
      assert.equal(outcome, 'still here');
      assert.ok(ms < 5000, `the next call took ${ms} ms`);
    });

    test("remote error descriptions (the stack's own frames dropped) are linear on 2 MiB of hostile stacks", () => {
      const frames = ['    at tendril:core:1:1', '    at x (tendril:core:1:1)', '    at  (', ' (tendril:', 'tendril:a'];
      // Looked at line by line: 2 MiB of newlines is 2 million lines, so 2 s (it takes about 0.1 s).
      assertLinear(
        'describing an error',
        (stack) => {
          const error = new Error('x');
          error.stack = `tendril:\n${stack}`;
          return toRemoteErrorInfo(error);
        },
        hostileFamilies(frames, 2 * MiB),
        2000,
      );
    });

    test("a child that sends a long line's end a byte at a time cannot make command.lines() quadratic", async (t) => {
      const liar = await router.local({ name: 'hostile-lines' });
      try {
        await impersonate(liar, 'exec', async function (this: Attacker, _request: unknown, channel: unknown) {
          const out = channel as { send(value: unknown): Promise<void> };
          // Just under the 1 MiB a line may grow to, then 20,000 bytes of it one message each.
          await out.send([1, Buffer.alloc(1024 * 1024 - 30_000, 0x78)]);
          const byte = Buffer.from('x');
          for (let i = 0; i < 20_000; i++) await out.send([1, byte]);
          await out.send([1, Buffer.from('\n')]);
          return this.never;
        });
        const command = liar.exec('true');
        command.catch(() => {});
        const { value, stall } = await longestStall(async () => {
          const started = Date.now();
          for await (const line of command.lines()) return { line, ms: Date.now() - started };
          return undefined;
        });
        t.diagnostic(`the line came after ${value?.ms} ms; longest stall ${stall} ms`);
        assert.equal(value?.line.length, 1024 * 1024 - 10_000);
        // Spread over 20,000 messages, the quadratic splitting stalled little at a time but took 19 s.
        assert.ok((value?.ms ?? 0) < 5000, `the line took ${value?.ms} ms`);
        command.kill('SIGKILL');
      } finally {
        await liar.shutdown();
      }
    });
  });

  test("host patterns with many '*' are matched in linear time (known_hosts, as ssh_config's Host)", () => {
    // As regular expressions (`.*` a star) these backtracked exponentially: 8 stars took 3 s on 40 characters.
    const started = Date.now();
    assert.equal(hostsMatch(`${'*a'.repeat(40)}b`, 'a'.repeat(4096)), false);
    assert.equal(hostsMatch(`${'*a'.repeat(40)}*`, 'a'.repeat(4096)), true);
    assert.equal(hostsMatch('*.example.com,!bad.example.com', 'web1.example.com'), true);
    assert.equal(hostsMatch('*.example.com,!bad.example.com', 'bad.example.com'), false);
    assert.equal(hostsMatch('web?.EXAMPLE.com', 'web1.example.com'), true);
    const ms = Date.now() - started;
    assert.ok(ms < 1000, `matching took ${ms} ms`);
  });

  test('known_hosts text is parsed in linear time', () => {
    // Line by line, as the stacks above.
    assertLinear(
      'parsing known_hosts',
      parseKnownHosts,
      hostileFamilies(['@revoked', '|1|', 'host ssh-ed25519 AAAA', ' ', '\r\n'], 2 * MiB),
      2000,
    );
  });
});

/**
 * Regular expressions that are super-linear on text built from their own
 * words, and why each is safe where it runs: the input is bounded, or
 * comes only from the program and the context's own account.
 */
const TRUSTED: Record<string, string> = {
  '/could not be started: spawn .* ENOENT/':
    "src/connection/tool-method.ts: the start's own description of its exit, which names the program's tool path",
  '/-----BEGIN OPENSSH PRIVATE KEY-----([\\s\\S]*?)-----END OPENSSH PRIVATE KEY-----/':
    "src/connection/ssh-auth.ts: the context's own account's private key file",
};

describe('every regular expression literal in src/', () => {
  test('runs in under a second on 256 KiB of text built from its own words', (t) => {
    const found: { where: string; pattern: RegExp }[] = [];
    try {
      for (const path of listSources(join(ROOT, 'src'))) {
        const { code } = transformSync(readFileSync(path, 'utf8'), { loader: 'ts' });
        for (const regex of regexLiterals(acorn.parse(code, { ecmaVersion: 'latest', sourceType: 'module' }))) {
          found.push({ where: relative(ROOT, path), pattern: new RegExp(regex.pattern, regex.flags) });
        }
      }
    } finally {
      // Its service process must not outlive the test.
      stopEsbuild();
    }
    assert.ok(found.length > 100, `${found.length} regular expressions found`);
    let slowest = 0;
    for (const { where, pattern } of found) {
      if (TRUSTED[String(pattern)] !== undefined) continue;
      try {
        slowest = Math.max(slowest, assertPatternLinear(pattern, hostileFamilies(wordsOf(pattern), 256 * 1024)));
      } catch (error) {
        throw new Error(`${where}: ${(error as Error).message}`);
      }
    }
    t.diagnostic(`${found.length} patterns; the slowest family took ${slowest.toFixed(0)} ms`);
    for (const pattern of Object.keys(TRUSTED)) {
      assert.ok(
        found.some((entry) => String(entry.pattern) === pattern),
        `${pattern} is no longer in src/: take it out of TRUSTED`,
      );
    }
  });
});

/** The regular expression literals in a syntax tree. */
function regexLiterals(
  node: unknown,
  found: { pattern: string; flags: string }[] = [],
): { pattern: string; flags: string }[] {
  if (Array.isArray(node)) {
    for (const item of node) regexLiterals(item, found);
  } else if (node !== null && typeof node === 'object') {
    const regex = (node as { regex?: { pattern: string; flags: string } }).regex;
    if (regex) found.push(regex);
    for (const value of Object.values(node)) if (typeof value === 'object') regexLiterals(value, found);
  }
  return found;
}

/** The TypeScript files under `dir`. */
function listSources(dir: string): string[] {
  const files: string[] = [];
  for (const entry of readdirSync(dir, { withFileTypes: true })) {
    const path = join(dir, entry.name);
    if (entry.isDirectory()) files.push(...listSources(path));
    else if (entry.name.endsWith('.ts') && !entry.name.endsWith('.d.ts')) files.push(path);
  }
  return files;
}
