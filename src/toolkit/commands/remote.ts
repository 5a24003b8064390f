/**
 * The remote half of `context.exec()`: runs one command in this context,
 * in a process group of its own, and streams its output back on the
 * command's Channel under flow control. A full window pauses the pipe, so
 * a command whose output nobody reads blocks on write, as it would in a
 * shell pipeline, instead of filling memory here.
 *
 * Every group still there is killed when this context shuts down or its
 * process exits, a finished command's included when processes it started
 * stayed in it, so no command outlives the context that started it.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { constants } from 'node:os';
import type { Writable } from 'node:stream';
import type { Channel } from '../../core/channel.js';
import { environmentNow, markOwn } from '../../core/process-state.js';
import { contextRuntime } from '../../core/runtime.js';
import { groupAlive, killGroup } from '../process-groups.js';
import type { Control, ExecRequest, OutputChunk, RemoteOutcome } from './protocol.js';
import { commandSpawner, type SpawnedCommand } from './spawner.js';

/** What is used of a command's stdout and stderr: a Readable, or the spawner's `SpawnedOutput`. */
interface OutputSource {
  on(event: 'data', listener: (data: Buffer) => void): unknown;
  pause(): unknown;
  resume(): unknown;
}

/** How long output waits to go out with more, or with the outcome, in ms. */
const HOLD_MS = 10;
/** Held output that goes out at once. */
const FLUSH_BYTES = 64 * 1024;
/** How long a command runs before this end announces itself for kill() (see `control`), in ms. */
const CONTROL_DELAY = 20;

/** A command whose process group may still have members. */
interface Running {
  pid: number;
  /** Its leader has exited and its stdio closed; members it started may still be there. */
  closed: boolean;
  /** Resolves when `closed` becomes true. */
  whenClosed: Promise<void>;
}

/**
 * Every group that may still have members: a command's entry stays after
 * the command has ended, while processes it left in its group live on, so
 * the shutdown and exit hooks reach them too. Dead groups are pruned on
 * new commands (amortized: when the set has doubled), by a sweep while
 * some are left over, and at shutdown, so the set stays as small as the
 * groups really there.
 */
const running = new Set<Running>();
/** Size of `running` at which a new command prunes it first. */
let pruneAt = 64;
/** Prunes `running` now and then while finished commands' groups linger. */
let sweeper: ReturnType<typeof setInterval> | undefined;
/** How often the sweeper runs, in ms. */
const SWEEP_MS = 1000;
let hooked = false;
/**
 * Set once the context has begun to shut down: a command that ends then
 * (killed by the shutdown, mostly) is not answered, and its call ends with
 * the connection, as every call still running does (the master's
 * `ContextDisconnectedError`), whichever way it was started.
 */
let stopping = false;

/** Forgets the finished commands whose groups are gone. */
function prune(): void {
  for (const command of running) if (command.closed && !groupAlive(command.pid)) running.delete(command);
  let lingering = false;
  for (const command of running) lingering ||= command.closed;
  if (!lingering && sweeper) {
    clearInterval(sweeper);
    sweeper = undefined;
  }
}

/** Sweeps lingering groups until none are left; unref'd, so it never keeps the context alive. */
function sweepLater(): void {
  if (sweeper) return;
  sweeper = setInterval(prune, SWEEP_MS);
  sweeper.unref();
}

/**
 * On first use: kill every group still there when the context shuts down
 * (SIGTERM, then SIGKILL once the commands have ended or the shutdown's
 * grace has passed) and, whatever ends the process, as it exits.
 */
function hookShutdown(): void {
  if (hooked) return;
  hooked = true;
  process.on(
    'exit',
    markOwn(() => {
      for (const command of running) killGroup(command.pid, 'SIGKILL');
    }),
  );
  contextRuntime().broker.addCleanup(async (grace) => {
    stopping = true;
    prune();
    const commands = [...running];
    if (commands.length === 0) return;
    for (const command of commands) killGroup(command.pid, 'SIGTERM');
    // Not until the groups are gone: an orphaned member is a zombie, still
    // in its group, until init reaps it, which may take a while.
    let timer: ReturnType<typeof setTimeout> | undefined;
    await Promise.race([
      Promise.all(commands.map((command) => command.whenClosed)),
      new Promise((resolve) => {
        timer = setTimeout(resolve, grace);
      }),
    ]);
    clearTimeout(timer);
    // The leader may have gone while members it started hold on: the group is signalled either way.
    for (const command of commands) killGroup(command.pid, 'SIGKILL');
  });
}

