import { StringDecoder } from 'node:string_decoder';
import { Channel } from '../../core/channel.js';
import { CALL_SERVICE, type Context, routerOf } from '../../core/context.js';
import { ChannelError, ProtocolError } from '../../core/errors.js';
import { SENDER_CLOSED } from '../../core/send-window.js';
import { CALL_SETTLED } from '../../core/sender.js';
import { CommandError } from './errors.js';
import { LineSplitter, stripFinalNewline } from './lines.js';
import { type CheckedOptions, type OutputStream, signalName } from './options.js';
import {
  type Control,
  type ExecRequest,
  INPUT_CHUNK,
  type OutputChunk,
  type RemoteOutcome,
  STDERR,
  STDOUT,
  WHOLE_INPUT_LIMIT,
} from './protocol.js';
import type { CommandResult } from './result.js';

/**
 * How much output may be in flight from a command to the master, unread:
 * the window of its Channel. Past it the remote side stops reading the
 * command's pipes.
 */
const OUTPUT_WINDOW = { messages: 64, bytes: 1024 * 1024 };
/** The window of a streamed input. */
const INPUT_WINDOW = { messages: 16, bytes: 1024 * 1024 };
/**
 * How long past its deadline (`timeout` plus `forceKillAfterDelay`, or an
 * abort plus `forceKillAfterDelay`) the master waits for a command to end
 * before it gives up on the context's word, in ms.
 */
export const BACKSTOP_GRACE = 5000;

type Fd = typeof STDOUT | typeof STDERR;
const STREAM_NAMES: Record<Fd, OutputStream> = { [STDOUT]: 'stdout', [STDERR]: 'stderr' };

/** Which output `Command.lines()` reads: one stream, or both interleaved as they arrive. */
export type LinesFrom = OutputStream | 'all';

/**
 * One reader of a command's output (an iterator of `command.stdout`,
 * `stderr` or `lines()`): what the pump hands it waits here until read,
 * and the pump takes no more output while it waits, so a reader that
 * stops holds the command back instead of piling output up in memory.
 */
class Feed<V> implements AsyncIterableIterator<V> {
  private readonly queue: V[] = [];
  private reader: { resolve: (result: IteratorResult<V>) => void; reject: (error: unknown) => void } | undefined;
  private readonly idleWaiters: (() => void)[] = [];
  private ended = false;
  private failure: unknown;

  constructor(
    private readonly convert: (fd: Fd, chunk: Buffer) => V[],
    private readonly flush: () => V[],
    private readonly detach: (feed: Feed<V>) => void,
  ) {}

  /** True while values it was given are unread. */
  get busy(): boolean {
    return this.queue.length > 0;
  }

  push(fd: Fd, chunk: Buffer): void {
    for (const value of this.convert(fd, chunk)) this.offer(value);
  }

  /** No more output; with `error`, the reader's next read throws it once the rest is read. */
  end(error?: unknown): void {
    if (this.ended) return;
    for (const value of this.flush()) this.offer(value);
    this.ended = true;
    this.failure = error;
    if (this.reader && this.queue.length === 0) this.settle();
  }

  /** Resolves once every value given so far has been read (or the reader left). */
  idle(): Promise<void> {
    if (!this.busy) return Promise.resolve();
    return new Promise((resolve) => this.idleWaiters.push(resolve));
  }

  next(): Promise<IteratorResult<V>> {
    if (this.queue.length > 0) {
      const value = this.queue.shift() as V;
      if (this.queue.length === 0) this.wake();
      return Promise.resolve({ value, done: false });
    }
    if (this.ended) {
      const failure = this.failure;
      this.failure = undefined;
      return failure === undefined ? Promise.resolve({ value: undefined, done: true }) : Promise.reject(failure);
    }
    return new Promise((resolve, reject) => {
      this.reader = { resolve, reject };
    });
  }

  /** The reader left (`break` out of `for await`): it holds nothing back any more. */
  return(): Promise<IteratorResult<V>> {
    this.detach(this);
    this.ended = true;
    this.failure = undefined;
    this.queue.length = 0;
    this.wake();
    if (this.reader) this.settle();
    return Promise.resolve({ value: undefined, done: true });
  }

