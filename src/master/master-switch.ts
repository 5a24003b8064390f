import { realpathSync, statSync } from 'node:fs';
import { createRequire } from 'node:module';
import { bootstrap, type CommonOptions, DEFAULT_CONNECT_TIMEOUT } from '../connection/bootstrap.js';
import { ownMethod } from '../connection/connect.js';
import { ConnectTimeoutError } from '../connection/errors.js';
import type { ConnectionMethod } from '../connection/method.js';
import { checkMethodOptions } from '../connection/method-options.js';
import { admitRuntimeRequests, restrictRuntimeRequests, serveNodeRuntime } from '../connection/runtime-service.js';
import { type RuntimeStats, runtimeStats, type ShipProgress, setShipping } from '../connection/runtime-shipping.js';
import { Broker, DEFAULT_SHUTDOWN_GRACE } from '../core/broker.js';
import { setCallPreparation } from '../core/call-preparation.js';
import { codeCacheForChildren } from '../core/code-cache.js';
import { Context, type ContextFactory } from '../core/context.js';
import { ChannelError, describeError, InvalidOptionError, ProtocolError, TimeoutError } from '../core/errors.js';
import { DEFAULT_MAX_MESSAGE_SIZE } from '../core/framing.js';
import { heartbeatSettings } from '../core/heartbeat.js';
import { DEFAULT_MAX_HELD_BYTES } from '../core/holdings.js';
import { type Logger, type LogRecord, logger } from '../core/log.js';
import {
  boolean,
  integer,
  knownOptions,
  location,
  milliseconds,
  oneOf,
  optionsObject,
  STOP_GRACE,
  text,
} from '../core/options.js';
import type { ReadyInfo } from '../core/protocol/boot.js';
import { CONNECT_SPEC } from '../core/protocol/connect.js';
import { FORWARD_LOG_SPEC } from '../core/protocol/forward-log.js';
import { RouteRefusedError } from '../core/protocol/routes.js';
import { ask, serve } from '../core/protocol/serve.js';
import type { ConnectRequest, Runtime } from '../core/runtime.js';
import { lineageOf } from '../core/shares.js';
import type { Stream } from '../core/stream.js';
import { MessageSwitch } from '../core/switch.js';
import { bootstrapAssets } from './assets.js';
import { baseDirectory, baseFile, callerModule, mainModule } from './caller.js';
import { warmFunctionAnalysis } from './function-analysis.js';
import { definingModule, scriptOf } from './function-location.js';
import { IdAllocator } from './id-allocator.js';
import type { ModuleFilter } from './module-files.js';
import { ModuleResponder, type ResponderStats } from './module-responder.js';
import { callPreparer } from './prepare-call.js';
import { neutralise, printRemoteLine } from './remote-output.js';
import { checkNodeRuntime, type NodeRuntimeOptions, StoreRuntimes } from './runtime-provider.js';

/** Loggers kept for context names (`tendril:<name>` debug namespaces), least recently used dropped first. */
const MAX_LOGGERS = 256;