/** A signal name this system knows. */
function isSignal(value: unknown): value is string {
  // biome-ignore lint/suspicious/noPrototypeBuiltins: Object.hasOwn is missing on the Node 12 to 16.8 a child may run.
  return typeof value === 'string' && Object.prototype.hasOwnProperty.call(constants.signals, value);
}

/**
 * Runs `request` and resolves with how it ended, once it has exited and its
 * output has all been handed to `channel`. Output goes out as
 * `[STDOUT | STDERR, bytes]`; the master sends `[signal, forceKillAfterDelay]`
 * on the same channel to kill the group. A command that cannot be started
 * resolves with `spawnError` rather than throwing, so the master can make
 * it a `CommandError` like any other failure.
 * @param input the streamed input, when `request.streamedInput`.
 */
export function exec(
  request: ExecRequest,
  channel: Channel<OutputChunk, Control>,
  input?: Channel<never, Uint8Array>,
): Promise<RemoteOutcome> {
  hookShutdown();
  if (running.size >= pruneAt) {
    prune();
    pruneAt = Math.max(64, 2 * running.size);
  }
  const started = Date.now();
  const piped = request.input !== undefined || request.streamedInput;
  const env = request.extendEnv ? Object.assign(environmentNow(), request.env) : (request.env ?? {});
  return new Promise<RemoteOutcome>((resolve) => {
    let child: ChildProcess | SpawnedCommand;
    let pid: number | undefined;
    let timedOut = false;
    let done = false;
    const timers: ReturnType<typeof setTimeout>[] = [];
    let chunks = 0;
    let takeTail = (): OutputChunk[] => [];
    const finish = (outcome: Omit<RemoteOutcome, 'durationMs' | 'timedOut' | 'pid' | 'chunks' | 'tail'>) => {
      if (done) return;
      done = true;
      for (const timer of timers) clearTimeout(timer);
      if (stopping) return;
      const tail = takeTail();
      resolve({ ...outcome, pid, timedOut, chunks, tail, durationMs: Date.now() - started });
    };
    // Commands without input go through the context's spawner once it is ready (see spawner.ts).
    const spawner = piped ? undefined : commandSpawner();
    const launched = spawner?.launch({
      file: request.file,
      args: request.args,
      cwd: request.cwd,
      env,
      shell: request.shell,
    });
    if (launched) child = launched;
    else {
      try {
        child = spawn(request.file, request.args, {
          cwd: request.cwd,
          env,
          shell: request.shell,
          // Its own process group (and session), so the whole group can be killed.
          detached: true,
          stdio: [piped ? 'pipe' : 'ignore', 'pipe', 'pipe'],
        });
      } catch (error) {
        const { code, message } = error as NodeJS.ErrnoException;
        finish({ exitCode: null, signal: null, spawnError: { code, message } });
        return;
      }
    }
    child.on('error', (error: NodeJS.ErrnoException) => {
      // Only a failed start ends the command here; a failed kill is not the command's end.
      if (child.pid === undefined)
        finish({ exitCode: null, signal: null, spawnError: { code: error.code, message: error.message } });
    });
    /** A kill asked for before the spawner reported the start. */
    let pendingKill: [string, number | null] | undefined;
    const begin = (leader: number) => {
      pid = leader;
      let closedResolve: () => void = () => {};
      const entry: Running = { pid, closed: false, whenClosed: new Promise<void>((r) => (closedResolve = r)) };
      running.add(entry);
      child.on('close', (code: number | null, signal: string | null) => {
        // Kept while processes it started stay in its group (`running`).
        entry.closed = true;
        closedResolve();
        finish({ exitCode: code, signal });
        // After the outcome has gone: asking after a group that is gone costs an exception, about 25 µs.
        setImmediate(() => {
          if (groupAlive(leader)) sweepLater();
          else running.delete(entry);
        });
      });
      if (pendingKill) kill(...pendingKill);
    };
    if (child.pid !== undefined) begin(child.pid);
    else if (launched) launched.once('spawn', () => begin(launched.pid as number));
    else return;

    function kill(signal: string, forceAfter: number | null): void {
      if (done || !isSignal(signal)) return;
      if (pid === undefined) {
        pendingKill = [signal, forceAfter];
        return;
      }
      const leader = pid;
      killGroup(leader, signal);
      if (forceAfter !== null && signal !== 'SIGKILL') {
        // Not cleared when the command ends: a member that ignores `signal`
        // outlives the leader, and the group is what it aims at (gone, the
        // kill fails harmlessly). Unref'd: it must not hold the context up.
        const force = setTimeout(() => killGroup(leader, 'SIGKILL'), forceAfter);
        force.unref();
      }
    }
    if (request.timeout !== undefined) {
      timers.push(
        setTimeout(() => {
          timedOut = true;
          kill(request.killSignal, request.forceKillAfterDelay ?? null);
        }, request.timeout),
      );
    }
    // Reading announces this end (a message), so the master's kill() reaches
    // it. Not at once: a command over in a few ms then answers in one message,
    // where a second small write would wait on Nagle's algorithm over ssh.
    let controlling = false;
    const control = () => {
      if (controlling || done) return;
      controlling = true;
      void (async () => {
        try {
          for await (const message of channel) {
            if (Array.isArray(message)) kill(message[0], typeof message[1] === 'number' ? message[1] : null);
          }
        } catch {
          // The channel closed with the call, or the master went away (the context's shutdown kills the group).
        }
      })();
    };
    timers.push(setTimeout(control, CONTROL_DELAY));

    // Output waits up to HOLD_MS (or FLUSH_BYTES) to go out in a batch, and
    // what is held when the command ends rides in the outcome.
    const streams = [child.stdout as OutputSource, child.stderr as OutputSource];
    let lost = false;
    let held: OutputChunk[] = [];
    let heldBytes = 0;
    let flushTimer: ReturnType<typeof setTimeout> | undefined;
    const flush = () => {
      if (flushTimer) clearTimeout(flushTimer);
      flushTimer = undefined;
      if (held.length === 0 || lost) return;
      control();
      const batch = held;
      held = [];
      heldBytes = 0;
      let last: Promise<void> = Promise.resolve();
      for (const chunk of batch) {
        chunks++;
        last = channel.send(chunk);
      }
      // Paused until the window takes the batch: a slow reader leaves the pipe full and the command waits.
      for (const stream of streams) stream.pause();
      last.then(
        () => {
          for (const stream of streams) stream.resume();
        },
        () => {
          // Nobody is left to read the output: end the command, and drain what it still writes.
          lost = true;
          kill('SIGKILL', null);
          for (const stream of streams) stream.resume();
        },
      );
    };
    streams.forEach((stream, i) => {
      const which = (i + 1) as OutputChunk[0];
      stream.on('data', (data: Buffer) => {
        if (lost) return;
        held.push([which, data]);
        heldBytes += data.length;
        if (heldBytes >= FLUSH_BYTES) flush();
        else flushTimer ??= setTimeout(flush, HOLD_MS);
      });
    });
    takeTail = () => {
      if (flushTimer) clearTimeout(flushTimer);
      const tail = lost ? [] : held;
      held = [];
      return tail;
    };

    const stdin = child.stdin;
    if (stdin) {
      // A command that exits without reading its input is not an error of ours.
      stdin.on('error', () => {});
      if (request.input !== undefined) stdin.end(request.input);
      else if (input) void pipeInput(input, stdin);
      else stdin.end();
    }
  });
}

/** Writes what arrives on `input` to `stdin`, reading the next chunk only once the pipe has taken the last. */
async function pipeInput(input: Channel<never, Uint8Array>, stdin: Writable): Promise<void> {
  try {
    for await (const chunk of input) {
      if (stdin.destroyed) break;
      if (!(chunk instanceof Uint8Array)) continue;
      if (!stdin.write(chunk)) {
        await new Promise<void>((resolve) => {
          const go = () => {
            stdin.off('drain', go);
            stdin.off('close', go);
            resolve();
          };
          stdin.on('drain', go);
          stdin.on('close', go);
        });
      }
    }
    stdin.end();
  } catch {
    stdin.destroy();
  }
}
