import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { DecodeError, UnsupportedValueError } from 'tendril';
import {
  decode,
  encode,
  FIRST_DYNAMIC_HANDLE,
  MAX_BIGINT_BYTES,
  MAX_DEPTH,
  MAX_OBJECTS,
  MessageSwitch,
  Sender,
  SHUTDOWN,
} from '#dist/internal.js';

const roundTrip = (value: unknown) => decode(encode(value));

/** msgpack for a str of `text`. */
const str = (text: string) => Buffer.from(encode(text));
/** tendril's Error extension (type 79): a fixext 1 tag, then `[name, message, cause]`. */
const errorBytes = (name: Buffer, message: string) =>
  Buffer.concat([Buffer.from([0xd4, 79, 0x00, 0x93]), name, str(message), Buffer.from(encode(undefined))]);
/** A bigint extension (ext 32, type 0x42) carrying `length` bytes of two's complement. */
const bigintBytes = (length: number, fill = 0x11) => {
  const header = Buffer.from([0xc9, 0, 0, 0, 0, 0x42]);
  header.writeUInt32BE(length, 1);
  return Buffer.concat([header, Buffer.alloc(length, fill)]);
};
/** `depth` arrays nested in each other, the innermost empty, as msgpack. */
const nestedArrays = (depth: number) => Buffer.concat([Buffer.alloc(depth - 1, 0x91), Buffer.from([0x90])]);
const isDecodeError = (pattern: RegExp) => (error: unknown) =>
  error instanceof DecodeError && pattern.test(error.message);

