/**
 * One attempt to start a child: the method's transport, its prompts, the
 * first stage's hello, the core and BOOT, until the child reports ready;
 * or, on a failure, a timeout or a shutdown, its process killed and reaped
 * and the most precise error. Every connection method starts through here,
 * so these guarantees hold for all of them, and a method only says how
 * to spawn its target and what its prompts and failures look like.
 */
import { randomBytes } from 'node:crypto';
import { describeExit } from '../core/broker.js';
import { encode } from '../core/codec.js';
import { type HeartbeatOptions, heartbeatSettings } from '../core/heartbeat.js';
import type { ChildIds } from '../core/ids.js';
import { LineSplitter, logger } from '../core/log.js';
import { BOOT_SPEC } from '../core/protocol/boot.js';
import { openReply } from '../core/protocol/serve.js';
import type { BootConfig, ReadyInfo, Runtime } from '../core/runtime.js';
import { Stream } from '../core/stream.js';
import { Abort } from './abort.js';
import { converse, type EarlyOutput } from './conversation.js';
import { BootstrapError, ConnectTimeoutError, InterpreterError } from './errors.js';
import { bootstrapPayload, firstStage } from './first-stage.js';
import type { ConnectionMethod, Session, Transport } from './method.js';
import { uniqueName } from './naming.js';
import { type ShipNode, shipRuntime } from './runtime-shipping.js';
import { bootstrapArgv, describeCandidates } from './shell.js';

const debug = logger('bootstrap');

/** Default `connectTimeout`: 30 s. */
export const DEFAULT_CONNECT_TIMEOUT = 30_000;
/** Lines of a child's output kept to quote in a BootstrapError. */
const TAIL_LINES = 20;
/** After a child exits, how long to wait for the rest of its output before reporting, in ms. */
const OUTPUT_SETTLE = 100;
/** After the stream fails during bootstrap, how long to wait for the process to exit, in ms. */
const EXIT_SETTLE = 500;

/** Options every connection method accepts. */
export interface CommonOptions extends HeartbeatOptions {
  /** Name of the new context in logs and errors. Default: `<method>.<pid>` or `<method>:<host>`. */
  name?: string;
  /**
   * Milliseconds from the start of the connection until the child must be
   * ready, across every hop and prompt; past it the child is killed and
   * reaped and the connection fails with `ConnectTimeoutError`. Default 30000.
   */
  connectTimeout?: number;
  /**
   * The Node interpreter on the target: a path or command name, or an argv
   * prefix such as `['nice', '-n', '10', 'node']`. Default: for `local`, the
   * same binary as the starting context; for other methods, the first found
   * of `node` and `nodejs` on PATH, nvm, volta and fnm installs, and the
   * usual prefixes (see docs/connection-methods.md).
   */
  nodePath?: string | string[];
  /**
   * Load packages installed on the target (found from its working
   * directory) instead of shipping the master's copy; only what is missing
   * there is shipped. Default false: the master's copy wins, so code runs
   * against the versions it was written for.
   */
  preferTargetModules?: boolean;
  /**
   * Where to look for Node when `nodePath` is not given and the method
   * looks on the target: shell words, tried in order (globs and `"$HOME"`
   * allowed). Default: `NODE_CANDIDATES` (PATH's node and nodejs, nvm,
   * volta, fnm, /usr/local/bin, /opt/homebrew/bin, /usr/bin, /opt/node*,
   * /snap/bin).
   */
  nodeCandidates?: string[];
  /**
   * Whether to bring Node to a target that has none, when `nodePath` is
   * not given: `'auto'` ships an official Node build (the Router's
   * `nodeRuntime`) when no Node is found there or the one found is older
   * than 12; `'always'` uses a shipped one without looking; `'never'`
   * fails with `InterpreterError` instead. A shipped runtime is kept in the
   * target account's cache (`runtimeDirectory`), so it crosses the network
   * once per target and account. Default `'auto'`. See docs/runtime.md.
   */
  shipNode?: ShipNode;
  /**
   * Where a shipped runtime is kept on the target: a directory the
   * account owns and nobody else may write, on a mount that allows
   * running programs (made, mode 0700, if missing; `$HOME` and other
   * variables are expanded there). Default: the first usable of
   * `$XDG_CACHE_HOME/tendril/node`, `~/.cache/tendril/node`, then
   * `tendril-<uid>/node` in `$TMPDIR` (or /tmp), /var/tmp and /dev/shm.
   */
  runtimeDirectory?: string;
}