/** Options of the master's `Router`. */
export interface RouterOptions {
  /**
   * Largest message payload, in bytes, accepted or sent anywhere in the
   * tree; every descendant inherits it. Default 128 MiB.
   */
  maxMessageSize?: number;
  /**
   * Most bytes the contexts behind one child may make a context hold at
   * once: values they sent that nobody has read, command output kept for a
   * result, service calls waiting for their turn, the entries a transfer
   * remembers (docs/protocol.md lists them). Past it, what they send is
   * refused with `HeldBytesError`; everything else carries on. Every
   * descendant applies it to its own children, and to all the contexts
   * beyond its parent together (its siblings and the rest of the tree but
   * its ancestors, which reach it through its parent). Default 256 MiB.
   */
  maxHeldBytes?: number;
  /** Name of the master context in logs and errors. Default `'master'`. */
  name?: string;
  /**
   * Milliseconds a stopping child gets to exit after being asked, and again
   * after SIGTERM, before SIGKILL. Default 2000.
   */
  shutdownGrace?: number;
  /**
   * Run every call (`context.call()`, `callWith()`, calls through
   * `context.import()`) in a fresh interpreter, as `CallOptions.isolate`
   * does, unless the call says `isolate: false`. Default false.
   */
  isolate?: boolean;
  /**
   * Directories whose files children may be sent besides those served by
   * default: the package of every module that calls `context.call()` or
   * `context.import()`, of every call `base` and module passed to
   * `context.import()`, packages those require by name, and tendril itself.
   */
  moduleRoots?: string[];
  /**
   * Decides which files inside the module roots children may be sent,
   * where tendril's own rule is not what the program needs. By default
   * only what a module system loads is served: `.js .mjs .cjs .ts .mts
   * .cts .tsx .json` files, and files without an extension that Node would
   * run as a program (a `bin` of their package.json, or a first line that
   * is a `#!` line naming `node`, `nodejs`, `tsx`, `ts-node` or
   * `ts-node-esm`, directly or through `env`); never a dotfile or a file in
   * a dot-directory (`.env`, `.git/config`, `.ssh/`, `.aws/`) outside
   * `node_modules`, unless the program names a module there itself (then
   * that module's directory is a root: see docs/module-forwarding.md).
   *
   * Called, synchronously, for every file inside the roots that a child's
   * request reaches (each time it is resolved, so keep it cheap and free
   * of side effects), with the file's real path and tendril's `verdict`:
   * `{ served: true }`, or `{ served: false, reason }` naming the rule the
   * file breaks. Return true to serve the file, false to refuse it
   * (`verdict.served` keeps tendril's choice). Any other result, or a
   * throw, refuses the file; what was thrown is reported in the master's
   * `module-refused` warning, never to the child. A refused file is never
   * read; the child's `require()` throws `ERR_TENDRIL_MODULE_REFUSED`.
   *
   * It cannot widen the roots (a file outside them is refused before it is
   * asked; use `moduleRoots`), nor ship a native addon (`.node`). A file it
   * serves that is neither JSON nor TypeScript is shipped as JavaScript.
   * Default: tendril's verdict.
   */
  moduleFilter?: ModuleFilter;
  /**
   * Where shipped functions' `require()` and `import()` resolve from when
   * a call does not pass its own `base`: a module's path or file URL (such
   * as `import.meta.url`), or a directory. Default: the module that defines
   * the function (for `context.import()`, the module that calls it), else
   * the main module. Never the working directory, so a script behaves the
   * same wherever it is started.
   */
  base?: string | URL;
  /**
   * Let children keep a V8 code cache of tendril's core in the cache
   * directory of the account they run as on their target
   * (`$XDG_CACHE_HOME/tendril`, else `~/.cache/tendril`; mode 0700, at most
   * 8 files of about 250 KB, one per tendril version and Node binary), so
   * later contexts there start without compiling the core: about 5 ms less
   * on Debian's Node 18. It is written and read only where every directory
   * from the home (or XDG_CACHE_HOME) down is that account's and nobody
   * else may write it, and read only from a regular file of that account's
   * that nobody else may write. Code running as that account can change
   * what its later contexts run (as it can by changing its Node). Every
   * descendant follows it. Default false: tendril writes nothing on a
   * target to start a context.
   */
  targetCodeCache?: boolean;
  /**
   * Where the Node runtime shipped to targets without Node comes from
   * (see the connection option `shipNode` and docs/runtime.md): the
   * release (default `'24'`, the newest of that line), the master's store
   * of packages, and tarballs to add to it for use without registry access.
   */
  nodeRuntime?: NodeRuntimeOptions;
  /**
   * Where the output of remote code goes: what contexts write to their
   * stdout or stderr (`console.log` in a call, the output of processes a
   * call spawns with inherited stdio), one line at a time. Either way each
   * line is emitted as the Router's `log` event (a `LogRecord`, its text as
   * written).
   *
   * - `'stderr'` (default): also printed on the master's stderr as
   *   `[<context name>] <line>`, with every control character but tab
   *   written as an escape (`\x1b`, `\r`), so a remote program cannot drive
   *   the terminal or forge another context's line. stderr, not stdout: it
   *   is diagnostics, and a program whose stdout is data (`node app.js |
   *   jq`) keeps it clean. Not also written under the `debug` namespace,
   *   which would show each line twice.
   * - `'events'`: only the `log` event, and the `debug` namespace
   *   `tendril:<context name>` (`DEBUG=tendril:*`), escaped likewise; for a
   *   program that shows or stores the lines its own way.
   *
   * A context's stdout and stderr share one pipe, so which of the two a
   * line was written to is not known; lines longer than 64 KiB arrive in
   * pieces. What a context's start writes before the context is reachable
   * (a password prompt, ssh's warnings, a login profile's messages) is the
   * connection's, quoted by the start's error when it fails: it is a `log`
   * event and goes under the `debug` namespace, never printed. See
   * docs/calls.md, "Output of remote code".
   * @throws InvalidOptionError from `new Router()` for any other value.
   */
  output?: 'stderr' | 'events';
  /**
   * Shut the router down when the process receives a signal: `true` for
   * SIGINT (Ctrl-C) and SIGTERM, or a list of `'SIGINT'`, `'SIGTERM'` and
   * `'SIGHUP'`. On the first such signal `router.shutdown()` begins: calls
   * in flight reject with `ContextDisconnectedError`, so the program's
   * `await` throws and its `finally` runs, and `process.exitCode` becomes
   * 128 + the signal's number (130 for SIGINT, 143 for SIGTERM), so the
   * program reports it was interrupted when it ends (a rejection nobody
   * catches still ends it with status 1). A second signal ends the process
   * at once with that status (`process.exit()`). The handlers are removed
   * when the shutdown has finished, whoever began it, so the signal's
   * default action (or the program's own handler) applies again; all
   * routers share one process listener per signal.
   *
   * Default false: a library does not take over a program's signals unless
   * asked. Without it Ctrl-C ends the master at once, its `finally` blocks
   * do not run, and its contexts exit by themselves within a second
   * (docs/calls.md shows the same by hand with `process.once('SIGINT')`).
   * @throws InvalidOptionError from `new Router()` for any other value.
   */
  shutdownOnSignal?: boolean | readonly ('SIGINT' | 'SIGTERM' | 'SIGHUP')[];
  /**
   * Milliseconds of silence on a stream after which a ping is sent, on
   * every stream of the tree unless a context's own option says otherwise
   * (see `heartbeatTimeout`). At least 50. Default 10000 once the
   * heartbeat is on.
   * @throws InvalidOptionError from `new Router()` for any other value.
   */
  heartbeatInterval?: number;
  /**
   * Milliseconds with nothing received after which a stream is declared
   * dead, on every stream of the tree unless a context's own option says
   * otherwise: every operation on the contexts behind it rejects with
   * `ContextDisconnectedError` saying `no answer for <timeout> s` and
   * naming the hop, and the child side stops its subtree and exits. Any
   * frame counts as life; see docs/protocol.md, "Heartbeat". Greater than
   * `heartbeatInterval`. Default: off (`false`), as a context's main
   * thread still routes its streams, so a call computing for longer than
   * the timeout would be taken for a frozen context (docs/calls.md);
   * giving either option turns it on (10000 and 30000 for the other).
   * @throws InvalidOptionError from `new Router()` for any other value.
   */
  heartbeatTimeout?: number | false;
}

