/**
 * A context's command spawner: a long-lived Perl process (spawner-script.ts)
 * that starts the context's commands instead of Node's `spawn`, when it can.
 *
 * Node forks its whole address space for each command (libuv's fork,
 * then exec): about 0.8 ms of the context's CPU per command on Linux, and
 * every page Node touches afterwards faults once more. Perl forks a few
 * MiB. The first `exec` in a context starts the spawner (and runs on
 * Node's spawn); once the spawner has said it is ready, commands without
 * input go through it. Where Perl is missing or fails, or
 * `TENDRIL_EXEC_SPAWNER=node` is in the context's environment when it
 * first runs a command, every command runs on Node's spawn, as before.
 *
 * What a command sees is the same either way: its argv, environment
 * (exactly the one given), cwd, umask, a session and process group of its
 * own, /dev/null on stdin, socket pairs on stdout and stderr, default
 * signal dispositions and mask. A command is left to Node's spawn when the
 * spawner could not start it the same way: it takes input, a string holds
 * a NUL (Node refuses those its own way), or the context's process has
 * changed its user, group or priority since the spawner started.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { EventEmitter } from 'node:events';
import { constants, getPriority } from 'node:os';
import { getSystemErrorName } from 'node:util';
import { currentUmask } from '../../core/process-state.js';
import { contextRuntime } from '../../core/runtime.js';
import { killGroup } from '../process-groups.js';
import { SPAWNER_SCRIPT } from './spawner-script.js';

/** Output a command may have in flight to the context, unread, before the spawner stops reading it. */
const SPAWNER_WINDOW = 64 * 1024;
/** How long the spawner may take to say it is ready before the context gives up on it, in ms. */
const READY_TIMEOUT = 10_000;
/** The environment variable that, set to `node`, keeps a context on Node's own spawn. */
export const SPAWNER_VARIABLE = 'TENDRIL_EXEC_SPAWNER';

/** What a command is started with, as Node's `spawn` takes it. */
export interface Launch {
  /** The program: a path, or a name looked up on the `PATH` of `env`. */
  file: string;
  /** Its arguments, after argv[0]. */
  args: readonly string[];
  /** Its working directory; undefined for the context's own. */
  cwd: string | undefined;
  /** Its whole environment; an undefined value leaves the variable out. */
  env: Record<string, string | undefined>;
  /** As Node's `shell`: true for /bin/sh, or the shell's path; the line is file and args joined by spaces. */
  shell: boolean | string;
}

/**
 * One output stream of a spawned command: `'data'` events, `pause()` and
 * `resume()`, what remote.ts uses of a Readable. Each chunk is acked to
 * the spawner as it is handed on, so a paused stream soon stops the
 * spawner reading the command's output.
 */
export class SpawnedOutput {
  private listener: ((chunk: Buffer) => void) | undefined;
  private paused = false;
  private readonly queue: Buffer[] = [];

  /**
   * @param ack tells the spawner that `bytes` of output were handed on.
   * @param drained called each time what it holds has all been handed on.
   */
  constructor(
    private readonly ack: (bytes: number) => void,
    /** Called each time what it holds has all been handed on. */
    private readonly drained: () => void,
  ) {}

  /** Nothing held back. */
  get empty(): boolean {
    return this.queue.length === 0;
  }

  /** Adds the one listener of its output. */
  on(_event: 'data', listener: (chunk: Buffer) => void): this {
    this.listener = listener;
    this.drain();
    return this;
  }

  /** Holds output back until `resume()`. */
  pause(): this {
    this.paused = true;
    return this;
  }

  /** Hands on the output held back, and what comes next. */
  resume(): this {
    this.paused = false;
    this.drain();
    return this;
  }

  /** Output from the spawner. */
  push(chunk: Buffer): void {
    this.queue.push(chunk);
    this.drain();
  }

  private drain(): void {
    // A listener may pause the stream while it takes a chunk: the rest waits.
    while (!this.paused && this.listener && this.queue.length > 0) {
      const chunk = this.queue.shift() as Buffer;
      this.ack(chunk.length);
      this.listener(chunk);
    }
    if (this.queue.length === 0) this.drained();
  }
}

/**
 * A command started by the spawner, with the events and fields remote.ts
 * uses of a ChildProcess: `'spawn'` once started (`pid` set), `'error'`
 * when it could not be (an Error with `code`, as Node's), and `'close'`
 * with its exit code and signal name once it has exited, its output has
 * closed and all of it has been handed on (as Node's, whose 'close' waits
 * for paused stdio to be read to its end).
 */