/**
 * Starts a child context with `method` from the context `runtime` belongs
 * to: spawns the target, answers its prompts, sends the core and the BOOT
 * configuration, and waits until the child reports ready. The child's
 * output becomes log records; its process is handed to the broker.
 *
 * Until then the start is registered with `runtime.broker`, whose
 * `shutdown()` aborts it: the process is killed and reaped, this rejects,
 * and the shutdown resolves only after that.
 *
 * @returns what the child reported about itself.
 * @throws BootstrapError (or a subclass: PasswordError, NotAllowedError,
 *   AuthenticationError, HostKeyError, ConnectionRefusedError,
 *   UnknownHostError, InterpreterError) when the child fails before it is
 *   ready, quoting its last output.
 * @throws BootstrapError when this context is shut down before the child
 *   is ready (or was shutting down already, in which case nothing starts).
 * @throws ConnectTimeoutError when it is not ready within `connectTimeout`.
 * @throws RangeError when `connectTimeout` is not a positive number.
 */
export async function bootstrap<O extends CommonOptions>(
  runtime: Runtime,
  method: ConnectionMethod<O>,
  options: O,
  start: StartRequest = {},
): Promise<ReadyInfo> {
  const taken = start.taken ?? NONE;
  const timeout = options.connectTimeout ?? DEFAULT_CONNECT_TIMEOUT;
  if (!(timeout > 0 && Number.isFinite(timeout))) {
    throw new RangeError(`connectTimeout must be a positive number of milliseconds, got ${timeout}`);
  }
  const session = newSession(options.name, method.name, Date.now() + timeout);
  const abort = new Abort();
  const leftBehind: Promise<unknown>[] = [];
  let settle = () => {};
  const settled = new Promise<void>((resolve) => (settle = resolve));
  // Registered before the first await: a shutdown either sees this start or comes before it (and aborts it here).
  const forget = runtime.broker.addStarting({
    get name() {
      return session.name;
    },
    abort: (reason) => abort.fire(reason),
    settled,
  });
  try {
    try {
      return await startChild(runtime, method, options, taken, {
        session,
        timeout,
        abort,
        leftBehind,
        leaf: start.leaf === true,
      });
    } catch (error) {
      // A Node older than the core supports was found: under 'auto', once more with a shipped one.
      if (!(options.nodePath === undefined && (options.shipNode ?? 'auto') === 'auto' && isTooOld(error))) throw error;
      debug('%s: %s has too old a Node; starting it again with a shipped one', runtime.router.name, session.name);
      return await startChild(runtime, method, { ...options, shipNode: 'always' }, taken, {
        session,
        timeout,
        abort,
        leftBehind,
        leaf: start.leaf === true,
      });
    }
  } finally {
    forget();
    void Promise.all(leftBehind).then(settle);
  }
}

/** What the phases of one attempt to start a child share. */
interface Attempt {
  readonly session: Session;
  /** `connectTimeout`, in ms. */
  readonly timeout: number;
  readonly abort: Abort;
  /** Exits of processes the attempt gave up on while they were starting; the broker waits for them. */
  readonly leftBehind: Promise<unknown>[];
  /** The child starts no contexts of its own: it gets no block of IDs. */
  readonly leaf: boolean;
}

/** How a start was asked for, besides the method's options. */
export interface StartRequest {
  /** Names in use elsewhere in the tree, that a default name must not take. */
  taken?: ReadonlySet<string>;
  /** The child starts no contexts of its own (see `ConnectRequest.leaf`). */
  leaf?: boolean;
}