/** The options of the master's `Router` (`RouterOptions`). */
const ROUTER_OPTIONS = new Set([
  'maxMessageSize',
  'maxHeldBytes',
  'name',
  'shutdownGrace',
  'isolate',
  'moduleRoots',
  'moduleFilter',
  'base',
  'targetCodeCache',
  'nodeRuntime',
  'output',
  'shutdownOnSignal',
  'heartbeatInterval',
  'heartbeatTimeout',
]);

/** Where `output` may send remote output. */
const OUTPUTS = ['stderr', 'events'] as const;

/** The signals `shutdownOnSignal` may name: those that ask a program to end. */
const SHUTDOWN_SIGNALS: readonly NodeJS.Signals[] = ['SIGINT', 'SIGTERM', 'SIGHUP'];

/** Where a new context is started from. */
export interface ViaOption {
  /**
   * Start the new context from this one instead of from the master (it
   * becomes the new context's parent). The master still calls the new
   * context directly; messages are routed through `via`.
   */
  via?: Context;
}

/**
 * The master's message switch: the core router with what only the master
 * does (starting contexts, numbering them, serving modules, analysing
 * shipped functions, receiving log lines). Programs use it through the
 * `Router` facade, which shows only the public part.
 */
export class MasterSwitch<C extends Context = Context> extends MessageSwitch {
  /** Owner of the child processes this router started directly. */
  readonly broker: Broker;
  private readonly ids: IdAllocator;
  private readonly runtime: Runtime;
  private readonly logDebuggers = new Map<string, Logger>();
  private closing: Promise<void> | undefined;
  private readonly responder: ModuleResponder;
  /** Contexts started from here, by ID, until they leave the tree (for listener peers: `worker.contexts()`). */
  private readonly started = new Map<number, C>();
  /** Makes the handles `connect()` resolves with (the public `Context`, given by the `Router` facade). */
  private readonly makeContext: ContextFactory<C>;
  private readonly base: string | undefined;
  /** Output of remote code is printed on stderr (option `output`), else only emitted. */
  private readonly printOutput: boolean;
  /** The signals that shut this router down (option `shutdownOnSignal`); the `Router` facade handles them. */
  readonly shutdownSignals: readonly NodeJS.Signals[];

