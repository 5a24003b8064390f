/**
 * Node streams in the master over a file in a context: each chunk is one
 * value on a Channel, so Node's backpressure (a full Writable, a paused
 * Readable) and the channel's credit window hold each other back.
 */
import { createHash } from 'node:crypto';
import { addAbortSignal, Readable, Writable } from 'node:stream';
import { Channel } from '../../core/channel.js';
import { CALL_TOOLKIT, type Context, routerOf } from '../../core/context.js';
import { ChannelError, InvalidOptionError } from '../../core/errors.js';
import { abortSignal, optionsObject } from '../../core/options.js';
import { ABANDON, CALL_SETTLED } from '../../core/sender.js';
import { Cancellation } from '../cancellation.js';
import { FileTransferError } from './errors.js';
import { isCounts } from './fan-out.js';
import { type Begin, type FileEnd, MAX_NAME, type Value } from './protocol.js';
import type { RemoteSinkOptions } from './remote.js';

/** The options `createWriteStream` takes (`WriteStreamOptions`). */
const WRITE_STREAM_OPTIONS = new Set(['mode', 'signal']);
/** The options `createReadStream` takes (`ReadStreamOptions`). */
const READ_STREAM_OPTIONS = new Set(['signal']);

/** Options of `context.createReadStream()`. */
export interface ReadStreamOptions {
  /**
   * Destroys the stream when it aborts, with an `AbortError` whose
   * `cause` is the signal's reason, as Node's `fs.createReadStream`
   * does. Default: none (`destroy()` ends it too).
   */
  signal?: AbortSignal;
}

/** Options of `context.createWriteStream()`. */
export interface WriteStreamOptions {
  /** Permission bits of the file. Default 0o644. */
  mode?: number;
  /**
   * Destroys the stream when it aborts (nothing is left under the path),
   * with an `AbortError` whose `cause` is the signal's reason, as Node's
   * `fs.createWriteStream` does. Default: none (`destroy()` ends it too).
   */
  signal?: AbortSignal;
}

/** `stream`, destroyed when `signal` aborts (Node's own `signal` option of streams). */
function abortable<S extends Readable | Writable>(stream: S, signal: AbortSignal | undefined): S {
  if (signal) addAbortSignal(signal, stream);
  return stream;
}

/**
 * The Writable `context.createWriteStream()` returns: once it has
 * finished, `result` says what was written.
 */
export interface FileWriteStream extends Writable {
  /** Bytes and SHA-256 of the file written; set once the stream has finished. */
  result: { bytes: number; sha256: string } | undefined;
}

function checkPath(path: unknown, where: string): string {
  if (typeof path !== 'string' || path.length === 0 || path.indexOf('\0') >= 0) {
    throw new InvalidOptionError('path', where, 'a non-empty path', path);
  }
  return path;
}

/** `context.createWriteStream()`. */
export function createWriteStream(context: Context, path: string, options?: WriteStreamOptions): FileWriteStream {
  const where = 'context.createWriteStream()';
  checkPath(path, where);
  const { mode = 0o644, signal } = optionsObject(options, where, WRITE_STREAM_OPTIONS);
  abortSignal(signal, 'signal', where);
  if (!Number.isInteger(mode) || mode < 0 || mode > 0o7777) {
    throw new InvalidOptionError('mode', where, 'permission bits from 0 to 0o7777', mode);
  }
  const core = routerOf(context);
  const channel = new Channel<Value, unknown>(core);
  const sink: RemoteSinkOptions = { owner: false, mode };
  const what = `write stream to '${path}'`;
  const cancel = new Cancellation({ what, contextName: context.name });
  const call = context[CALL_TOOLKIT](
    'filesReceive',
    [channel.otherEnd(), path, sink],
    { signal: cancel.abandon },
    what,
  );
  // Once the call has settled, what the context still sends is dropped and nothing waits on it: it
  // cannot keep values queued here by keeping its end open.
  const letGo = () => channel[ABANDON](new ChannelError(context.name, context.id, `the ${what} has ended`));
  call.then(letGo, letGo);
  // Past the grace, values still waiting for a context that takes nothing are dropped.
  cancel.abandon.addEventListener(
    'abort',
    () => channel[ABANDON](new ChannelError(context.name, context.id, `${what} was destroyed, and it did not answer`)),
    { once: true },
  );
  const hash = createHash('sha256');
  let bytes = 0;
  let started = false;
  /** The call's error when it failed (the real reason a send failed), else `error`. */
  const reasonOf = async (error: unknown): Promise<unknown> => {
    if (!(error instanceof ChannelError)) return error;
    return call.then(
      () => error,
      (reason: unknown) => reason,
    );
  };
  const start = (): Promise<void> => {
    if (started) return Promise.resolve();
    started = true;
    const name =
      path
        .replace(/(?<!\/)\/+$/, '')
        .split('/')
        .pop() || 'file';
    const begin: Begin = {
      t: 'begin',
      kind: 'file',
      name: name.slice(0, MAX_NAME),
      files: 1,
      directories: 0,
      links: 0,
      bytes: 0,
    };
    channel.send(begin).catch(() => undefined);
    return channel.send({ t: 'f', p: '', s: -1, m: mode, mt: Date.now() });
  };
  const stream = new Writable({
    write(chunk: Buffer, _encoding, callback) {
      start()
        .then(() => {
          hash.update(chunk);
          bytes += chunk.length;
          return channel.send(chunk);
        })
        .then(
          () => callback(),
          async (error: unknown) => callback((await reasonOf(error)) as Error),
        );
    },
    final(callback) {
      const end: FileEnd = { t: 'e', n: bytes, h: hash.digest('hex') };
      start()
        .then(() => channel.send(end))
        .then(() => channel.send({ t: 'end' }))
        .then(() => {
          channel.close();
          return call;
        })
        .then(
          (value) => {
            if (!isCounts(value) || value.sha256 === undefined) {
              throw new FileTransferError(
                'ERR_TENDRIL_BAD_ENTRY',
                context.name,
                path,
                'the context returned a malformed result',
              );
            }
            (stream as FileWriteStream).result = { bytes: value.bytes, sha256: value.sha256 };
            callback();
          },
          async (error: unknown) => callback((await reasonOf(error)) as Error),
        );
    },
    destroy(error, callback) {
      // Closing without the end tells the other side to drop its temporary file; wait until it has, the grace at most.
      cancel.cancel(error);
      channel.close();
      const done = () => callback(error);
      cancel.settle(call).then(done, done);
    },
  }) as FileWriteStream;
  stream.result = undefined;
  return abortable(stream, signal);
}