async function startChild<O extends CommonOptions>(
  runtime: Runtime,
  method: ConnectionMethod<O>,
  options: O,
  taken: ReadonlySet<string>,
  attempt: Attempt,
): Promise<ReadyInfo> {
  const { router } = runtime;
  const { session, timeout, abort } = attempt;
  const started = Date.now();
  // Before anything starts: a timeout that does not fit the inherited interval is the caller's mistake.
  const heartbeat = heartbeatSettings(options, runtime.heartbeat, `router.${method.name}()`);
  // A method that may prompt gets the core only after the hello, so a prompt never reads it as a password.
  const eager = method.conversation === undefined;
  const { transport, ids, node, core, shipping } = await launch(runtime, method, options, attempt, eager);
  const name = options.name ?? uniqueName(router, session.name, ids.id, taken);
  debug('%s: starting %s (id %d) %s', router.name, name, ids.id, transport.where);
  session.step = `waiting for Node to start (${transport.where})`;

  const { tail, lines, done: outputDone } = childOutput(runtime, transport, ids.id, name);
  // Waited for by the start's races only: detached once it is over (see detachable).
  const exit = detachable(transport.process.exited);

  const sameBinary = method.sameMachine === true && node?.length === 1 && node[0] === process.execPath;
  // Whether the core went out for the interpreter that will read it (a shell that asks for a runtime drops the first).
  let coreSent = false;
  const sendCore = () => {
    if (coreSent) return;
    coreSent = true;
    // Made (once) while the new interpreter is still starting, so it costs the child no time.
    const cache = sameBinary ? runtime.codeCache() : undefined;
    for (const part of bootstrapPayload(core, cache)) transport.stdin.write(part);
  };
  const conversation = method.conversation?.(options, session);
  // Without prompts to answer the core goes at once, overlapping the interpreter's start.
  if (eager) sendCore();
  let shipped = false;
  const onShip = async (line: string) => {
    if (shipped) throw new BootstrapError(name, `the shell on ${transport.where} asked for a Node runtime twice`, '');
    shipped = true;
    await shipRuntime(runtime, transport, session, { name, contextId: ids.id, line });
    coreSent = false;
    sendCore();
  };

  const early: EarlyOutput = { bytes: Buffer.alloc(0) };
  // Why the child died, once its process has exited and its last output is in.
  const ended = async (): Promise<BootstrapError> => {
    const status = await exit.promise;
    await within(outputDone, OUTPUT_SETTLE, undefined);
    const before = early.bytes.toString('utf8').replace(/\r/g, '').trim();
    return explain(
      transport,
      name,
      node ? `nodePath ${node.join(' ')}` : `tried ${describeCandidates(options.nodeCandidates)}`,
      `${transport.where} process ended before it was ready (${describeExit(status)})`,
      before ? [...tail, ...before.split('\n')].slice(-TAIL_LINES) : tail,
    );
  };
  let timer: ReturnType<typeof setTimeout> | undefined;
  const timedOut = new Promise<never>((_, reject) => {
    timer = setTimeout(
      () => reject(new ConnectTimeoutError(name, timeout, '', session.step)),
      Math.max(0, session.deadline - Date.now()),
    );
  });
  timedOut.catch(() => {});
  let stream: Stream | undefined;
  try {
    // Aborted while the transport came up: straight to the clean-up below.
    abort.check();
    const leftover = await Promise.race([
      // A target that may not have a runtime shipped cannot ask for one by printing the request.
      converse(transport, conversation, sendCore, session, early, shipping ? onShip : undefined),
      ended().then((error) => Promise.reject(error)),
      timedOut,
      abort.rejected,
    ]);
    abort.check();
    // A prompt ends without a newline: its line ends here, not glued to the first line the child writes.
    lines.flush();
    session.step = `sending the core to Node on ${transport.where} and waiting for it to report ready`;
    stream = new Stream({
      name,
      input: transport.stdout,
      output: transport.stdin,
      maxMessageSize: router.maxMessageSize,
      ...(transport.socket && { socket: transport.socket }),
    });
    router.addChildStream(stream, ids.id, name, heartbeat);
    if (leftover.length > 0) stream.receive(leftover);
    const config: BootConfig = {
      id: ids.id,
      name,
      parentIds: [router.id, ...router.parentIds],
      parentNames: [router.id, ...router.parentIds].map((id) => router.nameOf(id)),
      maxMessageSize: router.maxMessageSize,
      maxHeldBytes: router.maxHeldBytes,
      idBlock: ids.block,
      debug: runtime.debugNamespaces,
      firstStage: runtime.firstStage,
      moduleBase: runtime.moduleBase,
      preferTargetModules: options.preferTargetModules === true,
      heartbeat: heartbeat && [heartbeat.interval, heartbeat.timeout],
    };
    const reply = await Promise.race([
      router.request(ids.id, BOOT_SPEC.handle, encode(config), { what: 'bootstrap' }),
      ended().then((error) => Promise.reject(error)),
      timedOut,
      abort.rejected,
    ]);
    // A reply and a shutdown in the same turn: the shutdown wins, so no child outlives it.
    abort.check();
    const info = openReply(router, ids.id, BOOT_SPEC, reply);
    // From now on the child only keeps the event loop alive while calls to it are pending.
    transport.process.unref();
    // Unreferencing an SSH "process" unreferences the stream's socket too: a call already in flight must keep it.
    router.followHolds(stream);
    runtime.broker.addChild(ids.id, name, transport.process, stream);
    debug(
      '%s: %s ready in %d ms (pid %d, node %s)',
      router.name,
      name,
      Date.now() - started,
      info.pid,
      info.nodeVersion,
    );
    return info;
  } catch (error) {
    let failure: BootstrapError;
    if (abort.reason !== undefined) {
      await abandon(transport, stream, abort.reason);
      failure = abort.error(name, 'stopped', tail.join('\n'));
    } else if (error instanceof ConnectTimeoutError) {
      await abandon(transport, stream, 'connect timeout');
      failure = new ConnectTimeoutError(name, timeout, tail.join('\n'), error.step);
    } else if (error instanceof BootstrapError) {
      await abandon(transport, stream, error.message);
      failure = error;
    } else {
      // The stream failed first (the child closed it, or wrote garbage); the
      // process is usually exiting too, and its status says more.
      const reason = await within(ended(), EXIT_SETTLE, undefined);
      await abandon(transport, stream, reason?.message ?? (error as Error).message);
      failure = reason ?? new BootstrapError(name, (error as Error).message, tail.join('\n'));
    }
    debug('%s: starting %s failed: %s', router.name, name, failure.message);
    throw failure;
  } finally {
    clearTimeout(timer);
    exit.detach();
  }
}