  /**
   * @throws InvalidOptionError when an option has the wrong type or is out of range.
   * @param makeContext makes the handle of each context started from here.
   * @throws Error when tendril's bootstrap files are missing (the package was not built).
   */
  constructor(options: RouterOptions = {}, makeContext: ContextFactory<C> = (...args) => new Context(...args) as C) {
    const where = 'new Router()';
    options = optionsObject(options, where);
    knownOptions(options, ROUTER_OPTIONS, where);
    const maxMessageSize = integer(
      options.maxMessageSize,
      'maxMessageSize',
      where,
      DEFAULT_MAX_MESSAGE_SIZE,
      1024,
      0xffffffff,
    );
    const maxHeldBytes = integer(
      options.maxHeldBytes,
      'maxHeldBytes',
      where,
      DEFAULT_MAX_HELD_BYTES,
      1024 * 1024,
      Number.MAX_SAFE_INTEGER,
    );
    const name = text(options.name, 'name', where, 'master');
    const grace = milliseconds(options.shutdownGrace, 'shutdownGrace', where, DEFAULT_SHUTDOWN_GRACE);
    const isolate = boolean(options.isolate, 'isolate', where, false);
    const roots = options.moduleRoots ?? [];
    if (!Array.isArray(roots) || !roots.every((root) => typeof root === 'string')) {
      throw new InvalidOptionError('moduleRoots', where, 'an array of directory paths', roots);
    }
    location(options.base, 'base', where);
    if (options.moduleFilter !== undefined && typeof options.moduleFilter !== 'function') {
      throw new InvalidOptionError(
        'moduleFilter',
        where,
        'a function (path, verdict) => boolean',
        options.moduleFilter,
      );
    }
    if (options.targetCodeCache !== undefined && typeof options.targetCodeCache !== 'boolean') {
      throw new InvalidOptionError('targetCodeCache', where, 'a boolean', options.targetCodeCache);
    }
    const nodeRuntime = checkNodeRuntime(options.nodeRuntime, where);
    const output = oneOf(options.output, 'output', where, OUTPUTS, 'stderr');
    const shutdownSignals = checkShutdownSignals(options.shutdownOnSignal, where);
    const heartbeat = heartbeatSettings(options, false, where);
    super({ id: 0, name, parentIds: [], maxMessageSize, maxHeldBytes });
    this.isolateCalls = isolate;
    this.makeContext = makeContext;
    this.printOutput = output === 'stderr';
    this.shutdownSignals = shutdownSignals;
    const assets = bootstrapAssets();
    this.broker = new Broker(this, grace);
    this.ids = new IdAllocator(this);
    this.responder = new ModuleResponder(this, (message) => this.warn('module-refused', message), options.moduleFilter);
    for (const root of roots) this.responder.addRoot(root);
    this.base = options.base === undefined ? undefined : baseFile(options.base);
    // Calls from the master: each distinct source analysed once (see `callPreparer`), modules served from their package.
    setCallPreparation(this, {
      prepare: callPreparer(),
      resolveBase: (location, fn) => this.resolveBase(location, fn),
      trustModuleOrigin: (location) => this.responder.trust(location),
    });
    this.runtime = {
      router: this,
      broker: this.broker,
      ids: this.ids,
      coreSource: assets.coreSource,
      codeCache: codeCacheForChildren(assets.coreSource, createRequire(import.meta.url)),
      // Children inherit the template (BOOT): the one that looks for a cache on the target only when asked.
      firstStage: options.targetCodeCache === true ? assets.firstStageCodeCache : assets.firstStage,
      debugNamespaces: process.env.DEBUG ?? '',
      moduleBase: baseDirectory(this.base),
      heartbeat,
      onChildLog: (record) => this.emitLog(record),
    };
    const runtimes = new StoreRuntimes(nodeRuntime);
    const onProgress = (progress: ShipProgress) => this.onShipProgress?.(progress);
    setShipping(this, { source: runtimes, onProgress });
    serveNodeRuntime(this, () => runtimes, onProgress);
    // Runtimes go only to the via starts this master makes that may ship one (see connect).
    restrictRuntimeRequests(this);
    this.on('disconnect', (contextId) => this.started.delete(contextId));
    this.on('route', (contextId) => this.ids.markRouted(contextId));
    serve(
      this,
      FORWARD_LOG_SPEC,
      ([contextId, , text], message, stream) => this.onForwardLog(contextId, text, message.src, stream),
      {
        // A refusal was reported as it was made (`refuseRoute`); any other failure is a handler's.
        onUnanswered: (error, message) => {
          if (error instanceof RouteRefusedError) return;
          this.warn('handler', `${this.name}: FORWARD_LOG from context ${message.src} failed: ${describeError(error)}`);
        },
      },
    );
  }

