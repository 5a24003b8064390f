import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { UnsupportedValueError } from 'tendril';
import { decode, encode } from '#dist/core/codec.js';

const roundTrip = (value: unknown) => decode(encode(value));

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

  test('random bytes either decode or throw an Error, never anything worse', () => {
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
        assert.ok(error instanceof Error, `threw a non-Error: ${String(error)}`);
      }
    }
  });
});