/**
 * The child's stderr, as log records and as the last lines an error
 * quotes, and its pipes' errors, for the child's whole life. Set up here
 * rather than in startChild: a closure keeps every variable of its
 * function that any closure there uses, so listeners made there would keep
 * all the start held (about 10 KB a context) for as long as the child runs.
 */
function childOutput(
  runtime: Runtime,
  transport: Transport,
  id: number,
  name: string,
): { tail: string[]; lines: LineSplitter; done: Promise<void> } {
  const tail: string[] = [];
  const lines = new LineSplitter((text) => {
    tail.push(text);
    if (tail.length > TAIL_LINES) tail.shift();
    runtime.onChildLog({ contextId: id, contextName: name, text });
  });
  const done = new Promise<void>((resolve) => {
    transport.stderr.on('data', (chunk: Buffer) => lines.push(chunk));
    transport.stderr.on('end', () => {
      lines.flush();
      resolve();
    });
    transport.stderr.on('error', () => resolve());
  });
  (transport.stderr as { unref?: () => void }).unref?.();
  // A target that dies early makes writes fail (EPIPE); its exit is what gets reported.
  transport.stdin.on('error', (error) =>
    debug('%s: writing to %s failed: %s', runtime.router.name, name, error.message),
  );
  transport.stdout.on('error', (error) =>
    debug('%s: reading from %s failed: %s', runtime.router.name, name, error.message),
  );
  return { tail, lines, done };
}

/**
 * `promise`'s outcome until `detach()`, then never. The start's races wait
 * for the child's exit; without this, what waits (and all it holds) would
 * stay reachable from the process's exit for the child's whole life.
 */
