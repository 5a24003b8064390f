import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { DecodeError, StreamError } from 'tendril';
import {
  decode,
  encode,
  encodeFrame,
  FIRST_DYNAMIC_HANDLE,
  FrameDecoder,
  HEADER_SIZE,
  MAX_BIGINT_BYTES,
  MAX_DEPTH,
  Message,
  MessageSwitch,
  Sender,
} from '#dist/internal.js';
import { heapAfterGc } from './support/heap.js';

/**
 * Feeds the frame decoder and the payload decoder random and mutated input,
 * the way a hostile child's router could write it. Only StreamError (frames)
 * and DecodeError (payloads) may ever come out; nothing may hang, decode to
 * more than its bytes allow, or leave memory behind.
 *
 * The seed is in the test names; run again with TENDRIL_FUZZ_SEED=<seed> to
 * reproduce a failure (the failing input's index and bytes are in the message).
 */
const SEED = Number(process.env.TENDRIL_FUZZ_SEED ?? 0x7e4d21);
const PAYLOADS = 25_000;
const STREAMS = 3_000;

/** mulberry32: small, fast, and the same sequence on every platform for a seed. */
function generator(seed: number) {
  let state = seed >>> 0;
  const next = () => {
    state = (state + 0x6d2b79f5) >>> 0;
    let t = state;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
  const int = (n: number) => Math.floor(next() * n);
  const pick = <T>(items: readonly T[]): T => items[int(items.length)] as T;
  const bytes = (n: number) => {
    const out = Buffer.allocUnsafe(n);
    for (let i = 0; i < n; i++) out[i] = int(256);
    return out;
  };
  return { int, pick, bytes };
}
type Random = ReturnType<typeof generator>;

/** Valid payloads covering every type the codec carries. */
function corpus(): Buffer[] {
  const values: unknown[] = [
    null,
    undefined,
    true,
    -1,
    0x7fffffff,
    3.5,
    2n ** 64n,
    -(2n ** 100n),
    'héllo ✓',
    'x'.repeat(300),
    Buffer.from([1, 2, 3]),
    new Float64Array([1.5, -2]),
    new BigInt64Array([5n]),
    new DataView(new ArrayBuffer(3)),
    [1, [2, [3, [4]]]],
    { a: { b: { c: [null, 'd'] } }, e: 1 },
    new Map<unknown, unknown>([
      [1, 'one'],
      ['two', new Map([[2, 2]])],
    ]),
    new Set([1, 'a', [2]]),
    new Date(0),
    new Date('2024-02-29T12:34:56.789Z'),
    /a+b/gi,
    new RangeError('out', { cause: { code: 7 } }),
    Object.assign(new Error('custom'), { name: 'DeployError' }),
    { f: 'call', a: [1, 'two', { three: 3 }], b: '/srv/app/main.js', p: ['lodash'] },
    [0, { name: 'TypeError', message: 'nope', stack: 'TypeError: nope\n    at x' }],
  ];
  const payloads = values.map((value) => Buffer.from(encode(value)));
  // A Sender reference, as a router writes it: tag 78, then [context ID, handle].
  const sender = new Sender(new MessageSwitch({ id: 0, name: 'fuzz', parentIds: [] }), 5, FIRST_DYNAMIC_HANDLE + 7);
  payloads.push(Buffer.from(encode([sender, 'x'])));
  return payloads;
}

/** Containers that open a level, as msgpack headers (some wrapped in a tag). */
const OPENERS = [
  [0x91],
  [0x81, 0xa1, 0x6b],
  [0xdc, 0x00, 0x01],
  [0xd4, 0x73, 0x00, 0x91],
  [0xd4, 0x4d, 0x00, 0x92, 0xa0],
  [0xd4, 0x4f, 0x00, 0x93, 0xa0, 0xa0],
];
const LENGTH_TOKENS = [0xc4, 0xc5, 0xc6, 0xd9, 0xda, 0xdb, 0xdc, 0xdd, 0xde, 0xdf, 0xc7, 0xc8, 0xc9];
const EXTENSION_TOKENS = [0xd4, 0xd5, 0xd6, 0xd7, 0xd8, 0xc7, 0xc8, 0xc9];

/** One hostile payload: a valid one mutated, or made up. */
function mutate(random: Random, payloads: Buffer[]): Buffer {
  const base = Buffer.from(random.pick(payloads));
  // Bigints near the limit take about a millisecond each: one input in 32.
  switch (random.int(32) === 0 ? 7 : random.int(7)) {
    case 0: {
      // Byte flips.
      for (let n = 1 + random.int(4); n > 0; n--) base[random.int(base.length)] = random.int(256);
      return base;
    }
    case 1:
      // Truncation.
      return base.subarray(0, random.int(base.length));
    case 2: {
      // Splice: random bytes in, a slice out, or a slice repeated.
      const at = random.int(base.length + 1);
      const cut = random.int(4);
      return Buffer.concat([
        base.subarray(0, at),
        random.bytes(random.int(6)),
        base.subarray(Math.min(base.length, at + cut)),
      ]);
    }
    case 3:
      return random.bytes(1 + random.int(40));
    case 4: {
      // Deep nesting, up to four times the limit, of mixed containers.
      const depth = MAX_DEPTH - 4 + random.int(MAX_DEPTH * 4);
      const parts: Buffer[] = [];
      for (let i = 0; i < depth; i++) parts.push(Buffer.from(random.pick(OPENERS)));
      parts.push(Buffer.from([0xc0]));
      return Buffer.concat(parts);
    }
    case 5: {
      // A huge (or random) announced length, in front of or inside a valid payload.
      const token = random.pick(LENGTH_TOKENS);
      const size =
        token === 0xc4 || token === 0xd9 || token === 0xc7
          ? 1
          : token === 0xc5 || token === 0xda || token === 0xdc || token === 0xde || token === 0xc8
            ? 2
            : 4;
      const length = Buffer.alloc(size, 0xff);
      if (random.int(2) === 0) length.writeUIntBE(random.int(2 ** (8 * Math.min(size, 4)) - 1), 0, size);
      const at = random.int(base.length + 1);
      return Buffer.concat([
        base.subarray(0, at),
        Buffer.from([token]),
        length,
        random.bytes(random.int(8)),
        base.subarray(at),
      ]);
    }
    case 6: {
      // A random extension type and length, with random data or a valid value after it.
      const token = random.pick(EXTENSION_TOKENS);
      const fixed: Record<number, number> = { 212: 1, 213: 2, 214: 4, 215: 8, 216: 16 };
      const length = fixed[token] ?? random.int(70);
      const header =
        token === 0xc7
          ? [token, length]
          : token === 0xc8
            ? [token, length >> 8, length & 0xff]
            : token === 0xc9
              ? [token, 0, 0, length >> 8, length & 0xff]
              : [token];
      const type =
        random.int(3) === 0 ? random.pick([0x00, 0x42, 0x65, 0x73, 0x74, 0x78, 0xff, 77, 78, 79]) : random.int(256);
      return Buffer.concat([
        Buffer.from([...header, type]),
        random.bytes(length),
        random.int(2) ? base : Buffer.alloc(0),
      ]);
    }
    default: {
      // A bigint extension around the limit.
      const length = MAX_BIGINT_BYTES - 2 + random.int(4);
      const header = Buffer.from([0xc9, 0, 0, 0, 0, 0x42]);
      header.writeUInt32BE(length, 1);
      return Buffer.concat([header, random.bytes(Math.min(length, 64)), Buffer.alloc(Math.max(0, length - 64), 0x5a)]);
    }
  }
}

/**
 * Counts what a decoded value holds: values, and bytes of strings and
 * binary data. Each value takes at least one byte of payload, and its
 * characters or bytes at least as many, so neither may exceed the payload.
 * Also checks that containers nest at most `MAX_DEPTH` deep and objects are plain.
 */
function measure(root: unknown): { values: number; bytes: number } {
  let values = 0;
  let bytes = 0;
  // Values to visit, each with the number of containers around it.
  const stack: [unknown, number][] = [[root, 0]];
  while (stack.length > 0) {
    const [value, around] = stack.pop() as [unknown, number];
    values++;
    let children: unknown[] | undefined;
    if (typeof value === 'string') bytes += value.length;
    else if (typeof value === 'bigint') {
      assert.ok(value.toString(16).length <= MAX_BIGINT_BYTES * 2 + 1, 'bigint over the limit');
    } else if (ArrayBuffer.isView(value)) bytes += value.byteLength;
    else if (value instanceof ArrayBuffer) bytes += value.byteLength;
    else if (value instanceof RegExp) bytes += value.source.length;
    else if (value instanceof Error) {
      bytes += value.name.length + value.message.length;
      children = 'cause' in value ? [value.cause] : [];
    } else if (value instanceof Map) children = [...value].flat();
    else if (value instanceof Set || Array.isArray(value)) children = [...value];
    else if (value !== null && typeof value === 'object' && !(value instanceof Date) && !(value instanceof Sender)) {
      assert.equal(Object.getPrototypeOf(value), Object.prototype, 'a decoded object is plain');
      children = [];
      for (const [k, v] of Object.entries(value)) {
        bytes += k.length;
        children.push(v);
      }
    }
    if (children) {
      assert.ok(around < MAX_DEPTH, `a container inside ${around} others`);
      for (const child of children) stack.push([child, around + 1]);
    }
  }
  return { values, bytes };
}

describe('fuzzing the decoders', () => {
  test(`decode() survives ${PAYLOADS} random and mutated payloads (seed 0x${SEED.toString(16)})`, {
    timeout: 120_000,
  }, () => {
    const random = generator(SEED);
    const payloads = corpus();
    const router = new MessageSwitch({ id: 0, name: 'fuzz', parentIds: [] });
    let decoded = 0;
    const before = heapAfterGc();
    for (let i = 0; i < PAYLOADS; i++) {
      const bytes = mutate(random, payloads);
      const where = () =>
        `input ${i} (seed 0x${SEED.toString(16)}): ${bytes.subarray(0, 64).toString('hex')}${bytes.length > 64 ? '...' : ''}`;
      let value: unknown;
      try {
        value = decode(bytes, random.int(2) ? router : undefined, random.int(10));
      } catch (error) {
        if (!(error instanceof DecodeError)) assert.fail(`threw ${String(error)} for ${where()}`);
        continue;
      }
      decoded++;
      const { values, bytes: held } = measure(value);
      assert.ok(values <= bytes.length, `${values} values from ${bytes.length} bytes: ${where()}`);
      assert.ok(held <= bytes.length, `${held} bytes of data from ${bytes.length} bytes: ${where()}`);
    }
    const growth = heapAfterGc() - before;
    assert.ok(
      decoded > PAYLOADS / 20,
      `only ${decoded} inputs decoded: the mutations are too destructive to test much`,
    );
    assert.ok(growth < 8 * 1024 * 1024, `heap grew by ${growth} bytes`);
  });

  test(`the frame decoder survives ${STREAMS} mutated streams in random chunks (seed 0x${SEED.toString(16)})`, {
    timeout: 120_000,
  }, () => {
    const random = generator(SEED ^ 0x5a5a5a5a);
    const payloads = corpus();
    const maxMessageSize = 4096;
    const before = heapAfterGc();
    let messages = 0;
    let closed = 0;
    for (let i = 0; i < STREAMS; i++) {
      const frames: Uint8Array[] = [];
      for (let n = 1 + random.int(5); n > 0; n--) {
        const header = {
          dst: random.int(4),
          src: random.int(4),
          auth: random.int(4),
          handle: random.int(2000),
          replyTo: 0,
        };
        const message =
          random.int(4) === 0
            ? Message.raw(header, random.bytes(random.int(100)))
            : new Message({ ...header, flags: 0 }, random.pick(payloads));
        frames.push(...encodeFrame(message));
      }
      const stream = Buffer.concat(frames);
      for (let n = random.int(5); n > 0; n--) stream[random.int(stream.length)] = random.int(256);
      if (random.int(4) === 0) {
        // A header announcing a huge or random length.
        const at = Math.max(0, stream.length - HEADER_SIZE - random.int(40));
        stream.writeUInt32BE(
          random.int(2) ? 0xffffffff : random.int(2 * maxMessageSize),
          Math.min(at + 24, stream.length - 4),
        );
      }
      const decoder = new FrameDecoder(maxMessageSize);
      const where = () => `stream ${i} (seed 0x${SEED.toString(16)})`;
      try {
        for (let at = 0; at < stream.length; ) {
          const size = 1 + random.int(random.int(2) ? 8 : 200);
          decoder.push(stream.subarray(at, at + size), (message) => {
            messages++;
            assert.ok(message.data.length <= maxMessageSize, `a ${message.data.length}-byte message: ${where()}`);
            try {
              message.unpack();
            } catch (error) {
              if (!(error instanceof DecodeError)) assert.fail(`unpack threw ${String(error)} in ${where()}`);
            }
          });
          at += size;
          // Whatever is buffered is at most one incomplete frame.
          assert.ok(
            decoder.pendingBytes < HEADER_SIZE + maxMessageSize,
            `${decoder.pendingBytes} bytes pending: ${where()}`,
          );
        }
      } catch (error) {
        if (!(error instanceof StreamError)) assert.fail(`threw ${String(error)} in ${where()}`);
        closed++;
      }
    }
    const growth = heapAfterGc() - before;
    assert.ok(messages > STREAMS && closed > STREAMS / 10, `${messages} messages, ${closed} streams closed`);
    assert.ok(growth < 8 * 1024 * 1024, `heap grew by ${growth} bytes`);
  });
});
