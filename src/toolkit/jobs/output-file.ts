import * as fs from 'node:fs';
import { join } from 'node:path';
import { openRegularFile, readRange } from '../../core/regular-file.js';

/**
 * One output stream of a job, appended to its file in the job's
 * directory. Past `limit` bytes the file keeps only its last `limit`
 * (rewritten once it holds twice that, so the cost stays linear), and
 * `dropped` counts what went from its front: a reader that remembers how
 * many bytes it has read finds its place again with it.
 */
export class OutputFile {
  /** Bytes written in all. */
  written = 0;
  /** Bytes dropped from the front of the file. */
  dropped = 0;
  private fd: number;

  /**
   * @param onRotate called once `dropped` and `inode` are the shortened
   *   file's, before it takes the old one's place: a reader that opens
   *   the file, then reads the count, never takes the new file with the
   *   old count, and sees when it has the old file with the new one.
   */
  constructor(
    private readonly directory: string,
    private readonly name: string,
    private readonly limit: number,
    private readonly onRotate: () => void,
  ) {
    // A regular file, not a link: another process of the account may have put a FIFO or a link there.
    const { fd, stats } = openRegularFile(join(directory, name), { append: true });
    this.fd = fd;
    this.inode = stats.ino;
  }

  /** The inode of the file as it is now (a new one after each rotation). */
  inode: number;

  /** Appends `chunk`, dropping the front of the file once it holds twice the limit. */
  write(chunk: Buffer): void {
    for (let done = 0; done < chunk.length; ) done += fs.writeSync(this.fd, chunk, done);
    this.written += chunk.length;
    if (this.written - this.dropped > 2 * this.limit) this.rotate();
  }

  /** Closes the file. */
  close(): void {
    fs.closeSync(this.fd);
  }

  private rotate(): void {
    const path = join(this.directory, this.name);
    const size = this.written - this.dropped;
    const reader = openRegularFile(path).fd;
    let keep: Buffer;
    try {
      keep = readRange(reader, size - this.limit, this.limit);
    } finally {
      fs.closeSync(reader);
    }
    const temp = `${path}.rotating`;
    // Made anew (O_EXCL), never opened through what is there: a link there would have this write where it points.
    try {
      fs.unlinkSync(temp);
    } catch {
      // Not there.
    }
    const { O_WRONLY, O_APPEND, O_CREAT, O_EXCL } = fs.constants;
    const fd = fs.openSync(temp, O_WRONLY | O_APPEND | O_CREAT | O_EXCL, 0o600);
    for (let done = 0; done < keep.length; ) done += fs.writeSync(fd, keep, done);
    this.dropped += size - keep.length;
    fs.closeSync(this.fd);
    this.fd = fd;
    this.inode = fs.fstatSync(fd).ino;
    this.onRotate();
    fs.renameSync(temp, path);
  }
}