describe('codec', () => {
  test('carries every documented type unchanged', () => {
    const value = {
      nil: null,
      undef: undefined,
      yes: true,
      no: false,
      int: 42,
      negative: -7,
      float: 3.25,
      large: 2 ** 53 - 1,
      nan: Number.NaN,
      inf: Number.POSITIVE_INFINITY,
      small: 10n,
      big: 2n ** 200n + 1n,
      negativeBig: -(2n ** 70n),
      text: 'héllo ✓',
      buffer: Buffer.from([0, 1, 2, 255]),
      bytes: new Uint8Array([9, 8, 7]),
      floats: new Float64Array([1.5, -2]),
      array: [1, 'two', [3]],
      object: { nested: { deeper: [null] } },
      map: new Map<unknown, unknown>([
        ['a', 1],
        [2, { b: true }],
      ]),
      set: new Set([1, 'x']),
      date: new Date('2024-02-29T12:34:56.789Z'),
      regexp: /a+b/gi,
    };
    const copy = roundTrip(value) as typeof value;
    assert.deepEqual(copy, value);
    assert.ok(Buffer.isBuffer(copy.buffer));
    assert.ok(copy.bytes instanceof Uint8Array);
    assert.ok(copy.floats instanceof Float64Array);
    assert.ok(copy.map instanceof Map, 'a Map stays a Map');
    assert.ok(copy.set instanceof Set);
    assert.ok(copy.date instanceof Date);
    assert.equal(typeof copy.big, 'bigint');
    // Like structuredClone, an object with a null prototype arrives as a plain object.
    assert.deepEqual(roundTrip(Object.assign(Object.create(null), { k: 1 })), { k: 1 });
    const error = roundTrip(new RangeError('out of range')) as Error;
    assert.ok(error instanceof RangeError);
    assert.equal(error.message, 'out of range');
    assert.ok('undef' in copy, 'a key holding undefined is kept');
  });

  test('plain objects and Maps stay distinct, also when nested in each other', () => {
    const value = [new Map([['k', { inner: new Map([[1, 2]]) }]]), { m: new Map() }];
    const copy = roundTrip(value) as [Map<string, { inner: Map<number, number> }>, { m: Map<never, never> }];
    assert.ok(copy[0] instanceof Map);
    assert.ok(copy[0].get('k')?.inner instanceof Map);
    assert.ok(copy[1].m instanceof Map);
    assert.equal(Object.getPrototypeOf(copy[1]), Object.prototype);
  });

  test('refuses functions, symbols, class instances and cycles at the sender, naming where', () => {
    class Point {
      x = 1;
    }
    const cyclic: Record<string, unknown> = {};
    cyclic.self = cyclic;
    const cases: [unknown, string, RegExp][] = [
      [{ handler: () => 1 }, 'value.handler', /a function \(handler\)/],
      [[1, Symbol('s')], 'value[1]', /a symbol/],
      [{ p: new Point() }, 'value.p', /class Point/],
      [cyclic, 'value.self', /cyclic/],
      [new Map([['k', () => 0]]), 'value.get(<key 0>)', /function/],
      [Promise.resolve(1), 'value', /class Promise/],
    ];
    for (const [value, path, message] of cases) {
      assert.throws(
        () => encode(value),
        (error: unknown) =>
          error instanceof UnsupportedValueError &&
          error instanceof TypeError &&
          error.path === path &&
          message.test(error.message) &&
          error.message.includes(` at ${path}`),
      );
    }
  });

  test('a shared (non-cyclic) reference is allowed and copied', () => {
    const shared = { a: 1 };
    assert.deepEqual(roundTrip([shared, shared]), [{ a: 1 }, { a: 1 }]);
  });

  test('decoding refuses containers larger than the payload before building them', () => {
    // array32 announcing 4 billion elements, then nothing.
    assert.throws(() => decode(Buffer.from([0xdd, 0xff, 0xff, 0xff, 0xff])), /container of 4294967295 elements/);
    // map32 announcing 2^31 entries in 3 bytes.
    assert.throws(() => decode(Buffer.from([0xdf, 0x80, 0, 0, 0, 1, 2, 3])), /container/);
    // str32 longer than the payload.
    assert.throws(() => decode(Buffer.from([0xdb, 0, 0, 1, 0, 0x41])), /truncated/);
  });

  test('decoding refuses msgpackr record and reference extensions and trailing bytes', () => {
    // fixext1 0x72: a record definition, which would make msgpackr compile code.
    assert.throws(() => decode(Buffer.from([0xd4, 0x72, 0x40, 0x91, 0xa1, 0x61])), /extension type 114/);
    // fixext4 0x70: a structured-clone pointer.
    assert.throws(() => decode(Buffer.from([0xd6, 0x70, 0, 0, 0, 1])), /extension type 112/);
    assert.throws(() => decode(Buffer.from([0x01, 0x02])), /trailing/);
    assert.throws(() => decode(Buffer.from([])), /truncated/);
  });

  test("Errors travel in tendril's own extension; msgpackr's Error extension is refused, not revived by msgpackr", () => {
    const bytes = Buffer.from(encode(new RangeError('r')));
    assert.deepEqual([...bytes.subarray(0, 3)], [0xd4, 79, 0x00]);
    // msgpackr's (0x65) would be read with its own table of error classes, by any name.
    assert.throws(() => decode(Buffer.from([0xd4, 0x65, 0x00, 0x92, 0xa1, 0x61, 0xa1, 0x62])), /extension type 101/);
  });

  test('a __proto__ key never changes the prototype of a decoded object', () => {
    // {"__proto__": {"polluted": true}} as a msgpack map
    const bytes = Buffer.concat([
      Buffer.from([0x81, 0xa9]),
      Buffer.from('__proto__'),
      Buffer.from([0x81, 0xa8]),
      Buffer.from('polluted'),
      Buffer.from([0xc3]),
    ]);
    const value = decode(bytes) as Record<string, unknown>;
    assert.equal(Object.getPrototypeOf(value), Object.prototype);
    assert.equal(({} as Record<string, unknown>).polluted, undefined);
  });

  test('random bytes either decode or throw a DecodeError, never anything else', () => {
    let seed = 12345;
    const random = () => {
      seed = (seed * 1103515245 + 12345) & 0x7fffffff;
      return seed;
    };
    const samples = [encode({ a: [1, 2, 'x'], b: new Map([[1, 2]]), c: 5n, d: new Date(0) })];
    for (let i = 0; i < 20000; i++) {
      const base = samples[0] as Uint8Array;
      const bytes = Buffer.from(base);
      for (let j = 0; j < 1 + (random() % 4); j++) bytes[random() % bytes.length] = random() & 0xff;
      const cut = random() % 3 === 0 ? bytes.subarray(0, random() % bytes.length) : bytes;
      try {
        decode(cut);
      } catch (error) {
        assert.ok(error instanceof DecodeError, `threw something other than a DecodeError: ${String(error)}`);
      }
    }
  });

  test(`nesting is limited to ${MAX_DEPTH} levels both ways; deeper payloads are a DecodeError, not a stack overflow`, () => {
    // Every container kind at the limit travels.
    let value: unknown = 'core';
    const kinds = [
      (v: unknown) => [v],
      (v: unknown) => ({ k: v }),
      (v: unknown) => new Map([['k', v]]),
      (v: unknown) => new Set([v]),
      (v: unknown) => new Error('e', { cause: v }),
    ];
    for (let i = 0; i < MAX_DEPTH; i++) value = (kinds[i % kinds.length] as (v: unknown) => unknown)(value);
    assert.deepEqual(roundTrip(value), value);
    assert.deepEqual(decode(nestedArrays(MAX_DEPTH)), JSON.parse('['.repeat(MAX_DEPTH) + ']'.repeat(MAX_DEPTH)));
    // One more is refused at the sender, with the path...
    assert.throws(
      () => encode([value]),
      (error: unknown) => error instanceof UnsupportedValueError && /nested deeper than 512/.test(error.message),
    );
    // ...and at the receiver, also when a tag (a Set here) adds the level.
    assert.throws(
      () => decode(nestedArrays(MAX_DEPTH + 1)),
      isDecodeError(/at byte 512: value nested deeper than 512/),
    );
    const setInside = Buffer.concat([Buffer.alloc(MAX_DEPTH, 0x91), Buffer.from([0xd4, 0x73, 0x00, 0x90])]);
    assert.throws(() => decode(setInside), isDecodeError(/nested deeper than 512/));
    // The reply the issue measured: 10 KB of nesting.
    assert.throws(() => decode(nestedArrays(10_000)), isDecodeError(/nested deeper than 512/));
  });

  test('every decoding failure is a DecodeError saying what (and where, when the walk knows)', () => {
    const cases: [Buffer, RegExp][] = [
      [Buffer.from([0xc1]), /at byte 0: invalid token 0xc1/],
      [Buffer.from([0x92, 0x01, 0xc1]), /at byte 2: invalid token/],
      [Buffer.from([]), /truncated/],
      // A map key that is not a string (msgpackr would convert it to one).
      [Buffer.from([0x81, 0x01, 0x02]), /at byte 1: map key of type 0x1/],
      // Tags must be a fixext 1 wrapping an array.
      [Buffer.from([0xc7, 0x01, 0x73, 0x00, 0x90]), /tag extension 115 must be a fixext 1/],
      [Buffer.from([0xd4, 0x73, 0x00, 0x01]), /must wrap an array/],
      [Buffer.from([0xd4, 0x73, 0x00]), /at byte 0: container of 1 elements in 0 remaining bytes/],
      // msgpackr's own failures: a BigInt64Array of 3 bytes, a RegExp with bad flags, an empty bigint.
      [Buffer.from([0xc7, 0x04, 0x74, 0x09, 1, 2, 3]), /undecodable payload of 7 bytes: RangeError/],
      [Buffer.concat([Buffer.from([0xd4, 0x78, 0x00, 0x92]), str('a'), str('Q')]), /SyntaxError/],
      [Buffer.from([0xc7, 0x00, 0x42]), /bigint of 0 bytes/],
      // The tendril extensions' own checks.
      [Buffer.from([0xd4, 0x4d, 0x00, 0x91, 0x01]), /malformed Map/],
      [Buffer.concat([Buffer.from([0xd4, 79, 0x00, 0x92, 0x01]), str('m')]), /malformed Error/],
      [
        Buffer.from([0xd4, 0x4e, 0x00, 0x92, 0x01, 0xcd, 0x03, 0xe8]),
        /Sender or Channel can only be decoded on behalf of a router/,
      ],
    ];
    for (const [bytes, pattern] of cases) {
      assert.throws(() => decode(bytes), isDecodeError(pattern), `payload ${bytes.toString('hex')}`);
    }
  });

  test('a remote Error is only ever an Error or a built-in error class; other names are kept as its name', () => {
    for (const name of [
      'valueOf',
      'constructor',
      '__proto__',
      'hasOwnProperty',
      'toString',
      'prototype',
      'CallError',
    ]) {
      const error = decode(errorBytes(str(name), 'crafted')) as Error;
      assert.equal(Object.getPrototypeOf(error), Error.prototype, name);
      assert.equal(error.name, name);
      assert.equal(error.message, 'crafted');
    }
    // A name that is not a string is refused rather than looked up.
    assert.throws(() => decode(errorBytes(Buffer.from(encode(['Error'])), 'x')), isDecodeError(/malformed Error/));
    for (const Class of [
      Error,
      TypeError,
      RangeError,
      SyntaxError,
      ReferenceError,
      EvalError,
      URIError,
      AggregateError,
    ]) {
      const error = decode(errorBytes(str(Class.name), 'built-in')) as Error;
      assert.equal(Object.getPrototypeOf(error), Class.prototype);
      assert.equal(error.message, 'built-in');
      assert.equal(Object.hasOwn(error, 'name'), false);
    }
  });

  test('ordinary errors round-trip with their name, message and cause', () => {
    class DeployError extends Error {
      override name = 'DeployError';
    }
    const cause = new TypeError('inner', { cause: { code: 7 } });
    const error = roundTrip(new DeployError('outer', { cause })) as Error & { cause: Error & { cause: unknown } };
    assert.equal(Object.getPrototypeOf(error), Error.prototype);
    assert.equal(error.name, 'DeployError');
    assert.equal(error.message, 'outer');
    assert.ok(error.cause instanceof TypeError);
    assert.equal(error.cause.message, 'inner');
    assert.deepEqual(error.cause.cause, { code: 7 });
    assert.equal(Object.getOwnPropertyDescriptor(error, 'cause')?.enumerable, false, 'cause is not enumerable');
    // No trace is captured: it would show the decoder, not where the error was thrown.
    assert.doesNotMatch(String(error.stack), /msgpackr|codec/);
    assert.equal('cause' in (roundTrip(new Error('no cause')) as Error), false);
    // A cause holding a Map keeps it (it used to arrive as a plain object).
    assert.ok(
      (roundTrip(new Error('m', { cause: [new Map([[1, 2]])] })) as { cause: unknown[] }).cause[0] instanceof Map,
    );
    const aggregate = roundTrip(new AggregateError([new Error('a')], 'many')) as AggregateError;
    assert.ok(aggregate instanceof AggregateError);
    assert.equal(aggregate.message, 'many');
  });

  test(`a payload of more than ${MAX_OBJECTS} tiny objects is refused before any is built`, () => {
    // Empty arrays: one byte each on the wire, dozens of bytes each once built.
    const count = MAX_OBJECTS + 10;
    const payload = Buffer.alloc(5 + count, 0x90);
    payload[0] = 0xdd;
    payload.writeUInt32BE(count, 1);
    const before = process.memoryUsage().heapUsed;
    assert.throws(
      () => decode(payload),
      (error: unknown) => error instanceof DecodeError && /more than 2097152 arrays, maps, strings/.test(error.message),
    );
    assert.ok(process.memoryUsage().heapUsed - before < 32 * 1024 * 1024, 'nothing was built');
    // Numbers are held inline and do not count.
    const numbers = new Array(MAX_OBJECTS + 10).fill(7);
    assert.equal((decode(encode(numbers)) as number[]).length, numbers.length);
    const within = new Array(1000).fill([]);
    assert.deepEqual(decode(encode(within)), within);
  });

  test(`bigints are limited to ${MAX_BIGINT_BYTES} bytes at both ends`, () => {
    const end = 1n << BigInt(MAX_BIGINT_BYTES * 8 - 1);
    for (const value of [end - 1n, -end, 2n ** 64n, -(2n ** 64n) - 1n]) assert.equal(roundTrip(value), value);
    for (const value of [end, -end - 1n]) {
      assert.throws(
        () => encode({ n: [value] }),
        (error: unknown) =>
          error instanceof UnsupportedValueError &&
          error.path === 'value.n[0]' &&
          /bigint larger than 65536 bytes/.test(error.message),
      );
    }
    assert.equal(decode(bigintBytes(MAX_BIGINT_BYTES, 0xff)), -1n);
    assert.throws(() => decode(bigintBytes(MAX_BIGINT_BYTES + 1)), isDecodeError(/at byte 0: bigint of 65537 bytes/));
    assert.throws(() => decode(bigintBytes(120 * 1024 * 1024)), isDecodeError(/bigint of 125829120 bytes/));
  });

  test('a Sender aimed at a standard handle is refused at decode; others arrive bound to the router', () => {
    const router = new MessageSwitch({ id: 0, name: 'master', parentIds: [] });
    const reference = (handle: number) =>
      Buffer.from([0xd4, 0x4e, 0x00, 0x92, 0x05, 0xce, ...Buffer.from(new Uint32Array([handle]).buffer).reverse()]);
    for (const handle of [0, SHUTDOWN, FIRST_DYNAMIC_HANDLE - 1]) {
      assert.throws(
        () => decode(reference(handle), router, 5),
        isDecodeError(/refused a Sender aimed at standard handle/),
      );
    }
    // From another context, a Sender keeps that context's authority...
    const sender = decode(reference(FIRST_DYNAMIC_HANDLE), router, 7) as Sender;
    assert.ok(sender instanceof Sender);
    assert.deepEqual([sender.contextId, sender.handle, sender.authority], [5, FIRST_DYNAMIC_HANDLE, 7]);
    // ...unless it is aimed back at that context: acting as this one borrows nothing there.
    assert.equal((decode(reference(FIRST_DYNAMIC_HANDLE), router, 5) as Sender).authority, 0);
    // From this context (or an ancestor), a Sender acts with this context's own authority.
    assert.equal((decode(reference(FIRST_DYNAMIC_HANDLE), router, 0) as Sender).authority, 0);
    assert.equal((decode(reference(FIRST_DYNAMIC_HANDLE), router) as Sender).authority, 0);
  });
});
