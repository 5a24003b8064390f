/**
 * The output a command keeps for its result, one stream's worth. Chunks
 * are copied into blocks as they come, so what is kept costs its bytes:
 * not an object per chunk, nor the buffer each chunk was read into (a
 * chunk is a view into the message, itself a view into a read from the
 * stream, which a child can fill with whatever else it likes).
 */

/** The first block's size. */
const FIRST_BLOCK = 4 * 1024;
/** The largest block: at most this much is allocated and not yet used. */
const LARGEST_BLOCK = 1024 * 1024;

export class KeptOutput {
  private blocks: Buffer[] = [];
  /** Bytes used of the last block. */
  private used = 0;
  /** Bytes kept. */
  bytes = 0;

  /**
   * The bytes a `push` of `length` bytes would allocate: what to charge
   * before pushing (each block doubles the size kept so far, up to 1 MiB).
   */
  allocation(length: number): number {
    const last = this.blocks[this.blocks.length - 1];
    const room = last ? last.length - this.used : 0;
    if (length <= room) return 0;
    return this.blockSize(length - room);
  }

  /** Copies `chunk` in, allocating one more block if it does not fit (`allocation(chunk.length)` bytes). */
  push(chunk: Uint8Array): void {
    let at = 0;
    const last = this.blocks[this.blocks.length - 1];
    if (last && this.used < last.length) {
      at = Math.min(chunk.length, last.length - this.used);
      last.set(chunk.subarray(0, at), this.used);
      this.used += at;
    }
    if (at < chunk.length) {
      const block = Buffer.allocUnsafe(this.blockSize(chunk.length - at));
      block.set(chunk.subarray(at), 0);
      this.blocks.push(block);
      this.used = chunk.length - at;
    }
    this.bytes += chunk.length;
  }

  /** Everything kept, as one Buffer; lets go of the blocks. */
  take(): Buffer {
    const last = this.blocks.pop();
    const parts = last ? [...this.blocks, last.subarray(0, this.used)] : [];
    this.blocks = [];
    this.used = 0;
    this.bytes = 0;
    return Buffer.concat(parts);
  }

  private blockSize(atLeast: number): number {
    return Math.max(atLeast, Math.min(LARGEST_BLOCK, Math.max(FIRST_BLOCK, this.bytes)));
  }
}
