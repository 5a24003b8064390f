import assert from 'node:assert/strict';
import { cpSync, mkdtempSync, rmSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import { describe, test } from 'node:test';
import { pathToFileURL } from 'node:url';
import * as tendril from 'tendril';
import { remoteError, toRemoteErrorInfo } from '#dist/internal.js';

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
