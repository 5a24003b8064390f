import assert from 'node:assert/strict';
import { cpSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { fileURLToPath, pathToFileURL } from 'node:url';
import * as tendril from 'tendril';
import { CALL_FUNCTION_SPEC, compileFunction, remoteError, toRemoteErrorInfo } from '#dist/internal.js';

const require = createRequire(import.meta.url);

/** Every class the package exports whose name ends in Error. */
const classes = (Object.entries(tendril) as [string, unknown][]).filter(
  (entry): entry is [string, new (...args: never[]) => Error] =>
    entry[0].endsWith('Error') && typeof entry[1] === 'function',
);

describe('error classes', () => {
  test('every exported error is a TendrilError with a stable code', () => {
    assert.ok(classes.length >= 20, `${classes.length} error classes exported`);
    for (const [name, Class] of classes) {
      assert.ok(Class.prototype instanceof Error, `${name} is an Error`);
    }
    const samples: Error[] = [
      new tendril.ChannelError('web1', 3, 'gone'),
      new tendril.ContextDisconnectedError('web1', 3, 'gone'),
      new tendril.TimeoutError('call', 'web1', 10),
      new tendril.BootstrapError('web1', 'failed', ''),
      new tendril.ConnectTimeoutError('web1', 10, ''),
      new tendril.PasswordError('web1', 'wrong'),
      new tendril.DecodeError('bad'),
      new tendril.ProtocolError('CONNECT', 'web1', 'bad'),
      new tendril.UnsupportedValueError('args[0]', 'a function'),
      new tendril.CapturedVariableError(['x'], 'fn', 'web1'),
      new tendril.MessageTooLargeError(10, 5, 'a message'),
      new tendril.StreamError('bad'),
    ];
    for (const error of samples) {
      assert.ok(error instanceof tendril.TendrilError, `${error.name} is a TendrilError`);
      assert.match((error as { code?: string }).code ?? '', /^ERR_TENDRIL_[A-Z_]+$/, `${error.name} has a code`);
    }
    assert.ok(new tendril.UnsupportedValueError('a', 'b') instanceof TypeError, 'still a TypeError');
    assert.ok(!(new tendril.ChannelError('a', 1, 'b') instanceof tendril.BootstrapError));
    assert.ok(!(new Error('plain') instanceof tendril.TendrilError));
    assert.ok(!((null as unknown as object) instanceof tendril.TendrilError));
  });

  test('instanceof holds across two copies of the package', async () => {
    // A second copy of the built package, as a duplicate install would be: separate module instances.
    // Inside the checkout, so the copy finds the same dependencies.
    const dist = dirname(require.resolve('tendril'));
    const copyDir = mkdtempSync(join(dist, '..', 'build', 'tendril-copy-'));
    cpSync(dist, join(copyDir, 'dist'), { recursive: true });
    const copy = (await import(pathToFileURL(join(copyDir, 'dist', 'index.js')).href)) as typeof tendril;
    rmSync(copyDir, { recursive: true });
    assert.notEqual(copy.BootstrapError, tendril.BootstrapError);
    assert.notEqual(copy.ChannelError, tendril.ChannelError);
    const theirs = new copy.ContextDisconnectedError('web1', 3, 'gone');
    assert.ok(theirs instanceof tendril.ContextDisconnectedError);
    assert.ok(theirs instanceof tendril.ChannelError);
    assert.ok(theirs instanceof tendril.TendrilError);
    assert.ok(!(theirs instanceof tendril.BootstrapError));
    assert.ok(new tendril.PasswordError('x', 'y') instanceof copy.BootstrapError);
    assert.ok(new copy.UnsupportedValueError('a', 'b') instanceof tendril.TendrilError);
  });

  test('an error revived from another context is an instance of its class', () => {
    const revived = remoteError(toRemoteErrorInfo(new tendril.PasswordError('web1', 'wrong password')), 'via', 4);
    assert.ok(revived instanceof tendril.PasswordError);
    assert.ok(revived instanceof tendril.BootstrapError);
    assert.ok(revived instanceof tendril.TendrilError);
    const unsupported = remoteError(toRemoteErrorInfo(new tendril.UnsupportedValueError('a', 'b')), 'via', 4);
    assert.ok(unsupported instanceof tendril.UnsupportedValueError && unsupported instanceof tendril.TendrilError);
  });
});

describe('remote error info from a context that does not follow the protocol', () => {
  test('a message that is not a string becomes a fixed description, never an exception', () => {
    for (const message of [{ toString: 1 }, Object.create(null), 42, undefined]) {
      const error = remoteError({ name: 'Error', message, stack: '' } as never, 'web1', 3);
      assert.ok(error instanceof tendril.CallError);
      assert.equal(typeof error.message, 'string');
    }
  });
});

/** What a remote error becomes in the master: sent as a context sends it, received as the master receives it. */
function travelled(error: unknown): Error {
  return remoteError(toRemoteErrorInfo(error), 'web1', 3);
}

describe('remote errors keep their fields and causes', () => {
  class HttpError extends Error {
    status: number;
    body: unknown;
    constructor(message: string, status: number) {
      super(message);
      this.status = status;
      this.body = { a: 1, list: ['x', null, true], nested: { when: new Date(5), bytes: Buffer.from('hi'), big: 7n } };
    }
  }

  test("an error's own data fields arrive as own properties and in remoteFields", () => {
    const error = travelled(new HttpError('not found', 404));
    assert.ok(error instanceof tendril.CallError);
    assert.equal(error.remoteName, 'HttpError');
    assert.equal((error as unknown as { status: number }).status, 404);
    assert.deepEqual((error as unknown as { body: unknown }).body, new HttpError('', 0).body);
    assert.deepEqual(error.remoteFields, { status: 404, body: new HttpError('', 0).body });
    assert.ok(Object.isFrozen(error.remoteFields));
  });

  test('fields of types that do not travel are dropped, the others kept', () => {
    const thrown = Object.assign(new Error('mixed'), {
      kept: 'yes',
      fn: () => 1,
      instance: new (class Widget {})(),
      map: new Map([[1, 2]]),
      symbol: Symbol('s'),
      deepInside: { list: [1, { f() {} }] },
      error: new Error('not a field'),
      tooDeep: JSON.parse(`${'['.repeat(20)}1${']'.repeat(20)}`),
    });
    Object.defineProperty(thrown, 'hidden', { value: 'not enumerable', enumerable: false });
    let called = false;
    Object.defineProperty(thrown, 'getter', {
      enumerable: true,
      get() {
        called = true;
        return 'never read';
      },
    });
    const error = travelled(thrown) as tendril.CallError;
    assert.deepEqual(error.remoteFields, { kept: 'yes' });
    assert.equal(called, false, 'an accessor is never called');
  });

  test('a field never replaces a member of the error, nor reaches a prototype', () => {
    const fields = {
      toString: 'not a function',
      constructor: 'not a class',
      contextName: 'forged',
      remoteName: 'forged',
      code: 404,
      // biome-ignore lint/suspicious/noThenProperty: a remote error may have one; it must not make a thenable of the CallError.
      then: 'not a thenable',
      message2: 'fine',
    };
    const error = travelled(Object.assign(new Error('hostile'), fields)) as tendril.CallError;
    assert.equal(typeof error.toString, 'function');
    assert.equal(error.constructor, tendril.CallError);
    assert.equal(error.contextName, 'web1');
    assert.equal(error.remoteName, 'Error');
    assert.equal(error.code, 'ERR_TENDRIL_CALL');
    assert.equal((error as unknown as { then?: unknown }).then, undefined);
    assert.equal((error as unknown as { message2: string }).message2, 'fine');
    assert.deepEqual(error.remoteFields, fields);
    // As a hostile context would send them: keys that name prototypes, at every level.
    const forged = JSON.parse(
      '{"name":"Error","message":"m","stack":"","fields":{"__proto__":{"polluted":1},"ok":{"x":1},"bad":{"__proto__":{"polluted":1},"x":1}},"cause":{"name":"E","message":"c","stack":"","fields":{"__proto__":{"polluted":1}}}}',
    );
    const revived = remoteError(forged, 'web1', 3) as tendril.CallError;
    assert.equal(({} as { polluted?: unknown }).polluted, undefined);
    assert.equal((revived as unknown as { polluted?: unknown }).polluted, undefined);
    assert.equal(Object.getPrototypeOf(revived), tendril.CallError.prototype);
    assert.deepEqual(Object.keys(revived.remoteFields), ['ok']);
    assert.deepEqual(revived.remoteFields.ok, { x: 1 });
    assert.deepEqual(Object.keys((revived.cause as tendril.CallError).remoteFields), []);
  });

  test('fields are bounded in number, depth and size', () => {
    const many = new Error('many') as Error & Record<string, unknown>;
    for (let i = 0; i < 100; i++) many[`f${i}`] = i;
    assert.equal(Object.keys((travelled(many) as tendril.CallError).remoteFields).length, 64);
    const big = Object.assign(new Error('big'), { small: 1, huge: 'x'.repeat(100_000), after: 2 });
    assert.deepEqual((travelled(big) as tendril.CallError).remoteFields, { small: 1, after: 2 });
    let nested: unknown = 1;
    for (let i = 0; i < 8; i++) nested = [nested];
    const deep = Object.assign(new Error('deep'), { ok: nested, tooDeep: [nested] });
    assert.deepEqual(Object.keys((travelled(deep) as tendril.CallError).remoteFields), ['ok']);
    const dropped: Record<string, unknown> = {};
    for (let i = 0; i < 2000; i++) dropped[`f${i}`] = new Map();
    const walked = travelled(Object.assign(new Error('walked'), dropped, { late: 1 })) as tendril.CallError;
    assert.deepEqual(walked.remoteFields, {}, 'at most 1024 properties are looked at');
    // What a hostile context sends is bounded the same way.
    const fields: Record<string, unknown> = {};
    for (let i = 0; i < 100; i++) fields[`f${i}`] = 'y'.repeat(5000);
    const revived = remoteError({ name: 'Error', message: 'm', stack: '', fields }, 'web1', 3) as tendril.CallError;
    assert.ok(Object.keys(revived.remoteFields).length < 14, 'at most 64 KiB of fields');
  });

  test('the cause chain arrives, each cause a remote error of its own', () => {
    const inner = Object.assign(new TypeError('inner'), { detail: 'why' });
    const outer = new Error('outer');
    // Assigned, as on Node 12 (whose Error ignores the options argument).
    (outer as { cause?: unknown }).cause = inner;
    const error = travelled(new Error('top', { cause: outer })) as tendril.CallError;
    assert.equal(error.remoteMessage, 'top');
    const middle = error.cause as tendril.CallError;
    assert.ok(middle instanceof tendril.CallError);
    assert.equal(middle.remoteMessage, 'outer');
    const last = middle.cause as tendril.CallError;
    assert.ok(last instanceof tendril.CallError);
    assert.equal(last.remoteName, 'TypeError');
    assert.equal((last as unknown as { detail: string }).detail, 'why');
    assert.equal(last.cause, undefined);
    assert.ok(!Object.keys(error).includes('cause'), 'cause is not enumerable, as with Error');
    // A cause that is not an Error arrives as its value, when it travels.
    assert.deepEqual(travelled(new Error('e', { cause: { code: 7, where: ['a'] } })).cause, { code: 7, where: ['a'] });
    assert.equal(travelled(new Error('e', { cause: 'text' })).cause, 'text');
    assert.ok(!('cause' in travelled(new Error('e', { cause: () => 1 }))));
  });

  test('a cause chain is bounded in depth and safe from cycles', () => {
    let chain = new Error('e0');
    for (let i = 1; i < 20; i++) chain = new Error(`e${i}`, { cause: chain });
    let depth = 0;
    for (let error: unknown = travelled(chain); error instanceof Error; error = error.cause) depth++;
    assert.equal(depth, 9, 'the error and 8 causes');
    const a = new Error('a');
    const b = new Error('b', { cause: a });
    (a as { cause?: unknown }).cause = b;
    const revived = travelled(a) as tendril.CallError;
    assert.equal((revived.cause as tendril.CallError).remoteMessage, 'b');
    assert.equal((revived.cause as tendril.CallError).cause, undefined);
    // A hostile context's chain is cut at the same depth.
    let forged: Record<string, unknown> = { name: 'Error', message: 'deepest', stack: '' };
    for (let i = 0; i < 50; i++) forged = { name: 'Error', message: `m${i}`, stack: '', cause: forged };
    depth = 0;
    for (let error: unknown = remoteError(forged as never, 'web1', 3); error instanceof Error; error = error.cause)
      depth++;
    assert.equal(depth, 9);
  });

  test("tendril's own errors keep their class, fields and cause, and a relayed CallError its remote fields", () => {
    const relayed = travelled(new HttpError('not found', 404));
    const twice = travelled(relayed) as tendril.CallError;
    assert.ok(twice instanceof tendril.CallError);
    assert.equal(twice.remoteName, 'HttpError');
    assert.deepEqual(twice.remoteFields, { status: 404, body: new HttpError('', 0).body });
    assert.equal((twice as unknown as { status: number }).status, 404);
    const cause = Object.assign(new Error('underneath', { cause: new RangeError('deeper') }), { step: 2 });
    const own = travelled(new tendril.TendrilError('failed', 'ERR_TENDRIL_X', { cause }));
    assert.ok(own instanceof tendril.TendrilError);
    assert.equal((own as tendril.TendrilError).code, 'ERR_TENDRIL_X');
    const first = own.cause as tendril.CallError;
    assert.ok(first instanceof tendril.CallError);
    assert.deepEqual([first.remoteMessage, first.remoteFields], ['underneath', { step: 2 }]);
    assert.equal((first.cause as tendril.CallError).remoteName, 'RangeError');
  });
});

/**
 * The 1-based line and column in this file (as Node runs it) of the
 * first occurrence of `marker`: where a frame of code written there points.
 */
function whereWritten(marker: string): { line: number; column: number } {
  const text = readFileSync(fileURLToPath(import.meta.url), 'utf8');
  const at = text.indexOf(marker);
  assert.notEqual(at, -1, `${marker} is in this file`);
  const before = text.slice(0, at).split('\n');
  return { line: before.length, column: (before.at(-1) as string).length + 1 };
}

/** The first frame of a stack. */
function firstFrame(stack: string): string {
  return /\n\s+at ([^\n]*)/.exec(stack)?.[1] ?? '';
}

/** Declared apart from the call that ships it, so its location is told by V8, not by the caller. */
function failsAtKnownLine(): never {
  throw new RangeError('thrown where written');
}

describe('errors of a real context', () => {
  let router: tendril.Router;
  let child: tendril.Context;
  before(async () => {
    router = new tendril.Router();
    child = await router.local({ name: 'errors' });
  });
  after(() => router.shutdown());

  test('a custom class arrives with its fields and its cause chain', async () => {
    await assert.rejects(
      child.call(() => {
        class HttpError extends Error {
          status: number;
          body: unknown;
          constructor(message: string, status: number, cause: unknown) {
            super(message);
            this.status = status;
            this.body = { reason: 'missing', when: new Date(5) };
            // Assigned, as on Node 12 (whose Error ignores the options argument).
            (this as { cause?: unknown }).cause = cause;
          }
        }
        const inner = Object.assign(new TypeError('inner'), { attempt: 3 });
        throw new HttpError('not found', 404, new Error('middle', { cause: inner }));
      }),
      (error: unknown) => {
        assert.ok(error instanceof tendril.CallError);
        assert.equal(error.remoteName, 'HttpError');
        assert.equal((error as unknown as { status: number }).status, 404);
        assert.deepEqual(error.remoteFields, { status: 404, body: { reason: 'missing', when: new Date(5) } });
        const middle = error.cause as tendril.CallError;
        assert.ok(middle instanceof tendril.CallError);
        assert.equal(middle.remoteMessage, 'middle');
        assert.equal(middle.contextName, 'errors');
        const inner = middle.cause as tendril.CallError;
        assert.equal(inner.remoteName, 'TypeError');
        assert.deepEqual(inner.remoteFields, { attempt: 3 });
        for (const stack of [error.remoteStack, middle.remoteStack, inner.remoteStack]) {
          assert.doesNotMatch(stack, /tendril:core/, "tendril's own frames are dropped");
          assert.match(stack, /\n {4}at /, 'the frames of the code that threw are kept');
        }
        return true;
      },
    );
  });

  test('a function written inline, and one declared elsewhere in the file', async () => {
    for (const [fn, marker] of [
      [
        () => {
          const unused = 1;
          throw new Error(`thrown inline ${unused}`);
        },
        'new Error(`thrown inline',
      ],
      [failsAtKnownLine, "new RangeError('thrown where written')"],
    ] as const) {
      const { line, column } = whereWritten(marker);
      await assert.rejects(child.call(fn), (error: unknown) => {
        assert.ok(error instanceof tendril.CallError);
        // `name (file:line:column)`, or `file:line:column` for an anonymous function.
        const frame = firstFrame(error.remoteStack).replace(/\)$/, '');
        assert.ok(frame.endsWith(`${import.meta.url}:${line}:${column}`), `${frame} is ${line}:${column}`);
        assert.doesNotMatch(error.remoteStack, /tendril:core|tendril-call:/);
        return true;
      });
    }
  });

  test('a ReferenceError the sender could not foresee is still explained', async () => {
    for (const fn of [
      // eval hides the name from the sender's parser.
      // biome-ignore lint/security/noGlobalEval: the point of the test.
      () => eval('notDefinedAnywhere'),
      new Function('return eval("notDefinedAnywhere")') as () => unknown,
    ]) {
      await assert.rejects(child.call(fn), (error: unknown) => {
        assert.ok(error instanceof tendril.CallError);
        assert.match(error.remoteMessage, /notDefinedAnywhere is not defined: functions passed to call\(\) travel/);
        return true;
      });
    }
  });

  test('a function whose place cannot be told is named after itself', async () => {
    const made = new Function('throw new Error("made at run time")') as () => never;
    await assert.rejects(child.call(made), (error: unknown) => {
      assert.ok(error instanceof tendril.CallError);
      assert.match(firstFrame(error.remoteStack), /^anonymous \(tendril-call:anonymous:\d+:\d+\)$/);
      return true;
    });
  });
});