  /**
   * Starts a context with any connection method. With `via`, the method
   * runs in that context: one of tendril's own is named; a user's is
   * loaded there from the module that defines it (see `methodModule`),
   * which must export it.
   * @throws as `local`; Error when the router has been shut down; TypeError
   *   when a user's method cannot be loaded by the via context (see
   *   `methodModule`); with `via`, what the via context raised (a
   *   `CallError` naming the module when it could not load it or found no
   *   such export in it).
   * @param start `leaf`: the context starts no contexts of its own (an
   *   isolated call's interpreter): it gets no block of IDs, and ALLOCATE_ID
   *   is refused to it and whatever it might start.
   */
  async connect<O extends CommonOptions>(
    method: ConnectionMethod<O>,
    options: O & ViaOption,
    start: { leaf?: boolean } = {},
  ): Promise<C> {
    if (this.closing) throw new Error(`router '${this.name}' has been shut down; create a new Router`);
    checkConnectOptions(method, options);
    const { via, ...rest } = options;
    // The first call will need the function parser: load it while the child starts.
    setImmediate(warmFunctionAnalysis);
    if (via === undefined) {
      const info = await bootstrap(this.runtime, method, rest as unknown as O, { leaf: start.leaf === true });
      if (start.leaf) this.ids.markLeaf(info.id);
      await this.refuseIfClosing(info.id);
      return this.keep(this.makeContext(this, info.id, info.name, this.id, info));
    }
    // The names of the contexts this master started elsewhere that the default name could clash with, so that
    // the via context picks a unique one: not every name of the tree (a hostile subtree announcing thousands
    // made every via start carry megabytes). Names still clashing are made unique where recorded (routeName).
    const prefix = `${method.name}${method.name === 'local' ? '.' : ':'}`;
    const taken = this.startedContexts()
      .map((context) => context.name)
      .filter((name) => name.startsWith(prefix));
    const request: ConnectRequest = { method: method.name, options: rest as Record<string, unknown>, taken };
    if (start.leaf) request.leaf = true;
    // A method of the user's: the via context imports the module that defines it, as it would a call's.
    if ((await ownMethod(method.name)) !== method) request.module = this.methodModule(method, via);
    // The via context enforces connectTimeout itself and says so; one that never answers (hung, or hostile) is given up on STOP_GRACE later.
    const connectTimeout = (rest as CommonOptions).connectTimeout ?? DEFAULT_CONNECT_TIMEOUT;
    // While it is in progress, via and its ancestors (whose caches a runtime climbs through) may ask for the runtime it ships.
    const admitted = admitRuntimeRequests(this, lineageOf(this, via.id) ?? [via.id], rest as CommonOptions);
    let info: ReadyInfo;
    try {
      info = await ask(this, via.id, CONNECT_SPEC, request, {
        what: `starting a ${method.name} context`,
        timeout: connectTimeout + STOP_GRACE,
      });
    } catch (error) {
      admitted();
      if (!(error instanceof TimeoutError)) throw error;
      throw new ConnectTimeoutError(
        `${method.name} via ${via.name}`,
        connectTimeout,
        '',
        `waiting for context '${via.name}' to start it (it did not answer within connectTimeout and ${STOP_GRACE} ms more)`,
      );
    }
    admitted();
    if (start.leaf) this.ids.markLeaf(info.id);
    // The intermediate names the new context; it may only name one it started (and announced).
    if (this.parentOf(info.id) !== via.id || !this.hasRoute(info.id)) {
      throw new ProtocolError(
        'CONNECT',
        via.name,
        `it replied that the new context has ID ${info.id}, which is not a context started under it`,
      );
    }
    await this.refuseIfClosing(info.id);
    // Named as the master recorded the route (made unique there), which its log lines and errors use.
    const name = this.nameOf(info.id);
    return this.keep(this.makeContext(this, info.id, name, via.id, info));
  }