export class SpawnedCommand extends EventEmitter {
  /** Its process ID, once started. */
  pid: number | undefined;
  /** Its standard output. */
  readonly stdout: SpawnedOutput;
  /** Its standard error. */
  readonly stderr: SpawnedOutput;
  /** Commands with input are left to Node's spawn. */
  readonly stdin = null;

  /**
   * @param ack tells the spawner that `bytes` of its output were handed on.
   * @param spawnfile the file Node's error messages name (the shell under `shell`).
   */
  constructor(
    ack: (bytes: number) => void,
    /** The file Node's error messages name (the shell under `shell`). */
    readonly spawnfile: string,
  ) {
    super();
    const drained = () => this.closeIfDone();
    this.stdout = new SpawnedOutput(ack, drained);
    this.stderr = new SpawnedOutput(ack, drained);
  }

  private ended: [code: number | null, signal: string | null] | undefined;
  private closed = false;

  /** The spawner reported the end: 'close' follows once the output held back has been read. */
  end(code: number | null, signal: string | null): void {
    this.ended ??= [code, signal];
    this.closeIfDone();
  }

  /** Closes now, whatever output is held back (the spawner is gone). */
  abandon(code: number | null, signal: string | null): void {
    this.ended = [code, signal];
    this.closed = true;
    this.emit('close', code, signal);
  }

  private closeIfDone(): void {
    if (this.closed || this.ended === undefined || !this.stdout.empty || !this.stderr.empty) return;
    this.closed = true;
    this.emit('close', ...this.ended);
  }
}

/** Signal names by number, the first one Node's constants list for each (SIGABRT before SIGIOT, as Node names them). */
let signalNames: Map<number, string> | undefined;

function nameOf(names: Record<string, number>): Map<number, string> {
  const map = new Map<number, string>();
  for (const name of Object.keys(names)) {
    const value = names[name] as number;
    if (!map.has(value)) map.set(value, name);
  }
  return map;
}

/**
 * The `'close'` arguments Node gives for a wait status: the exit code, or
 * the signal's name; a signal Node has no name for (a real-time one) ends
 * as exit code 0, as it does with Node.
 */
export function exitOf(status: number): [code: number | null, signal: string | null] {
  const signal = status & 0x7f;
  if (signal === 0) return [(status >> 8) & 0xff, null];
  signalNames ??= nameOf(constants.signals as unknown as Record<string, number>);
  const name = signalNames.get(signal);
  return name === undefined ? [0, null] : [null, name];
}

/** Errors Node's spawn reports as an 'error' event naming the file; it throws the others as `spawn CODE`. */
const NAMED_ERRORS = new Set(['EACCES', 'EAGAIN', 'EMFILE', 'ENFILE', 'ENOENT']);

/** The error Node's spawn would give for `errno`. */
function spawnError(errno: number, spawnfile: string): NodeJS.ErrnoException {
  // As Node names it: libuv's name, or 'Unknown system error -N' for the errnos libuv does not know.
  let code: string;
  try {
    code = getSystemErrorName(-errno);
  } catch {
    code = `Unknown system error -${errno}`;
  }
  const error: NodeJS.ErrnoException = new Error(
    NAMED_ERRORS.has(code) ? `spawn ${spawnfile} ${code}` : `spawn ${code}`,
  );
  error.code = code;
  error.errno = -errno;
  return error;
}

/** Who the context's process is: the spawner's children would not follow a change. */
function identity(): string {
  return `${process.getuid?.()}:${process.geteuid?.()}:${process.getgid?.()}:${process.getegid?.()}:${process.getgroups?.()}:${getPriority()}`;
}

/**
 * The context's umask, for its commands: read without setting it where it
 * can be (see core's `currentUmask`), else by setting it and putting it
 * straight back, the only other way.
 */
function commandUmask(): number {
  const known = currentUmask();
  if (known !== undefined) return known;
  const mask = process.umask(0);
  process.umask(mask);
  return mask;
}

/** True when a string holds a NUL, which Node's spawn refuses with an error of its own. */
const hasNul = (text: string) => text.indexOf('\0') !== -1;