describe('the location a call carries', () => {
  test('compiles the same source once per location, each naming its own', () => {
    const source = '() => {\n  throw new Error("x");\n}';
    const frameOf = (location?: [string, number, number]) => {
      try {
        (compileFunction(source, location)(require, async () => undefined) as () => void)();
      } catch (error) {
        return firstFrame((error as Error).stack ?? '');
      }
      return '';
    };
    assert.equal(frameOf(['/srv/a.js', 9, 4]), '/srv/a.js:11:9');
    assert.equal(frameOf(['/srv/b.js', 0, 0]), '/srv/b.js:2:9');
    assert.equal(frameOf(['/srv/a.js', 9, 4]), '/srv/a.js:11:9');
    assert.match(frameOf(), /^tendril-call:anonymous:2:9$/);
    const oneLine = '() => { throw new Error("x"); }';
    const thrower = compileFunction(oneLine, ['/srv/c.js', 3, 10])(require, async () => undefined) as () => void;
    // On the first line, the column counts from where the function starts there.
    assert.throws(thrower, (error: Error) => firstFrame(error.stack ?? '') === '/srv/c.js:4:25');
  });

  test('is checked as untrusted input', () => {
    const request = (l: unknown) => CALL_FUNCTION_SPEC.request({ f: '() => 1', a: [], l });
    assert.deepEqual(request(['/srv/a.js', 1, 2]).l, ['/srv/a.js', 1, 2]);
    for (const bad of [
      ['/srv/a.js', -1, 0],
      ['/srv/a.js', 0, 1.5],
      ['x'.repeat(5000), 0, 0],
      [1, 0, 0],
      'a.js',
      ['/srv/a.js', 0, 2 ** 31],
    ]) {
      assert.throws(() => request(bad), /call\.l/, `refused: ${JSON.stringify(bad)}`);
    }
  });
});
