/** Header fields a hostile child writes as it likes. */
export interface RawFrame {
  dst: number;
  src: number;
  /** Default: `src`. */
  auth?: number;
  handle: number;
  /** Default 0 (no reply expected). */
  replyTo?: number;
  /** Bit 0 DEAD, bit 1 RAW. Default 0. */
  flags?: number;
}

/**
 * Shipped to a child (so it must stay self-contained) to write `count`
 * copies of one raw frame on its stream to the parent (fd 4), the way a
 * compromised child could, synchronously: while it writes, the child does
 * not read its own input. Resolves with the milliseconds the writes took.
 */
export function writeFrames(fields: RawFrame, payload: Uint8Array, count = 1): number {
  const fs = require('node:fs') as typeof import('node:fs');
  const header = Buffer.alloc(28);
  header.writeUInt16BE(0x7464, 0);
  header[2] = 1;
  header[3] = fields.flags ?? 0;
  header.writeUInt32BE(fields.dst, 4);
  header.writeUInt32BE(fields.src, 8);
  header.writeUInt32BE(fields.auth ?? fields.src, 12);
  header.writeUInt32BE(fields.handle, 16);
  header.writeUInt32BE(fields.replyTo ?? 0, 20);
  header.writeUInt32BE(payload.length, 24);
  const frame = Buffer.concat([header, Buffer.from(payload)]);
  // Many frames per write, so a flood is not limited by system calls.
  const batch = Buffer.concat(new Array(Math.max(1, Math.min(count, 256))).fill(frame));
  const perBatch = batch.length / frame.length;
  const started = Date.now();
  let left = count;
  while (left > 0) {
    const chunk = left >= perBatch ? batch : batch.subarray(0, left * frame.length);
    let offset = 0;
    while (offset < chunk.length) {
      try {
        offset += fs.writeSync(4, chunk, offset);
      } catch (error) {
        if ((error as NodeJS.ErrnoException).code !== 'EAGAIN') throw error;
      }
    }
    left -= chunk.length / frame.length;
  }
  return Date.now() - started;
}
