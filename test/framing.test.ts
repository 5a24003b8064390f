import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { StreamError } from 'tendril';
import { encodeFrame, FrameDecoder, HEADER_SIZE, Message } from '#dist/internal.js';

const header = { dst: 7, src: 0, auth: 0, handle: 1001, replyTo: 1002 };

function frames(...messages: Message[]): Buffer {
  return Buffer.concat(messages.flatMap((message) => encodeFrame(message)));
}

describe('framing', () => {
  test('header layout is the documented 28 bytes', () => {
    const [frame] = encodeFrame(Message.raw({ ...header, dst: 0x01020304 }, Buffer.from('xy'))) as [Uint8Array];
    assert.equal(HEADER_SIZE, 28);
    assert.equal(frame.length, 30);
    assert.deepEqual([...frame.subarray(0, 8)], [0x74, 0x64, 1, 0x02, 1, 2, 3, 4]);
    assert.equal(Buffer.from(frame).readUInt32BE(24), 2);
  });

  test('messages split at every byte boundary come out whole and in order', () => {
    const sent = [
      Message.encoded(header, { n: 1 }),
      Message.raw(header, Buffer.alloc(40_000, 7)),
      Message.encoded(header, 'third'),
    ];
    const bytes = frames(...sent);
    const received: Message[] = [];
    const decoder = new FrameDecoder(1 << 20);
    for (let i = 0; i < bytes.length; i++) decoder.push(bytes.subarray(i, i + 1), (m) => received.push(m));
    assert.equal(received.length, 3);
    assert.deepEqual(received[0]?.unpack(), { n: 1 });
    assert.deepEqual(received[1]?.data, sent[1]?.data);
    assert.equal(received[2]?.unpack(), 'third');
    assert.equal(decoder.pendingBytes, 0);
  });

  test('a bad magic is a StreamError', () => {
    const bytes = frames(Message.encoded(header, 1));
    bytes[0] = 0x4d;
    const decoder = new FrameDecoder(1 << 20);
    assert.throws(
      () => decoder.push(bytes, () => {}),
      (e: unknown) => e instanceof StreamError && /bad magic 0x4d64/.test(e.message),
    );
  });

  test('an announced length over maxMessageSize is refused from the header alone', () => {
    const big = Message.raw(header, Buffer.alloc(2048));
    const [head] = encodeFrame(big) as [Uint8Array];
    const decoder = new FrameDecoder(1024);
    // Only the header is fed: the decoder must refuse without waiting for (or allocating) the payload.
    assert.throws(
      () => decoder.push(head.subarray(0, HEADER_SIZE), () => {}),
      (e: unknown) =>
        e instanceof StreamError && /2048-byte payload, over maxMessageSize \(1024 bytes\)/.test(e.message),
    );
  });

  test('unknown flags and versions are refused', () => {
    const bytes = frames(Message.encoded(header, 1));
    const flagged = Buffer.from(bytes);
    flagged[3] = 0x80;
    assert.throws(() => new FrameDecoder(1 << 20).push(flagged, () => {}), /unknown flags/);
    const versioned = Buffer.from(bytes);
    versioned[2] = 9;
    assert.throws(() => new FrameDecoder(1 << 20).push(versioned, () => {}), /protocol version 9/);
  });
});