  [Symbol.asyncIterator](): AsyncIterableIterator<V> {
    return this;
  }

  private offer(value: V): void {
    if (this.reader) {
      const { resolve } = this.reader;
      this.reader = undefined;
      resolve({ value, done: false });
    } else {
      this.queue.push(value);
    }
  }

  private settle(): void {
    const reader = this.reader as NonNullable<typeof this.reader>;
    this.reader = undefined;
    const failure = this.failure;
    this.failure = undefined;
    if (failure === undefined) reader.resolve({ value: undefined, done: true });
    else reader.reject(failure);
  }

  private wake(): void {
    for (const resolve of this.idleWaiters.splice(0)) resolve();
  }
}

/** `arg` as a POSIX shell would need it written. */
function quote(arg: string): string {
  return /^[\w@%+=:,./-]+$/.test(arg) ? arg : `'${arg.replace(/'/g, `'\\''`)}'`;
}

/** The command line, for results and messages. */
export function commandLine(file: string, args: readonly string[]): string {
  return [file, ...args].map(quote).join(' ');
}

/** Chunks of at most `INPUT_CHUNK` bytes of an input stream. */
async function* inputChunks(input: AsyncIterable<Uint8Array | string> | Uint8Array): AsyncGenerator<Uint8Array> {
  const source = input instanceof Uint8Array ? [input] : input;
  for await (const item of source) {
    const bytes = typeof item === 'string' ? Buffer.from(item) : item;
    if (!(bytes instanceof Uint8Array))
      throw new TypeError('an input stream gave a chunk that is not a string or bytes');
    for (let at = 0; at < bytes.length; at += INPUT_CHUNK) yield bytes.subarray(at, at + INPUT_CHUNK);
  }
}

/** Most chunks an outcome may carry. */
const MAX_TAIL = 1024;
/** Most bytes an outcome's tail may carry (the remote half holds at most about 128 KiB). */
const MAX_TAIL_BYTES = 1024 * 1024;
/** Longest spawn error message or code taken from a context. */
const MAX_ERROR_TEXT = 4096;

/** The error a channel's reads end with when the other end closed it: the normal end. */
function isClosed(error: unknown): boolean {
  return error instanceof ChannelError && error.reason === SENDER_CLOSED;
}

/** A value sent back as output: `[STDOUT | STDERR, bytes]` of at most a pipe's chunk. */
function isOutputChunk(value: unknown): value is OutputChunk {
  return (
    Array.isArray(value) &&
    value.length === 2 &&
    (value[0] === STDOUT || value[0] === STDERR) &&
    value[1] instanceof Uint8Array
  );
}

/** A remote outcome of the shape the remote half sends. */
function isOutcome(value: unknown): value is RemoteOutcome {
  if (typeof value !== 'object' || value === null) return false;
  const o = value as Record<string, unknown>;
  const spawnError = o.spawnError as { code?: unknown; message?: unknown } | undefined;
  return (
    (o.pid === undefined || (Number.isSafeInteger(o.pid) && (o.pid as number) > 0)) &&
    (o.exitCode === null ||
      (Number.isInteger(o.exitCode) && (o.exitCode as number) >= 0 && (o.exitCode as number) <= 255)) &&
    (o.signal === null || (typeof o.signal === 'string' && /^SIG[A-Z0-9+-]{1,16}$/.test(o.signal))) &&
    typeof o.durationMs === 'number' &&
    Number.isFinite(o.durationMs) &&
    o.durationMs >= 0 &&
    typeof o.timedOut === 'boolean' &&
    Number.isSafeInteger(o.chunks) &&
    (o.chunks as number) >= 0 &&
    Array.isArray(o.tail) &&
    o.tail.length <= MAX_TAIL &&
    o.tail.every(isOutputChunk) &&
    o.tail.reduce((bytes: number, chunk: OutputChunk) => bytes + chunk[1].byteLength, 0) <= MAX_TAIL_BYTES &&
    (spawnError === undefined ||
      (typeof spawnError === 'object' &&
        spawnError !== null &&
        typeof spawnError.message === 'string' &&
        spawnError.message.length <= MAX_ERROR_TEXT &&
        (spawnError.code === undefined ||
          (typeof spawnError.code === 'string' && spawnError.code.length <= MAX_ERROR_TEXT))))
  );
}

/**
 * A command running in a context, as `context.exec()` and `context.$`
 * return it: await it (it is a promise of its `CommandResult`), read its
 * output while it runs, or kill it.
 *
 * Output travels under flow control: each iterator attached to
 * `stdout`, `stderr` or `lines()` is handed a chunk only once it has read
 * the one before, and while one lags no more output is taken from the
 * context, where the command then blocks on its full pipe. Iterators
 * attached right after `exec()` (in the same tick) see all of the output;
 * one attached later sees it from then on. Leave a loop with `break` to
 * detach.
 *
 * So an attached reader paces the command: read it to the end, or break
 * out of it (or call its `return()`). One that is attached and never read
 * holds the command, and its result, back for ever; with a `timeout` or a
 * `signal`, the master gives up `forceKillAfterDelay` plus 5 s after the
 * deadline or the abort and rejects (as when the context stops answering).
 *
 * A failing command whose promise nobody awaits is not an unhandled
 * rejection.
 */
export class Command<T extends string | Buffer = string> implements Promise<CommandResult<T>> {
  /** `'Command'`. */
  readonly [Symbol.toStringTag] = 'Command';
  /** The context it runs in. */
  readonly context: Context;
  /** The command line, quoted for display (as `CommandResult.command`). */
  readonly command: string;
  private readonly options: CheckedOptions;
  private readonly result: Promise<CommandResult<T>>;
  private readonly channel: Channel<Control, OutputChunk> | undefined;
  private readonly feeds = new Set<Feed<unknown>>();
  private readonly kept: Record<Fd, Buffer[]> = { [STDOUT]: [], [STDERR]: [] };
  private readonly keptBytes: Record<Fd, number> = { [STDOUT]: 0, [STDERR]: 0 };
  private readonly liveLines: Record<Fd, LineSplitter> | undefined;
  private overflowed: OutputStream | undefined;
  private canceled = false;
  /** An error of ours or the caller's (an onOutput that threw, a bad input stream) that ends the command. */
  private failure: unknown;
  private finished = false;
  private pumpEnded = false;
  private pumpError: unknown;
  /** When it was made, for the duration of a command given up on. */
  private readonly started = Date.now();
  /** Set once the master has given up waiting on the context (see `BACKSTOP_GRACE`). */
  private gaveUp = false;
  /** Resolves when the master gives up: the pump stops waiting on its readers. */
  private readonly halted: Promise<void>;
  private halt: () => void = () => {};

  /** Made by `context.exec()`. */
  constructor(context: Context, file: string, args: readonly string[], options: CheckedOptions) {
    this.context = context;
    this.command = commandLine(file, args);
    this.options = options;
    this.liveLines = options.onOutput ? { [STDOUT]: new LineSplitter(), [STDERR]: new LineSplitter() } : undefined;
    this.halted = new Promise((resolve) => {
      this.halt = resolve;
    });
    const { signal } = options;
    if (signal?.aborted) {
      // Never started: nothing to kill, nothing to read.
      this.canceled = true;
      this.pumpEnded = true;
      this.result = Promise.resolve().then(() =>
        this.conclude({
          pid: undefined,
          exitCode: null,
          signal: null,
          durationMs: 0,
          timedOut: false,
          chunks: 0,
          tail: [],
        }),
      );
    } else {
      const router = routerOf(context);
      const channel = new Channel<Control, OutputChunk>(router, { highWaterMark: OUTPUT_WINDOW });
      this.channel = channel;
      const { input } = options;
      let inputChannel: Channel<Uint8Array, never> | undefined;
      let whole: Buffer | undefined;
      if (typeof input === 'string' || input instanceof Uint8Array) {
        const bytes =
          typeof input === 'string' ? Buffer.from(input) : Buffer.from(input.buffer, input.byteOffset, input.length);
        if (bytes.length <= WHOLE_INPUT_LIMIT) whole = bytes;
        else inputChannel = new Channel<Uint8Array, never>(router, { highWaterMark: INPUT_WINDOW });
      } else if (input !== undefined) {
        inputChannel = new Channel<Uint8Array, never>(router, { highWaterMark: INPUT_WINDOW });
      }
      const request: ExecRequest = {
        file,
        args: [...args],
        shell: options.shell,
        cwd: options.cwd,
        env: options.env,
        extendEnv: options.extendEnv,
        input: whole,
        streamedInput: inputChannel !== undefined,
        timeout: options.timeout,
        killSignal: options.killSignal,
        forceKillAfterDelay: options.forceKillAfterDelay,
      };
      // Ends the call's wait when the master gives up on the context.
      const release = new AbortController();
      const call = context[CALL_SERVICE](
        'exec',
        inputChannel ? [request, channel.otherEnd(), inputChannel.otherEnd()] : [request, channel.otherEnd()],
        { signal: release.signal },
        `exec ${this.command}`,
      );
      // The master's own bound: the timeout and kills run in the context,
      // and a context that stops answering (or a reader that stops reading)
      // must not hold the command for ever once its deadline has passed.
      let backstop: ReturnType<typeof setTimeout> | undefined;
      let outcomeArrived = false;
      let backstopAt = Number.POSITIVE_INFINITY;
      let giveUp: (result: Promise<CommandResult<T>>) => void = () => {};
      const abandoned = new Promise<CommandResult<T>>((resolve) => {
        giveUp = resolve;
      });
      const arm = (cause: 'timeout' | 'abort', after: number) => {
        const at = Date.now() + after;
        if (this.finished || at >= backstopAt) return;
        backstopAt = at;
        if (backstop) clearTimeout(backstop);
        backstop = setTimeout(() => giveUp(this.abandon(cause, after, outcomeArrived)), after);
        // Unref'd: while the call is in flight the router keeps the process alive.
        backstop.unref?.();
      };
      const force = options.forceKillAfterDelay ?? 0;
      if (options.timeout !== undefined) arm('timeout', options.timeout + force + BACKSTOP_GRACE);
      const onAbort = () => {
        this.canceled = true;
        this.killGroup(options.killSignal);
        arm('abort', force + BACKSTOP_GRACE);
      };
      signal?.addEventListener('abort', onAbort, { once: true });
      if (inputChannel && input !== undefined) {
        void this.feedInput(inputChannel, typeof input === 'string' ? Buffer.from(input) : input);
      }
      const outcome = call.then((value) => {
        if (!isOutcome(value)) {
          throw new ProtocolError('exec', context.name, 'its result is not the shape of a command outcome');
        }
        outcomeArrived = true;
        return value;
      });
      const pumped = this.pump(channel, outcome);
      const concluded = Promise.all([outcome, pumped]).then(([value]) => this.conclude(value));
      concluded.catch(() => {});
      this.result = Promise.race([concluded, abandoned]).finally(() => {
        this.finished = true;
        if (backstop) clearTimeout(backstop);
        signal?.removeEventListener('abort', onAbort);
        if (this.gaveUp || !this.pumpEnded) {
          // Given up on, or the context's answer was malformed: release the
          // call, both directions of the channels and the readers, now.
          this.halt();
          release.abort();
          channel[CALL_SETTLED]();
          inputChannel?.[CALL_SETTLED]();
        }
        channel.close();
        inputChannel?.close();
      });
    }
    this.result.catch(() => {});
  }

  /**
   * Chunks of stdout as they arrive: strings (UTF-8, never split inside a
   * character) or Buffers with `encoding: 'buffer'`. Each iterator made
   * from it paces the command (flow control): read it to the end or
   * `break` out of it, else the command, and awaiting it, wait on it.
   */
  get stdout(): AsyncIterable<T> {
    return { [Symbol.asyncIterator]: () => this.chunks(STDOUT) };
  }

  /** Chunks of stderr as they arrive, as `stdout` (and, like it, read it to the end or `break` out of it). */
  get stderr(): AsyncIterable<T> {
    return { [Symbol.asyncIterator]: () => this.chunks(STDERR) };
  }

  /**
   * Lines of output as they arrive (UTF-8, without their newline; a line
   * longer than 1 MiB comes in pieces).
   *
   * The iterator is attached at once and paces the command (flow
   * control): read it to the end or `break` out of it (`return()`), else
   * the command, and awaiting it, wait on it. `const it = command.lines();
   * await command;` never resolves without a `timeout` or `signal`.
   * @param from `'stdout'` (default), `'stderr'`, or `'all'` for both in the order they arrived.
   */
  lines(from: LinesFrom = 'stdout'): AsyncIterableIterator<string> {
    if (from !== 'stdout' && from !== 'stderr' && from !== 'all') {
      throw new TypeError(`command.lines() reads 'stdout', 'stderr' or 'all', not ${String(from)}`);
    }
    const splitters: Record<Fd, LineSplitter> = { [STDOUT]: new LineSplitter(), [STDERR]: new LineSplitter() };
    const wanted = (fd: Fd) => from === 'all' || STREAM_NAMES[fd] === from;
    return this.attach<string>(
      (fd, chunk) => (wanted(fd) ? splitters[fd].push(chunk) : []),
      () => [...splitters[STDOUT].end(), ...splitters[STDERR].end()],
    );
  }

  /**
   * Sends `signal` to the command's process group (the command and every
   * process it started that stayed in its group), followed by SIGKILL
   * after `forceKillAfterDelay` if the group is still there.
   * @returns false when the command has already finished, else true (the signal is on its way).
   * @throws InvalidOptionError when `signal` is not a signal name.
   */
  kill(signal = 'SIGTERM'): boolean {
    signalName(signal, 'signal', 'command.kill()');
    if (this.finished || !this.channel) return false;
    this.killGroup(signal);
    return true;
  }

  /** Resolves with the result, or rejects (see `ExecOptions.reject`). */
  // biome-ignore lint/suspicious/noThenProperty: a Command is awaited, like execa's subprocess.
  then<R1 = CommandResult<T>, R2 = never>(
    onfulfilled?: ((value: CommandResult<T>) => R1 | PromiseLike<R1>) | null,
    onrejected?: ((reason: unknown) => R2 | PromiseLike<R2>) | null,
  ): Promise<R1 | R2> {
    return this.result.then(onfulfilled, onrejected);
  }

  /** As `Promise.prototype.catch`. */
  catch<R = never>(onrejected?: ((reason: unknown) => R | PromiseLike<R>) | null): Promise<CommandResult<T> | R> {
    return this.result.catch(onrejected);
  }

  /** As `Promise.prototype.finally`. */
  finally(onfinally?: (() => void) | null): Promise<CommandResult<T>> {
    return this.result.finally(onfinally);
  }

  private chunks(fd: Fd): AsyncIterableIterator<T> {
    if (this.options.encoding === 'buffer') {
      return this.attach<T>(
        (from, chunk) => (from === fd ? [chunk as T] : []),
        () => [],
      );
    }
    const decoder = new StringDecoder('utf8');
    return this.attach<T>(
      (from, chunk) => {
        if (from !== fd) return [];
        const text = decoder.write(chunk);
        return text ? [text as T] : [];
      },
      () => {
        const rest = decoder.end();
        return rest ? [rest as T] : [];
      },
    );
  }

  private attach<V>(convert: (fd: Fd, chunk: Buffer) => V[], flush: () => V[]): Feed<V> {
    const feed = new Feed<V>(convert, flush, (gone) => this.feeds.delete(gone as Feed<unknown>));
    if (this.pumpEnded) feed.end(this.pumpError);
    else this.feeds.add(feed as Feed<unknown>);
    return feed;
  }

  private killGroup(signal: string): void {
    const force = this.options.forceKillAfterDelay;
    this.channel?.send([signal, force === undefined ? null : force]).catch(() => {});
  }

  /**
   * Reads the output off the channel, handing each chunk to the buffer,
   * `onOutput` and every attached reader. It ends once it has read as many
   * chunks as the outcome says were sent (they travel ahead of it), without
   * waiting for the channel's close, which follows the outcome: over ssh
   * that would be one more small write held back by Nagle's algorithm.
   */
  private async pump(channel: Channel<Control, OutputChunk>, outcome: Promise<RemoteOutcome>): Promise<void> {
    let expected: number | undefined;
    const known = outcome.then(
      (value) => {
        expected = typeof value.chunks === 'number' ? value.chunks : undefined;
      },
      () => {
        // The call failed (the context went away): no count will come; the channel ends too.
      },
    );
    let arrived = false;
    const whenArrived = known.then(() => {
      arrived = true;
    });
    let received = 0;
    let pending: Promise<{ value: unknown } | { error: unknown }> | undefined;
    try {
      for (;;) {
        if (expected !== undefined && received >= expected) break;
        pending ??= channel.get().then(
          (value) => ({ value }),
          (error: unknown) => ({ error }),
        );
        // Until the outcome is in, it may end the wait; after, only the channel can.
        const step = arrived ? await pending : await Promise.race([pending, whenArrived]);
        if (step === undefined) continue;
        pending = undefined;
        if ('error' in step) {
          if (isClosed(step.error)) break;
          throw step.error;
        }
        received++;
        await this.take(step.value);
        if (this.gaveUp) return;
      }
      for (const chunk of (await outcome.catch(() => undefined))?.tail ?? []) await this.take(chunk);
      if (this.liveLines) {
        this.tell(STDOUT, this.liveLines[STDOUT].end());
        this.tell(STDERR, this.liveLines[STDERR].end());
      }
    } catch (error) {
      this.pumpError ??= error;
      this.failure ??= error;
      this.killGroup('SIGKILL');
    } finally {
      this.pumpEnded = true;
      for (const feed of this.feeds) feed.end(this.pumpError);
      this.feeds.clear();
    }
  }

  /** Hands one chunk to the buffer, `onOutput` and the readers, and waits until every reader has taken it. */
  private async take(value: unknown): Promise<void> {
    if (!isOutputChunk(value)) {
      throw new ProtocolError('exec', this.context.name, 'its output was not [stream, bytes]');
    }
    const fd = value[0];
    const chunk = Buffer.isBuffer(value[1])
      ? value[1]
      : Buffer.from(value[1].buffer, value[1].byteOffset, value[1].byteLength);
    this.keep(fd, chunk);
    if (this.liveLines) this.tell(fd, this.liveLines[fd].push(chunk));
    const feeds = [...this.feeds];
    for (const feed of feeds) feed.push(fd, chunk);
    const waiting = feeds.filter((feed) => feed.busy);
    if (waiting.length > 0) await Promise.race([Promise.all(waiting.map((feed) => feed.idle())), this.halted]);
  }

  /** Keeps a chunk for the result, up to `maxBuffer` per stream; past it, kills the command. */
  private keep(fd: Fd, chunk: Buffer): void {
    if (!this.options.buffer || this.overflowed) return;
    const room = this.options.maxBuffer - this.keptBytes[fd];
    if (chunk.length <= room) {
      this.kept[fd].push(chunk);
      this.keptBytes[fd] += chunk.length;
      return;
    }
    this.kept[fd].push(chunk.subarray(0, room));
    this.keptBytes[fd] += room;
    this.overflowed = STREAM_NAMES[fd];
    this.killGroup(this.options.killSignal);
  }

  private tell(fd: Fd, lines: string[]): void {
    const onOutput = this.options.onOutput;
    if (!onOutput || this.failure !== undefined) return;
    for (const line of lines) {
      try {
        onOutput({ context: this.context.name, stream: STREAM_NAMES[fd], line });
      } catch (error) {
        // The caller's logger failed: stop the command rather than run on unlogged.
        this.failure = error;
        this.killGroup(this.options.killSignal);
        return;
      }
    }
  }

  private async feedInput(channel: Channel<Uint8Array, never>, input: AsyncIterable<Uint8Array | string> | Uint8Array) {
    try {
      for await (const chunk of inputChunks(input)) await channel.send(chunk);
    } catch (error) {
      // The command stopped reading (it exited; the channel closed with it), or the stream failed.
      if (!this.finished && !(error instanceof Error && error.name === 'ChannelError')) {
        this.failure ??= error;
        this.killGroup(this.options.killSignal);
      }
    } finally {
      channel.close();
    }
  }

  private output(fd: Fd): T {
    const bytes = Buffer.concat(this.kept[fd]);
    const value = (this.options.encoding === 'buffer' ? bytes : bytes.toString('utf8')) as T;
    return this.options.stripFinalNewline ? stripFinalNewline(value) : value;
  }

  /** Makes the result, or the error, from how the command ended. */
  private conclude(outcome: RemoteOutcome): CommandResult<T> {
    if (this.failure !== undefined) throw this.failure;
    const { options } = this;
    const killed = outcome.signal ?? undefined;
    const result: CommandResult<T> = {
      command: this.command,
      stdout: this.output(STDOUT),
      stderr: this.output(STDERR),
      exitCode: outcome.exitCode ?? undefined,
      signal: killed,
      durationMs: outcome.durationMs,
      failed: false,
      timedOut: outcome.timedOut,
      isCanceled: this.canceled,
      isMaxBuffer: this.overflowed !== undefined,
    };
    let how: string | undefined;
    let advice = '';
    const signalled = killed ? ` and was killed with ${killed}` : '';
    if (outcome.spawnError) {
      how = `could not be started: ${outcome.spawnError.message}`;
      if (outcome.spawnError.code === 'ENOENT') {
        advice = options.cwd
          ? `check that the program is on the context's PATH and that the directory ${options.cwd} exists there`
          : "check that the program is on the context's PATH (or give its full path)";
      }
    } else if (result.timedOut) {
      how = `timed out after ${options.timeout} ms${signalled}`;
      advice = 'raise the timeout if it is expected to take longer';
    } else if (result.isCanceled) {
      how = outcome.pid === undefined ? 'aborted before it started' : `was aborted (its signal fired)${signalled}`;
    } else if (this.overflowed) {
      how = `wrote more than maxBuffer (${options.maxBuffer} bytes) on ${this.overflowed}${signalled}`;
      advice = 'raise maxBuffer, or read the output as it comes with buffer: false';
    } else if (killed) {
      how = `was killed by signal ${killed}`;
    } else if (outcome.exitCode !== 0) {
      how = `exit code ${outcome.exitCode}`;
    }
    if (how === undefined) return result;
    return this.failed(result, how, advice);
  }

  /** `result` marked failed: returned with `reject: false`, else thrown as a CommandError. */
  private failed(result: CommandResult<T>, how: string, advice: string): CommandResult<T> {
    result.failed = true;
    if (!this.options.reject) return result;
    throw new CommandError<T>(result, this.context.name, how, advice);
  }

  /**
   * The master gives up on the command `after` ms past its timeout or
   * abort: it tells the context to SIGKILL the group (if it still listens),
   * ends the readers with the error, and settles with what it has.
   * @param arrived whether the context's outcome came (then only a reader held it back).
   */
  private abandon(cause: 'timeout' | 'abort', after: number, arrived: boolean): Promise<CommandResult<T>> {
    this.gaveUp = true;
    this.killGroup('SIGKILL');
    const result: CommandResult<T> = {
      command: this.command,
      stdout: this.output(STDOUT),
      stderr: this.output(STDERR),
      exitCode: undefined,
      signal: undefined,
      durationMs: Date.now() - this.started,
      failed: true,
      timedOut: cause === 'timeout',
      isCanceled: this.canceled,
      isMaxBuffer: this.overflowed !== undefined,
    };
    const waited = cause === 'timeout' ? after - (this.options.timeout as number) : after;
    const why = arrived
      ? `its output was still unread ${waited} ms later`
      : `the context did not report its end within ${waited} ms more`;
    const how =
      cause === 'timeout' ? `timed out after ${this.options.timeout} ms, and ${why}` : `was aborted, and ${why}`;
    const advice =
      'a reader of its output (command.lines(), stdout or stderr) that stopped reading holds it back: read it to the end or break out of the loop' +
      (arrived ? '' : '; else the context is unresponsive');
    const error = new CommandError<T>(result, this.context.name, how, advice);
    this.pumpError = error;
    for (const feed of this.feeds) feed.end(error);
    this.feeds.clear();
    this.halt();
    return this.options.reject ? Promise.reject(error) : Promise.resolve(result);
  }
}