  /**
   * The module that defines `method` (where V8 compiled its `start`), for
   * the via context to import through module forwarding; its package is
   * served from now on, as a call's module's is. Only where V8 says: the
   * module is loaded and run in the via context, so a guess could run the
   * wrong code there.
   * @throws TypeError when that cannot be told (a method made by `eval`, in
   *   the REPL, or whose `start` is bound or native), when it is the main
   *   module (the via context would run the whole program to load it), or
   *   when the file is gone.
   */
  private methodModule(method: ConnectionMethod<never>, via: Context): string {
    const name = `connection method '${method.name}'`;
    const file = typeof method.start === 'function' ? scriptOf(method.start) : undefined;
    if (file === undefined) {
      throw new TypeError(
        `cannot tell which module defines ${name} (where its start function is written), so context '${via.name}' cannot load it: define the method in a module file of its own and export it (not with eval or new Function, in the REPL, or with a bound start)`,
      );
    }
    let real: string | undefined;
    try {
      real = statSync(file).isFile() ? realpathSync(file) : undefined;
    } catch {
      // Removed since it was loaded.
    }
    if (real === undefined) {
      throw new TypeError(
        `${name} is defined in ${file}, which is no longer a file, so context '${via.name}' cannot load it`,
      );
    }
    if (real === mainModule()) {
      throw new TypeError(
        `${name} is defined in the main module ${file}: context '${via.name}' would have to run the whole program to load it; move the method into a module of its own, export it from there, and import it`,
      );
    }
    this.responder.trust(file);
    return file;
  }