function detachable<T>(promise: Promise<T>): { promise: Promise<T>; detach(): void } {
  let settle: { resolve(value: T): void; reject(reason: unknown): void } | undefined;
  const watched = new Promise<T>((resolve, reject) => {
    settle = { resolve, reject };
  });
  promise.then(
    (value) => settle?.resolve(value),
    (reason) => settle?.reject(reason),
  );
  return {
    promise: watched,
    detach: () => {
      settle = undefined;
    },
  };
}

/**
 * The first phase of a start: IDs for the child, and its transport from
 * the method. Gives up at the deadline or when aborted; a transport that
 * comes up after that is killed, and its exit joins `attempt.leftBehind`.
 */
async function launch<O extends CommonOptions>(
  runtime: Runtime,
  method: ConnectionMethod<O>,
  options: O,
  attempt: Attempt,
  eager: boolean,
): Promise<{ transport: Transport; ids: ChildIds; node: string[] | undefined; core: Uint8Array; shipping: boolean }> {
  const { session, timeout, abort } = attempt;
  let begun = false;
  try {
    // Shutting down already: start nothing.
    abort.check();
    begun = true;
    const ids = await Promise.race([runtime.ids.allocateChild(attempt.leaf), abort.rejected]);
    abort.check();
    const node =
      options.nodePath === undefined ? method.defaultNode(options) : ([] as string[]).concat(options.nodePath);
    // Deflated unless the stream is known to stay on this machine (see ConnectionMethod.localStream).
    const local = method.localStream?.(options) === true;
    const core = local ? runtime.coreSource.source : runtime.coreSource.deflated;
    const stage = firstStage(runtime.firstStage, { size: core.length, deflated: !local });
    const shipNode = options.shipNode ?? 'auto';
    // A shell that finds no Node drops the core sent before it could say so (its 4-byte prefix and the core).
    const ship =
      node === undefined && shipNode !== 'never'
        ? { always: shipNode === 'always', discard: eager ? 4 + core.length : 0, directory: options.runtimeDirectory }
        : undefined;
    const starting = Promise.resolve().then(() =>
      method.start(bootstrapArgv(node, stage, options.nodeCandidates, ship, method.shell), options, session),
    );
    const transport = await claim(
      starting,
      session.deadline,
      abort,
      () => new ConnectTimeoutError(session.name, timeout, '', session.step),
      attempt.leftBehind,
    );
    return { transport, ids, node, core, shipping: ship !== undefined };
  } catch (error) {
    const failure =
      abort.reason !== undefined
        ? abort.error(session.name, begun ? 'starting' : 'not started')
        : error instanceof BootstrapError
          ? error
          : new BootstrapError(session.name, `${method.name} could not start: ${(error as Error).message}`, '');
    debug('%s: starting %s failed: %s', runtime.router.name, session.name, failure.message);
    throw failure;
  }
}

/**
 * The transport `starting` resolves with, unless the deadline passes
 * (rejects with `onTimeout()`) or the attempt is aborted first. Which of
 * these wins is decided in one place, so a transport is either returned
 * or killed (its exit pushed onto `leftBehind`), never neither.
 */
function claim(
  starting: Promise<Transport>,
  deadline: number,
  abort: Abort,
  onTimeout: () => Error,
  leftBehind: Promise<unknown>[],
): Promise<Transport> {
  return new Promise<Transport>((resolve, reject) => {
    let decided = false;
    const decide = () => {
      decided = true;
      clearTimeout(timer);
      stopWatching();
    };
    const giveUp = (error: unknown) => {
      if (decided) return;
      decide();
      reject(error);
    };
    const timer = setTimeout(() => giveUp(onTimeout()), Math.max(0, deadline - Date.now()));
    const stopWatching = abort.onFire(() => giveUp(new Error('aborted')));
    leftBehind.push(
      starting.then((transport) => {
        if (!decided) {
          decide();
          resolve(transport);
          return undefined;
        }
        transport.process.kill('SIGKILL');
        return transport.process.exited;
      }, giveUp),
    );
  });
}

