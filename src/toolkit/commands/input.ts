/**
 * A command's `input` as the master sends it: in chunks a message can
 * carry, and ended once whoever stops first (the feeding loop or the
 * command) says so.
 */
import { INPUT_CHUNK } from './protocol.js';

/** Chunks of at most `INPUT_CHUNK` bytes of an input stream. */
export async function* inputChunks(input: AsyncIterable<Uint8Array | string> | Uint8Array): AsyncGenerator<Uint8Array> {
  const source = input instanceof Uint8Array ? [input] : input;
  for await (const item of source) {
    const bytes = typeof item === 'string' ? Buffer.from(item) : item;
    if (!(bytes instanceof Uint8Array))
      throw new TypeError('an input stream gave a chunk that is not a string or bytes');
    for (let at = 0; at < bytes.length; at += INPUT_CHUNK) yield bytes.subarray(at, at + INPUT_CHUNK);
  }
}

/**
 * The user's input stream, read through `items`, and `end()`, which ends
 * it (its iterator's `return()`) once, whoever asks first: the loop that
 * feeds it to the command when it stops, or the command once it has ended
 * (the loop may be waiting on a child that takes nothing, for ever).
 */
export function endable<T>(input: AsyncIterable<T>): { items: AsyncIterable<T>; end: () => void } {
  const iterator = input[Symbol.asyncIterator]();
  let ended = false;
  const end = () => {
    if (ended) return;
    ended = true;
    // How the user's stream takes being ended is its own affair: the command has ended.
    try {
      Promise.resolve(iterator.return?.()).catch(() => undefined);
    } catch {}
  };
  const reader: AsyncIterator<T> = {
    next: () => iterator.next(),
    return: () => {
      end();
      return Promise.resolve({ value: undefined, done: true });
    },
  };
  return { items: { [Symbol.asyncIterator]: () => reader }, end };
}