  /** Records a context this master started, until it leaves the tree. */
  private keep(context: C): C {
    if (this.hasRoute(context.id)) this.started.set(context.id, context);
    return context;
  }

  /** The contexts this master started (directly or via another) that are still in the tree. */
  startedContexts(): C[] {
    return [...this.started.values()];
  }

  /** The context this master started with ID `id`, while it is in the tree. */
  startedContext(id: number): C | undefined {
    return this.started.get(id);
  }

  /** A new context ID for a peer that joins over a listener (src/unix). */
  allocatePeerId(): number {
    return this.ids.allocatePeer();
  }

  /** True once `shutdown()` has been called. */
  get isShutDown(): boolean {
    return this.closing !== undefined;
  }

  /** A context that became ready after shutdown began is stopped, and its start fails. */
  private async refuseIfClosing(contextId: number): Promise<void> {
    if (!this.closing) return;
    await this.closing;
    throw new ChannelError(
      this.nameOf(contextId),
      contextId,
      `router '${this.name}' was shut down while it was starting`,
    );
  }

  /**
   * Shuts down every context: each is asked to exit (stopping its own
   * children first), then after `shutdownGrace` ms sent SIGTERM, then
   * SIGKILL, and reaped. Pending calls reject with `ContextDisconnectedError`.
   * Idempotent.
   */
  shutdown(): Promise<void> {
    if (!this.closing) {
      this.expectAllDepartures(`it was shut down with router '${this.name}' (router.shutdown())`);
      this.closing = this.broker.shutdown().then(async () => {
        this.closeHandlers(new ChannelError(this.name, this.id, 'the router was shut down'));
        await this.responder.close();
      });
    }
    return this.closing;
  }

  /** Counters of the Node runtimes the master sent (see `RuntimeStats`). */
  runtimeStats(): RuntimeStats {
    return runtimeStats(this);
  }

  /** Told of the progress of each runtime the master sends (the Router's `ship` event). */
  onShipProgress: ((progress: ShipProgress) => void) | undefined;

  /**
   * Module forwarding counters of the master: requests answered, files and
   * bytes sent, files read from disk, refusals; in total and per context
   * that asked. (Each context's own counters: `context.moduleStats()`.)
   */
  moduleStats(): ResponderStats {
    return this.responder.stats();
  }

  /**
   * The file a call resolves from: its `base`, else the Router's `base`,
   * else the module that defines the function, else the one that called
   * tendril, else the main module; its package becomes one the responder
   * serves.
   */
  private resolveBase(location: string | URL | undefined, fn?: object): string {
    let file: string;
    if (location !== undefined) file = baseFile(location);
    else if (this.base !== undefined) file = this.base;
    else {
      const caller = callerModule();
      file = (fn && definingModule(fn, caller)) ?? caller ?? mainModule() ?? baseFile(process.cwd());
    }
    this.responder.trust(file);
    this.responder.noteCallBase(file);
    return file;
  }

  /**
   * A name another reachable context has already is recorded as
   * `<name>#<id>`, as default names are made unique: lines printed as
   * `[name] text` then never pass for another context's (a grandchild
   * announcing a child named like its sibling, to forward lines for it).
   */
  protected override routeName(target: number, announced: string): string {
    if (this.nameOf(target) === announced) return announced;
    // `<name>#<id>` is the form of unique names: one with another context's ID could not stay unique.
    const suffix = /#(\d+)$/.exec(announced);
    if (!this.hasContextNamed(announced) && (suffix === null || Number(suffix[1]) === target)) return announced;
    return `${announced}#${target}`;
  }

  /** Only IDs the master handed to a stream's subtree may be announced through it. */
  protected override mayRoute(target: number, stream: Stream): boolean {
    if (!super.mayRoute(target, stream)) return false;
    // An ID that had a route and lost it never comes back: it would take the calls still meant for that context.
    if (this.routeOf(target) !== stream && this.ids.wasRouted(target)) return false;
    return this.inSubtreeOf(target, stream);
  }