/**
 * The first stage's complaint about an old Node (bootstrap/first-stage.js).
 * The path may not hold the complaint's start again, so the run is scanned
 * from one start at most (`.*` was quadratic on a line repeating it).
 */
const TOO_OLD = /tendril: Node \S+ at (?:(?!tendril: Node )[^\n])* is too old; Node 12 or newer is needed/;

function isTooOld(error: unknown): boolean {
  return error instanceof InterpreterError && TOO_OLD.test(error.lastOutput);
}

/** The most precise error for a child that died during bootstrap. */
function explain(transport: Transport, name: string, tried: string, what: string, tail: string[]): BootstrapError {
  const output = tail.join('\n');
  const specific = transport.explain?.(output, what);
  if (specific) return specific;
  // The shell's "sh: 1: node: not found": "node" is looked for once in the word (a lookahead does not
  // backtrack), not at each of its occurrences as `[^:\n]*node[^:\n]*` did (quadratic on a run of them).
  if (
    /tendril: no Node\.js interpreter found|is too old; Node 12|: (?:exec: )?(?=[^:\n]*node)[^:\n]*: not found/.test(
      output,
    )
  ) {
    return new InterpreterError(name, `no usable Node.js interpreter (${what})${remedy(output)}`, output);
  }
  // 127 is a shell's "command not found". Some tools (podman exec, kubectl exec) can drop what a
  // process printed when it ended at once with input pending, so the status is all there is.
  if (output.trim() === '' && what.endsWith('(exit code 127)')) {
    return new InterpreterError(
      name,
      `${what}, printing nothing (podman and kubectl exec can lose what it printed): a command was not found, most likely no Node.js interpreter found (or no sh); ${tried}; set nodePath, or install Node there`,
      output,
    );
  }
  return new BootstrapError(name, what, output);
}

/**
 * What to do about a target without Node, after what the shell found it
 * to be (`the target: Linux x86_64, Alpine Linux v3.20, musl`, see
 * shell.ts); empty when it did not say.
 */
function remedy(output: string): string {
  if (TOO_OLD.test(output)) {
    return "; install Node 12 or newer there, set nodePath to one, or let tendril bring one (shipNode 'auto', the default, unless nodePath is set)";
  }
  const target = /; the target: ([^\n]*)/.exec(output)?.[1];
  if (target === undefined) return '';
  if (/, musl$/.test(target)) {
    return `; the target is ${target}: no official Node.js build exists for musl, so install Node with its package manager (apk add nodejs on Alpine) or set nodePath to one`;
  }
  return `; the target is ${target}: install Node there (12 or newer), set nodePath to one, or let tendril bring one (shipNode 'auto', the default)`;
}

/** Kills and reaps a child that failed to start. */
async function abandon(transport: Transport, stream: Stream | undefined, reason: string): Promise<void> {
  stream?.close(`bootstrap failed: ${reason}`);
  if (!stream) {
    transport.stdin.destroy();
    transport.stdout.destroy();
  }
  transport.process.ref();
  transport.process.kill('SIGTERM');
  const killer = setTimeout(() => transport.process.kill('SIGKILL'), 1000);
  await transport.process.exited;
  clearTimeout(killer);
}

/** `promise`'s value if it settles within `ms`, else `fallback`; the timer never outlives the wait. */
function within<T, F>(promise: Promise<T>, ms: number, fallback: F): Promise<T | F> {
  let timer: ReturnType<typeof setTimeout> | undefined;
  return Promise.race([promise, new Promise<F>((resolve) => (timer = setTimeout(resolve, ms, fallback)))]).finally(() =>
    clearTimeout(timer),
  );
}

/** A session whose name is `name`, else what the method describes, else the method's name. */
function newSession(name: string | undefined, methodName: string, deadline: number): Session {
  let current = name ?? methodName;
  return {
    get name() {
      return current;
    },
    token: randomBytes(8).toString('hex'),
    deadline,
    step: `starting ${methodName}`,
    describe(target) {
      if (name === undefined) current = target;
    },
  };
}

const NONE: ReadonlySet<string> = new Set();
