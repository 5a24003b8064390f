import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, writeSync } from 'node:fs';
import * as net from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, test } from 'node:test';
import { StreamError } from 'tendril';
import { encodeFrame, FrameDecoder, HEADER_SIZE, Message, Stream } from '#dist/internal.js';

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

describe('Stream writes', () => {
  // A UNIX socket pair in this process: the far end reads only when told.
  async function socketPair(): Promise<{ near: net.Socket; far: net.Socket; close(): void }> {
    const dir = mkdtempSync(join(tmpdir(), 'tendril-stream-'));
    const path = join(dir, 's');
    const server = net.createServer();
    await new Promise<void>((resolve) => server.listen(path, resolve));
    const accepted = new Promise<net.Socket>((resolve) => server.once('connection', resolve));
    const near = net.connect(path);
    await new Promise<void>((resolve) => near.once('connect', resolve));
    const far = await accepted;
    far.pause();
    return {
      near,
      far,
      close() {
        near.destroy();
        far.destroy();
        server.close();
        rmSync(dir, { recursive: true, force: true });
      },
    };
  }

  test('whenDrained wakes once bytes the descriptor did not take have gone, though they were under the high-water mark', async () => {
    const { near, far, close } = await socketPair();
    try {
      const stream = new Stream({ name: 'peer', input: near, output: near, maxMessageSize: 1 << 20 });
      // Fill the socket until it takes no more, so the next frame's direct write takes none of it
      // and the frame, far under the stream's high-water mark, waits in Node's stream.
      const fd = (near as unknown as { _handle: { fd: number } })._handle.fd;
      const filler = Buffer.alloc(64 * 1024);
      let filled = 0;
      for (;;) {
        try {
          filled += writeSync(fd, filler);
        } catch {
          break;
        }
      }
      assert.ok(filled > 0);
      stream.send(Message.encoded(header, 'small'));
      let woke = false;
      stream.whenDrained(() => {
        woke = true;
      });
      assert.equal(woke, false, 'the frame is still queued');
      assert.ok(stream.queuedBytes > 0);
      let read = 0;
      far.on('data', (chunk: Buffer) => {
        read += chunk.length;
      });
      far.resume();
      const deadline = Date.now() + 10_000;
      while (!woke && Date.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 10));
      assert.ok(woke, `whenDrained never called back (the far end read ${read} of ${filled}+ bytes)`);
      stream.close('done');
    } finally {
      close();
    }
  });
});
