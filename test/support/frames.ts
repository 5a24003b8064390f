/** Header fields a hostile or broken child writes as it likes. */
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
  /** Default 0x7464, the real magic. */
  magic?: number;
  /** The payload length announced in the header. Default: the payload's real length. */
  length?: number;
}

/**
 * The bytes of one frame with `fields` exactly as given (so it may lie
 * about its source or be malformed) and `payload`. Built in the test
 * process; the child only writes them (`writeBytes`).
 */
export function frameBytes(fields: RawFrame, payload: Uint8Array): Buffer {
  const header = Buffer.alloc(28);
  header.writeUInt16BE(fields.magic ?? 0x7464, 0);
  header[2] = 1;
  header[3] = fields.flags ?? 0;
  header.writeUInt32BE(fields.dst, 4);
  header.writeUInt32BE(fields.src, 8);
  header.writeUInt32BE(fields.auth ?? fields.src, 12);
  header.writeUInt32BE(fields.handle, 16);
  header.writeUInt32BE(fields.replyTo ?? 0, 20);
  header.writeUInt32BE(fields.length ?? payload.length, 24);
  return Buffer.concat([header, payload]);
}

/**
 * Shipped to a child (so it must stay self-contained) to write `bytes`,
 * `count` times over, on its stream to the parent (fd 4), the way a
 * compromised child could, synchronously: while it writes, the child does
 * not read its own input. Waits out EAGAIN on a non-blocking descriptor.
 * Returns the milliseconds the writes took.
 */
export function writeBytes(bytes: Uint8Array, count = 1): number {
  const fs = require('node:fs') as typeof import('node:fs');
  const once = Buffer.from(bytes);
  // Many copies per write, so a flood is not limited by system calls.
  const perBatch = Math.max(1, Math.min(count, 256));
  const batch = Buffer.concat(new Array(perBatch).fill(once));
  const started = Date.now();
  for (let left = count; left > 0; left -= perBatch) {
    const chunk = left >= perBatch ? batch : batch.subarray(0, left * once.length);
    for (let offset = 0; offset < chunk.length; ) {
      try {
        offset += fs.writeSync(4, chunk, offset);
      } catch (error) {
        if ((error as NodeJS.ErrnoException).code !== 'EAGAIN') throw error;
      }
    }
  }
  return Date.now() - started;
}
