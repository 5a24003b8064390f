import { StringDecoder } from 'node:string_decoder';
import { Channel } from '../../core/channel.js';
import { CALL_TOOLKIT, type Context, routerOf } from '../../core/context.js';
import { ChannelError, HeldBytesError, ProtocolError, withoutStack } from '../../core/errors.js';
import type { Holding } from '../../core/holdings.js';
import { ABANDON } from '../../core/sender.js';
import { Cancellation } from '../cancellation.js';
import { commandLine } from './command-line.js';
import { CommandError } from './errors.js';
import { Feed } from './feed.js';
import { endable, inputChunks } from './input.js';
import { KeptOutput } from './kept.js';
import { LineSplitter, stripFinalNewline } from './lines.js';
import { type CheckedOptions, type OutputStream, signalName } from './options.js';
import { isClosed, isOutcome, isOutputChunk } from './outcome.js';
import {
  type Control,
  type ExecRequest,
  type Fd,
  type OutputChunk,
  type RemoteOutcome,
  STDERR,
  STDOUT,
  WHOLE_INPUT_LIMIT,
} from './protocol.js';
import type { CommandResult } from './result.js';

/** Most bytes of a command's output in one message: 16 times what a context reads from a pipe at once. */
const MAX_OUTPUT_CHUNK = 1024 * 1024;

/**
 * How much output may be in flight from a command to the master, unread:
 * the window of its Channel. Past it the remote side stops reading the
 * command's pipes.
 */
const OUTPUT_WINDOW = { messages: 64, bytes: 1024 * 1024 };
/**
 * How long past its deadline (`timeout` plus `forceKillAfterDelay`, or an
 * abort, or the master's own kill past `maxBuffer` or `maxHeldBytes`, plus
 * `forceKillAfterDelay`) the master waits for a command to end before it
 * gives up on the context's word, in ms.
 */
export const BACKSTOP_GRACE = 5000;

/** Why the master stopped waiting for a command to end by itself. */
type Stop = 'timeout' | 'abort' | 'maxBuffer' | 'maxHeldBytes' | 'failure';

/** Longest part of a command line named in what its output holds. */
const HELD_COMMAND_TEXT = 200;
const STREAM_NAMES: Record<Fd, OutputStream> = { [STDOUT]: 'stdout', [STDERR]: 'stderr' };