/** The long-lived spawner process and the commands it runs for this context. */
class Spawner {
  /** Set once it has said it is ready, until it fails. */
  ready = false;
  /** Set when it failed: this context's commands stay on Node's spawn. */
  broken = false;
  private readonly child: ChildProcess;
  private readonly commands = new Map<number, SpawnedCommand>();
  private nextId = 1;
  private input: Buffer | undefined;
  private readonly identity = identity();
  private readyTimer: ReturnType<typeof setTimeout> | undefined;
  /** Resolves when its process has exited. */
  private readonly exited: Promise<void>;
  /** Called when the last command it runs has ended. */
  private onIdle: (() => void) | undefined;

  constructor() {
    const path = process.env.PATH;
    // Nothing of the context's environment reaches Perl (PERL5OPT, PERL5LIB) but where to find it.
    this.child = spawn('perl', ['-e', SPAWNER_SCRIPT, String(SPAWNER_WINDOW)], {
      stdio: ['pipe', 'pipe', 'ignore'],
      detached: true,
      env: path === undefined ? {} : { PATH: path },
    });
    this.child.on('error', () => this.fail());
    this.exited = new Promise((resolve) => {
      this.child.on('exit', () => resolve());
      // Never started (no perl): no 'exit' follows.
      this.child.on('error', () => {
        if (this.child.pid === undefined) resolve();
      });
    });
    // On 'close', once what it wrote before it went has been read (its starts and ends).
    this.child.on('close', () => this.fail());
    this.child.stdin?.on('error', () => this.fail());
    this.child.stdout?.on('data', (data: Buffer) => this.receive(data));
    // The spawner never keeps the context alive: its commands' calls do while they run.
    this.child.unref();
    (this.child.stdin as unknown as { unref?: () => void } | null)?.unref?.();
    (this.child.stdout as unknown as { unref?: () => void } | null)?.unref?.();
    this.readyTimer = setTimeout(() => {
      if (!this.ready) this.fail();
    }, READY_TIMEOUT);
    this.readyTimer.unref();
    contextRuntime().broker.addCleanup((grace) => this.stop(grace));
  }

  /**
   * At the context's shutdown: lets the commands it runs end (the shutdown
   * signals their groups, and gives them `grace` ms), then closes its
   * input, on which it kills what is left and exits, and waits for that.
   * So a context's shutdown leaves no spawner behind.
   */
  private async stop(grace: number): Promise<void> {
    let timer: ReturnType<typeof setTimeout> | undefined;
    const late = new Promise<void>((resolve) => {
      timer = setTimeout(resolve, grace);
    });
    if (this.commands.size > 0 && !this.broken)
      await Promise.race([new Promise<void>((resolve) => (this.onIdle = resolve)), late]);
    this.child.stdin?.end();
    const exited = await Promise.race([this.exited.then(() => true), late.then(() => false)]);
    clearTimeout(timer);
    if (!exited) {
      this.fail();
      await this.exited;
    }
  }

  /**
   * Starts a command through the spawner, or returns undefined when Node's
   * spawn must start it (see the file's comment).
   */
  launch(launch: Launch): SpawnedCommand | undefined {
    if (!this.ready) return undefined;
    let file = launch.file;
    let argv: string[];
    if (launch.shell) {
      // As Node does under `shell`: the line joined by spaces, run by /bin/sh (or the shell given) with -c.
      const line = [launch.file, ...launch.args].join(' ');
      file = typeof launch.shell === 'string' ? launch.shell : '/bin/sh';
      argv = [file, '-c', line];
    } else argv = [file, ...launch.args];
    const fields: string[] = [];
    try {
      if (identity() !== this.identity) return undefined;
      // The context's directory through /proc first: Node caches cwd(), which
      // still names a directory that was removed or renamed since.
      fields.push(
        String(commandUmask()),
        `/proc/${process.pid}/cwd`,
        process.cwd(),
        launch.cwd ?? '',
        file,
        String(argv.length),
      );
    } catch {
      // No cwd (its directory is gone): Node's spawn says what that means.
      return undefined;
    }
    for (const arg of argv) fields.push(arg);
    const { env } = launch;
    // Node's spawn passes this on to every child, whatever env it is given.
    const coverage = process.env.NODE_V8_COVERAGE;
    if (coverage !== undefined && env.NODE_V8_COVERAGE === undefined) fields.push(`NODE_V8_COVERAGE=${coverage}`);
    for (const name of Object.keys(env)) {
      const value = env[name];
      if (value === undefined) continue;
      if (name === '') return undefined;
      fields.push(`${name}=${value}`);
    }
    for (const field of fields) if (hasNul(field)) return undefined;
    const id = this.nextId++;
    const command = new SpawnedCommand((bytes) => this.ack(id, bytes), file);
    this.commands.set(id, command);
    this.send('S', id, fields.join('\0'));
    return command;
  }

