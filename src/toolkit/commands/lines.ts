import { StringDecoder } from 'node:string_decoder';

/** Longest line yielded whole, in characters; a longer one comes in pieces of this size. */
export const MAX_LINE = 1024 * 1024;

/**
 * Cuts a stream of bytes into lines: UTF-8 decoded across chunk
 * boundaries, split on `\n` (a `\r` before it dropped), with the last,
 * unterminated line given by `end()`. A line longer than `MAX_LINE` is
 * cut, so output without newlines cannot grow one line without bound.
 */
export class LineSplitter {
  private readonly decoder = new StringDecoder('utf8');
  private partial = '';

  /** The lines `chunk` completes. */
  push(chunk: Uint8Array): string[] {
    // Only the new text is split: a long unfinished line is joined, not scanned again, for each chunk
    // (a peer sending it a byte at a time made that quadratic).
    const lines = this.decoder.write(chunk as Buffer).split('\n');
    lines[0] = this.partial + lines[0];
    this.partial = lines.pop() as string;
    for (let i = 0; i < lines.length; i++) lines[i] = trimCarriageReturn(lines[i] as string);
    while (this.partial.length > MAX_LINE) {
      lines.push(this.partial.slice(0, MAX_LINE));
      this.partial = this.partial.slice(MAX_LINE);
    }
    return lines;
  }

  /** The unterminated last line, if there is one. */
  end(): string[] {
    const rest = this.partial + this.decoder.end();
    this.partial = '';
    return rest === '' ? [] : [trimCarriageReturn(rest)];
  }
}

function trimCarriageReturn(line: string): string {
  return line.endsWith('\r') ? line.slice(0, -1) : line;
}

/** `value` without one final newline (`\n` or `\r\n`), as execa's `stripFinalNewline` does. */
export function stripFinalNewline<T extends string | Buffer>(value: T): T {
  if (typeof value === 'string') {
    if (value.endsWith('\r\n')) return value.slice(0, -2) as T;
    return (value.endsWith('\n') ? value.slice(0, -1) : value) as T;
  }
  const bytes = value as Buffer;
  const n = bytes.length;
  if (n >= 2 && bytes[n - 2] === 0x0d && bytes[n - 1] === 0x0a) return bytes.subarray(0, n - 2) as T;
  return (n >= 1 && bytes[n - 1] === 0x0a ? bytes.subarray(0, n - 1) : bytes) as T;
}