/** Which output `Command.lines()` reads: one stream, or both interleaved as they arrive. */
export type LinesFrom = OutputStream | 'all';
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
 * detach. Output a reader has taken, or that `maxBuffer` discards, is not
 * held here any more: only the output kept for the result is, and it is
 * charged to the account of the child the context is reached through
 * (`maxHeldBytes` of the Router).
 *
 * So an attached reader paces the command: read it to the end, or break
 * out of it (or call its `return()`). One that is attached and never read
 * holds the command, and its result, back for ever; with a `timeout` or a
 * `signal`, the master gives up `forceKillAfterDelay` plus 5 s after the
 * deadline or the abort and rejects (as when the context stops answering).
 * It does the same after it kills the command itself (output past
 * `maxBuffer` or `maxHeldBytes`, an `onOutput` that threw).
 *
 * Once it has settled, nothing more is read from the context for it: what
 * the context still sends is dropped, a streamed `input` is ended, and no
 * send of it waits on the context any more.
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
  /** Bounds how long the master waits for the command once it is to stop (see `BACKSTOP_GRACE`). */
  private readonly cancellation: Cancellation | undefined;
  /** The output kept for the result, on the account of the child the context is reached through. */
  private readonly holding: Holding | undefined;
  private readonly feeds = new Set<Feed<unknown>>();
  private readonly kept: Record<Fd, KeptOutput> = { [STDOUT]: new KeptOutput(), [STDERR]: new KeptOutput() };
  private readonly liveLines: Record<Fd, LineSplitter> | undefined;
  /** Set when the master stopped keeping output: past `maxBuffer` on `stream`, or past the account (`held`). */
  private overflowed: { stream: OutputStream; held?: HeldBytesError } | undefined;
  private canceled = false;
  /** An error of ours or the caller's (an onOutput that threw, a bad input stream) that ends the command. */
  private failure: unknown;
  /** What stopped the command first, when something did. */
  private stoppedBy: Stop | undefined;
  private finished = false;
  private pumpEnded = false;
  private pumpError: unknown;
  /** When it was made, for the duration of a command given up on. */
  private readonly started = Date.now();
  /** Set once the master has given up waiting on the context (see `BACKSTOP_GRACE`). */
  private gaveUp = false;
  /**
   * Ends the pump's wait on its readers, once, when the master gives up.
   * A slot, not a long-lived promise raced against each wait: a race keeps
   * every value it settled with reachable for as long as such a promise is
   * pending, which is every chunk of the output.
   */
  private wakePump: (() => void) | undefined;

  /** Made by `context.exec()`. */
  constructor(context: Context, file: string, args: readonly string[], options: CheckedOptions) {
    this.context = context;
    this.command = commandLine(file, args);
    this.options = options;
    this.liveLines = options.onOutput ? { [STDOUT]: new LineSplitter(), [STDERR]: new LineSplitter() } : undefined;
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
      const shown =
        this.command.length > HELD_COMMAND_TEXT ? `${this.command.slice(0, HELD_COMMAND_TEXT)}...` : this.command;
      this.holding = options.buffer ? router.holding(context.id, `the output of exec ${shown}`) : undefined;
      const { input } = options;
      let inputChannel: Channel<Uint8Array, never> | undefined;
      let whole: Buffer | undefined;
      if (typeof input === 'string' || input instanceof Uint8Array) {
        const bytes =
          typeof input === 'string' ? Buffer.from(input) : Buffer.from(input.buffer, input.byteOffset, input.length);
        if (bytes.length <= WHOLE_INPUT_LIMIT) whole = bytes;
        else inputChannel = new Channel<Uint8Array, never>(router);
      } else if (input !== undefined) {
        // Nothing comes back on it: how far the input runs ahead is the window of the context's end.
        inputChannel = new Channel<Uint8Array, never>(router);
      }
      const request: ExecRequest = {
        file,
        args: [...args],
        shell: options.shell,
        extendEnv: options.extendEnv,
        streamedInput: inputChannel !== undefined,
        killSignal: options.killSignal,
      };
      if (options.cwd !== undefined) request.cwd = options.cwd;
      if (options.env !== undefined) request.env = options.env;
      if (whole !== undefined) request.input = whole;
      if (options.timeout !== undefined) request.timeout = options.timeout;
      if (options.forceKillAfterDelay !== undefined) request.forceKillAfterDelay = options.forceKillAfterDelay;
      // The timeout and the kills run in the context; the master's own
      // bound is that a context that stops answering (or a reader that
      // stops reading) cannot hold the command for ever once it is to stop.
      const cancellation = new Cancellation({
        signal,
        timeout: options.timeout,
        what: `exec ${this.command}`,
        contextName: context.name,
        grace: (options.forceKillAfterDelay ?? 0) + BACKSTOP_GRACE,
      });
      this.cancellation = cancellation;
      cancellation.onStop(() => {
        // Else the master stopped it itself and said why first.
        this.stoppedBy ??= signal?.aborted ? 'abort' : 'timeout';
      });
      // An abort kills the group whatever stopped the command before.
      const onAbort = () => {
        this.canceled = true;
        this.killGroup(options.killSignal);
      };
      signal?.addEventListener('abort', onAbort, { once: true });
      let outcomeArrived = false;
      const call = context[CALL_TOOLKIT](
        'exec',
        inputChannel ? [request, channel.otherEnd(), inputChannel.otherEnd()] : [request, channel.otherEnd()],
        // Ends the call's wait when the master gives up on the context.
        { signal: cancellation.abandon },
        `exec ${this.command}`,
      );
      let endInput: (() => void) | undefined;
      if (inputChannel && input !== undefined) {
        let source: AsyncIterable<Uint8Array | string> | Uint8Array;
        if (typeof input === 'string') source = Buffer.from(input);
        else if (input instanceof Uint8Array) source = input;
        else ({ items: source, end: endInput } = endable(input));
        void this.feedInput(inputChannel, source);
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
      this.result = cancellation
        .settle(concluded, { keepFailure: true, abandoned: () => this.abandon(outcomeArrived) })
        .finally(() => {
          this.finished = true;
          this.holding?.close();
          signal?.removeEventListener('abort', onAbort);
          // Given up on, or the context's answer was malformed: release the readers now.
          if (this.gaveUp || !this.pumpEnded) this.halt();
          // Nothing more is read from the context, nor kept for it, nor waits on it: what it
          // still sends is dropped, and input it takes no credit for no longer holds the master.
          const ended = withoutStack(
            () => new ChannelError(context.name, context.id, `exec ${this.command} has ended`),
          );
          channel[ABANDON](ended);
          inputChannel?.[ABANDON](ended);
          endInput?.();
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
   * The master stops the command itself (`why`): kills its group and, as
   * for an abort, waits at most `forceKillAfterDelay` plus 5 s for its end.
   */
  private stop(why: Stop, signal: string): void {
    this.stoppedBy ??= why;
    this.killGroup(signal);
    this.cancellation?.cancel(why);
  }

  /** The master gives up on the context: the pump stops waiting on its readers. */
  private halt(): void {
    this.gaveUp = true;
    const wake = this.wakePump;
    this.wakePump = undefined;
    wake?.();
  }

  /**
   * Reads the output off the channel, handing each chunk to the buffer,
   * `onOutput` and every attached reader. It ends once it has read as many
   * chunks as the outcome says were sent (they travel ahead of it), without
   * waiting for the channel's close, which follows the outcome: over ssh
   * that would be one more small write held back by Nagle's algorithm.
   *
   * Nothing long-lived is raced against a read: each wait is a promise of
   * its own, and the outcome wakes the one waiting through a slot, so a
   * chunk is unreachable here once it has been handed on.
   */
  private async pump(channel: Channel<Control, OutputChunk>, outcome: Promise<RemoteOutcome>): Promise<void> {
    let expected: number | undefined;
    let arrived = false;
    let wake: (() => void) | undefined;
    const onOutcome = () => {
      arrived = true;
      wake?.();
    };
    outcome.then((value) => {
      expected = typeof value.chunks === 'number' ? value.chunks : undefined;
      onOutcome();
    }, onOutcome); // The call failed (the context went away): no count will come; the channel ends too.
    let received = 0;
    let pending: Promise<{ value: unknown } | { error: unknown }> | undefined;
    try {
      for (;;) {
        if (expected !== undefined && received >= expected) break;
        pending ??= channel.get().then(
          (value) => ({ value }),
          (error: unknown) => ({ error }),
        );
        const read = pending;
        // Until the outcome is in, it may end the wait; after, only the channel can.
        const step = arrived
          ? await read
          : await new Promise<{ value: unknown } | { error: unknown } | undefined>((resolve) => {
              wake = () => resolve(undefined);
              read.then(resolve);
            });
        wake = undefined;
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
      for (const chunk of (await outcome.catch(() => undefined))?.tail ?? []) {
        await this.take(chunk);
        if (this.gaveUp) return;
      }
      if (this.liveLines) {
        this.tell(STDOUT, this.liveLines[STDOUT].end());
        this.tell(STDERR, this.liveLines[STDERR].end());
      }
    } catch (error) {
      this.pumpError ??= error;
      this.failure ??= error;
      this.stop('failure', 'SIGKILL');
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
    // A context reads a command's pipes 64 KiB at a time: a piece of megabytes of short lines would stall
    // the readers, and each line kept would hold all of it.
    if (value[1].byteLength > MAX_OUTPUT_CHUNK) {
      throw new ProtocolError(
        'exec',
        this.context.name,
        `its output came in a piece of ${value[1].byteLength} bytes, more than the ${MAX_OUTPUT_CHUNK} a context sends at once`,
      );
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
    if (waiting.length === 0 || this.gaveUp) return;
    await new Promise<void>((resolve) => {
      this.wakePump = resolve;
      void Promise.all(waiting.map((feed) => feed.idle())).then(() => resolve());
    });
    this.wakePump = undefined;
  }

  /**
   * Keeps a chunk for the result, up to `maxBuffer` per stream and what the
   * child's account allows (charged as it is allocated); past either, kills
   * the command and keeps no more.
   */
  private keep(fd: Fd, chunk: Buffer): void {
    if (!this.options.buffer || this.overflowed || this.gaveUp) return;
    const kept = this.kept[fd];
    const room = this.options.maxBuffer - kept.bytes;
    const part = chunk.length <= room ? chunk : chunk.subarray(0, room);
    try {
      // The output window may still be on its way, and is charged to the same account as it arrives:
      // keeping it free makes the command stop here, not its child be cut off for passing the limit.
      this.holding?.add(kept.allocation(part.length), OUTPUT_WINDOW.bytes);
    } catch (error) {
      if (!(error instanceof HeldBytesError)) throw error;
      this.overflowed = { stream: STREAM_NAMES[fd], held: error };
      this.stop('maxHeldBytes', this.options.killSignal);
      return;
    }
    kept.push(part);
    if (part !== chunk) {
      this.overflowed = { stream: STREAM_NAMES[fd] };
      this.stop('maxBuffer', this.options.killSignal);
    }
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
        this.stop('failure', this.options.killSignal);
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
        this.stop('failure', this.options.killSignal);
      }
    } finally {
      channel.close();
    }
  }

  /** The output kept for the result, let go of here: the result holds it from now on. */
  private output(fd: Fd): T {
    const bytes = this.kept[fd].take();
    const value = (this.options.encoding === 'buffer' ? bytes : bytes.toString('utf8')) as T;
    return this.options.stripFinalNewline ? stripFinalNewline(value) : value;
  }

  /** What the result says of output the master stopped keeping, for the message. */
  private overflowText(): string {
    const overflowed = this.overflowed as NonNullable<typeof this.overflowed>;
    const { held } = overflowed;
    if (!held) return `wrote more than maxBuffer (${this.options.maxBuffer} bytes) on ${overflowed.stream}`;
    return `its output kept for the result, with room for the ${OUTPUT_WINDOW.bytes} bytes more that may be on their way, passed what ${held.account} may make '${routerOf(this.context).name}' hold (maxHeldBytes, ${held.maxHeldBytes} bytes, shared with everything else they make it hold)`;
  }

  /** What to do about output the master stopped keeping. */
  private overflowAdvice(): string {
    return this.overflowed?.held
      ? "read the output as it comes with buffer: false, lower maxBuffer, or raise the Router's maxHeldBytes"
      : 'raise maxBuffer, or read the output as it comes with buffer: false';
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
      isMaxBuffer: this.overflowed !== undefined && !this.overflowed.held,
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
      how = `${this.overflowText()}${signalled}`;
      advice = this.overflowAdvice();
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
    throw new CommandError<T>(result, this.context.name, how, advice, { cause: this.overflowed?.held });
  }

  /**
   * The master gives up on the command `forceKillAfterDelay` plus
   * `BACKSTOP_GRACE` ms after it was to stop (`stoppedBy`): it tells the
   * context to SIGKILL the group (if it still listens), ends the readers
   * with the error, and settles with what it has.
   * @param arrived whether the context's outcome came (then only a reader held it back).
   */
  private abandon(arrived: boolean): Promise<CommandResult<T>> {
    this.killGroup('SIGKILL');
    const cause = this.stoppedBy ?? 'abort';
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
      isMaxBuffer: this.overflowed !== undefined && !this.overflowed.held,
    };
    // An error of ours or the caller's ends it as it would have with the context's word.
    const error = cause === 'failure' ? this.failure : this.abandoned(result, cause, arrived);
    this.pumpError = error;
    for (const feed of this.feeds) feed.end(error);
    this.feeds.clear();
    this.halt();
    return this.options.reject || cause === 'failure' ? Promise.reject(error) : Promise.resolve(result);
  }

  /** The error of a command given up on after `cause`. */
  private abandoned(result: CommandResult<T>, cause: Exclude<Stop, 'failure'>, arrived: boolean): CommandError<T> {
    const waited = (this.options.forceKillAfterDelay ?? 0) + BACKSTOP_GRACE;
    const why = arrived
      ? `its output was still unread ${waited} ms later`
      : `the context did not report its end within ${waited} ms more`;
    const how =
      cause === 'timeout'
        ? `timed out after ${this.options.timeout} ms`
        : cause === 'abort'
          ? 'was aborted'
          : this.overflowText();
    const advice =
      'a reader of its output (command.lines(), stdout or stderr) that stopped reading holds it back: read it to the end or break out of the loop' +
      (arrived ? '' : '; else the context is unresponsive');
    return new CommandError<T>(result, this.context.name, `${how}, and ${why}`, advice, {
      cause: this.overflowed?.held,
    });
  }
}