  /**
   * True when `id` lies in a block the master gave to a context reached
   * through `stream`. (A direct child's own ID is in no block; its route is
   * added by the master itself, never announced.)
   */
  private inSubtreeOf(id: number, stream: Stream | undefined): boolean {
    const owner = this.ids.ownerOf(id);
    return owner !== undefined && owner !== id && this.routeOf(owner) === stream;
  }

  private onForwardLog(contextId: number, text: string, sender: number, stream: Stream | undefined): void {
    // Only the parent reads a context's output, so only the parent reports
    // it: not a grandchild in the name of its parent or a sibling, nor an
    // isolated call's interpreter in its context's. The parent is known
    // after the context has gone too, when its last lines arrive.
    if (this.parentOf(contextId) !== sender) {
      this.refuseRoute(
        'FORWARD_LOG',
        contextId,
        stream,
        `context ${sender} did not start that context; the line was dropped`,
      );
    }
    // Named as the master knows the context, never as the sender says.
    this.emitLog({ contextId, contextName: this.nameOf(contextId), text });
  }

  private emitLog(record: LogRecord): void {
    if (this.printOutput && this.wasReachable(record.contextId)) printRemoteLine(record.contextName, record.text);
    else {
      const log = this.debuggerOf(record.contextName);
      // Escaping costs a copy of the line: only when debug prints it.
      if (log.enabled) log('%s', neutralise(record.text));
    }
    this.emit('log', record);
  }

  /**
   * True once a context has had a route here, even if it has gone since
   * (its last lines, a crash's stack, arrive after its stream ended).
   * Before, what its start wrote is the connection's (a password prompt,
   * ssh's warnings, a login profile's messages), quoted by the start's
   * error when it fails: not printed as the context's output.
   */
  private wasReachable(contextId: number): boolean {
    return this.routeOf(contextId) !== undefined || this.departureOf(contextId) !== undefined;
  }

  /** The `debug` logger `tendril:<name>` of a context, kept for the most recently used names. */
  private debuggerOf(contextName: string): Logger {
    let log = this.logDebuggers.get(contextName);
    if (log) this.logDebuggers.delete(contextName);
    else {
      log = logger(neutralise(contextName));
      if (this.logDebuggers.size >= MAX_LOGGERS)
        this.logDebuggers.delete(this.logDebuggers.keys().next().value as string);
    }
    // Most recently used last, so the oldest is dropped first.
    this.logDebuggers.set(contextName, log);
    return log;
  }
}

/**
 * The signals of option `shutdownOnSignal`: none, SIGINT and SIGTERM for
 * `true`, or those listed.
 * @throws InvalidOptionError for anything else.
 */
function checkShutdownSignals(value: unknown, where: string): readonly NodeJS.Signals[] {
  if (value === undefined || value === false) return [];
  if (value === true) return ['SIGINT', 'SIGTERM'];
  if (Array.isArray(value) && value.every((signal) => SHUTDOWN_SIGNALS.includes(signal))) return [...new Set(value)];
  throw new InvalidOptionError(
    'shutdownOnSignal',
    where,
    `a boolean or a list of ${SHUTDOWN_SIGNALS.map((signal) => `'${signal}'`).join(', ')}`,
    value,
  );
}

/**
 * Checks the options of a connection method and `via`, before anything starts.
 * @throws InvalidOptionError naming the bad or unknown option.
 */
function checkConnectOptions<O extends CommonOptions>(method: ConnectionMethod<O>, options: O & ViaOption): void {
  const where = `router.${method.name}()`;
  checkMethodOptions(method, options, where, ['via']);
  if (options.via !== undefined && !(options.via instanceof Context)) {
    throw new InvalidOptionError('via', where, 'a Context (from a connection method of this Router)', options.via);
  }
}