/** `context.createReadStream()`. */
export function createReadStream(context: Context, path: string, options?: ReadStreamOptions): Readable {
  const where = 'context.createReadStream()';
  checkPath(path, where);
  const { signal } = optionsObject(options, where, READ_STREAM_OPTIONS);
  abortSignal(signal, 'signal', where);
  const core = routerOf(context);
  const channel = new Channel<unknown, Value>(core);
  const what = `read stream of '${path}'`;
  const cancel = new Cancellation({ what, contextName: context.name });
  const call = context[CALL_TOOLKIT](
    'filesSend',
    [channel.otherEnd(), path, { recursive: false }],
    { signal: cancel.abandon },
    what,
  );
  // The context's answer ends the stream: what it sent before is read, nothing after.
  const stopReading = () => channel[CALL_SETTLED]();
  call.then(stopReading, stopReading);
  const input = channel[Symbol.asyncIterator]();
  const hash = createHash('sha256');
  let bytes = 0;
  /** The size announced, which the context cannot extend (it is not trusted). */
  let size = 0;
  let state: 'begin' | 'entry' | 'data' | 'end' | 'done' = 'begin';
  const bad = (why: string) =>
    new FileTransferError('ERR_TENDRIL_BAD_ENTRY', context.name, path, `refused the stream: ${why}`);

  /** The next value, or the reason there is none: the call's error, else an interruption. */
  const next = async (): Promise<unknown> => {
    let result: IteratorResult<unknown>;
    try {
      result = await input.next();
    } catch (error) {
      result = { done: true, value: error };
    }
    if (!result.done) return result.value;
    const failure = await call.then(
      () => undefined,
      (reason: unknown) => reason,
    );
    throw (
      failure ??
      new FileTransferError('ERR_TENDRIL_TRANSFER_INTERRUPTED', context.name, path, 'the stream stopped before its end')
    );
  };

  /** Pulls values until one chunk is pushed or the stream ends. */
  const pull = async (readable: Readable): Promise<void> => {
    for (;;) {
      const value = await next();
      const tag = value instanceof Uint8Array ? 'data' : (value as { t?: unknown } | null)?.t;
      if (state === 'begin') {
        if (tag !== 'begin') throw bad('it did not start with its description');
        if ((value as Begin).kind !== 'file') {
          throw new FileTransferError('EISDIR', context.name, path, 'cannot stream it: not a regular file');
        }
        size = (value as Begin).bytes;
        if (!Number.isSafeInteger(size) || size < 0) throw bad('its size is not a size');
        state = 'entry';
      } else if (state === 'entry') {
        if (tag !== 'f') throw bad('expected the file');
        if ((value as { s?: unknown }).s !== size) throw bad(`a file size other than the ${size} bytes announced`);
        state = 'data';
      } else if (state === 'data' && tag === 'data') {
        const chunk = value as Uint8Array;
        bytes += chunk.length;
        if (bytes > size) throw bad(`more data than the ${size} bytes announced`);
        hash.update(chunk);
        readable.push(chunk);
        return;
      } else if (state === 'data' && tag === 'e') {
        const end = value as FileEnd;
        if (end.n !== bytes || size !== bytes) {
          throw new FileTransferError(
            'ERR_TENDRIL_SIZE_MISMATCH',
            context.name,
            path,
            `read ${bytes} bytes of ${end.n}`,
          );
        }
        const sha256 = hash.digest('hex');
        if (end.h !== sha256) {
          throw new FileTransferError(
            'ERR_TENDRIL_HASH_MISMATCH',
            context.name,
            path,
            'the SHA-256 of the bytes received is not that of the bytes read',
          );
        }
        state = 'end';
      } else if (state === 'end' && tag === 'end') {
        // Every byte is verified: the stream ends, whether or not the context's answer comes.
        state = 'done';
        readable.push(null);
        return;
      } else throw bad('unexpected value');
    }
  };

  const readable = new Readable({
    read() {
      pull(this).catch((error: unknown) => this.destroy(error as Error));
    },
    destroy(error, callback) {
      // Stop the sender, drop what it sent and nobody will read, and wait for its call to end, so
      // nothing is left reading there: the grace at most.
      channel[ABANDON](new ChannelError(context.name, context.id, `the ${what} was destroyed`));
      cancel.cancel(error);
      const done = () => callback(error);
      cancel.settle(call).then(done, done);
    },
  });
  return abortable(readable, signal);
}