  private ack(id: number, bytes: number): void {
    if (!this.broken) this.send('A', id, undefined, bytes);
  }

  private send(type: 'S' | 'A', id: number, text: string | undefined, value = 0): void {
    const length = text === undefined ? 4 : Buffer.byteLength(text);
    const frame = Buffer.allocUnsafe(9 + length);
    frame.writeUInt32BE(5 + length, 0);
    frame[4] = type.charCodeAt(0);
    frame.writeUInt32BE(id, 5);
    if (text === undefined) frame.writeUInt32BE(value, 9);
    else frame.write(text, 9, 'utf8');
    this.child.stdin?.write(frame);
  }

  private receive(data: Buffer): void {
    let buffer = this.input ? Buffer.concat([this.input, data]) : data;
    while (buffer.length >= 9) {
      const length = buffer.readUInt32BE(0);
      if (buffer.length < 4 + length) break;
      const type = buffer[4];
      const id = buffer.readUInt32BE(5);
      const body = buffer.subarray(9, 4 + length);
      buffer = buffer.subarray(4 + length);
      this.take(type as number, id, body);
    }
    this.input = buffer.length > 0 ? buffer : undefined;
  }

  private take(type: number, id: number, body: Buffer): void {
    if (type === 0x52 /* R */) {
      this.ready = !this.broken;
      clearTimeout(this.readyTimer);
      return;
    }
    const command = this.commands.get(id);
    if (!command) return;
    switch (type) {
      case 0x4f /* O */:
        (body[0] === 2 ? command.stderr : command.stdout).push(body.subarray(1));
        return;
      case 0x50 /* P */:
        command.pid = body.readUInt32BE(0);
        command.emit('spawn');
        return;
      case 0x45 /* E */:
        this.forget(id);
        command.emit('error', spawnError(body.readUInt32BE(0), command.spawnfile));
        return;
      case 0x58 /* X */:
        {
          this.forget(id);
          const [code, signal] = exitOf(body.readUInt32BE(0));
          command.end(code, signal);
          return;
        }
    }
  }

  private forget(id: number): void {
    this.commands.delete(id);
    if (this.commands.size === 0) this.onIdle?.();
  }

  /**
   * The spawner is gone or unusable: later commands go to Node's spawn.
   * Commands it started lose their output and exit status: their groups
   * are SIGKILLed and they end as killed by it; one it had not reported
   * started fails to start.
   */
  private fail(): void {
    if (this.broken) return;
    this.broken = true;
    this.ready = false;
    clearTimeout(this.readyTimer);
    try {
      this.child.kill('SIGKILL');
    } catch {
      // Already gone.
    }
    const commands = [...this.commands.values()];
    this.commands.clear();
    this.onIdle?.();
    for (const command of commands) {
      if (command.pid === undefined) {
        const error: NodeJS.ErrnoException = new Error('the command spawner ended before it reported the start');
        error.code = 'ESPAWNER';
        command.emit('error', error);
      } else {
        killGroup(command.pid, 'SIGKILL');
        command.abandon(null, 'SIGKILL');
      }
    }
  }
}

let spawner: Spawner | undefined;
let disabled = false;

/**
 * This context's spawner when it is ready, else undefined (Node's spawn
 * then). The first call starts it, unless `TENDRIL_EXEC_SPAWNER=node`.
 */
export function commandSpawner(): { launch(launch: Launch): SpawnedCommand | undefined } | undefined {
  if (disabled) return undefined;
  if (spawner === undefined) {
    if (process.env[SPAWNER_VARIABLE] === 'node') {
      disabled = true;
      return undefined;
    }
    try {
      spawner = new Spawner();
    } catch {
      // spawn() throws for some errors (ENOMEM from the fork): Node's spawn then, as without perl.
      disabled = true;
    }
    return undefined;
  }
  if (spawner.broken) {
    disabled = true;
    return undefined;
  }
  return spawner.ready ? spawner : undefined;
}
