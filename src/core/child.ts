import * as fs from 'node:fs';
import type * as net from 'node:net';
import * as os from 'node:os';
import type * as vm from 'node:vm';
import createDebug from 'debug';
import { Broker } from './broker.js';
import { callOrigin } from './call-base.js';
import { codeCacheForChildren } from './code-cache.js';
import type { CoreSource } from './core-source.js';
import { Dispatcher } from './dispatcher.js';
import { toRemoteErrorInfo, withoutOwnFrames } from './errors.js';
import { GrantWatch } from './grant-watch.js';
import { type HeartbeatSettings, MIN_HEARTBEAT_INTERVAL } from './heartbeat.js';
import { IdPool } from './ids.js';
import { CONNECTION_MODULE_ID, Importer, SYNC_FETCH_TIMEOUT, TOOLKIT_MODULE_ID } from './importer.js';
import { distrustInheritedPlaces, leaveUntrustedDirectory } from './inherited-environment.js';
import { logger } from './log.js';
import { LogForwarder } from './log-forwarding.js';
import type { Message } from './message.js';
import { MAX_TIMER } from './options.js';
import { markOwn, ProcessState } from './process-state.js';
import { CONNECT_SPEC } from './protocol/connect.js';
import { BOOT } from './protocol/handles.js';
import { MODULE_STATS_SPEC } from './protocol/module-stats.js';
import { serve } from './protocol/serve.js';
import { SHUTDOWN_SPEC } from './protocol/shutdown.js';
import { ResolverWatch } from './resolver-watch.js';
import { type BootConfig, type ConnectionModule, type ReadyInfo, type Runtime, setContextRuntime } from './runtime.js';
import { type ServicesModule, setServicesLoader } from './services.js';
import { type BlockingIo, Stream } from './stream.js';
import { MessageSwitch } from './switch.js';
import { writeTargetCodeCache } from './target-code-cache.js';

const debug = logger('child');

/** File descriptor the first stage reads the stream from. */
export const STREAM_IN_FD = 3;
/** File descriptor the stream is written to. */
export const STREAM_OUT_FD = 4;
/** How long a child whose parent vanished spends stopping its own children, in ms. */
const ORPHAN_GRACE = 300;
/** Upper bound on an orphaned child's remaining life, in ms. */
const ORPHAN_DEADLINE = 900;

/** The core's script and where its code cache on the target goes, when it is to be written. */
export interface TargetCodeCache {
  /** The core, as the first stage compiled it. */
  readonly script: vm.Script;
  /** The cache file the first stage looked for. */
  readonly path: string;
}

/**
 * Entry point of the core in a child, called by the first stage (through
 * bundle.ts) once it has read the core. `input` is the stream from the
 * parent (fd 3), positioned just after the core's bytes; `output` the
 * stream to it (fd 4), on which the first stage has written its hello;
 * `coreSource` is the core, kept to start children of this context without
 * asking the parent for it. `core` is the core's namespace, for tendril
 * modules loaded later (`tendril:core`); `codeCache`, what to write the
 * core's code cache on the target from, when there was none or a stale one.
 */
export function boot(
  input: net.Socket,
  output: net.Socket,
  coreSource: CoreSource,
  requireFn: (id: string) => unknown,
  core: object,
  codeCache?: TargetCodeCache,
): void {
  const stream = new Stream({ name: 'parent', input, output, maxMessageSize: 1024 * 1024 });
  stream.on('close', (reason) => {
    // Before BOOT there is no router to notice.
    if (!started) exitNow(`stream to parent closed before BOOT: ${reason}`);
  });
  let started = false;
  stream.onMessage = (message) => {
    if (started) return;
    if (message.handle !== BOOT) {
      exitNow(`expected BOOT as the first message, got ${message}`);
      return;
    }
    started = true;
    start(stream, message, coreSource, requireFn, core, codeCache);
  };
}

/**
 * Takes out of this process's environment the places another account
 * could change, and leaves a working directory such an account controls
 * (inherited-environment.ts): before anything runs here, and before the
 * state calls are restored to is taken. What was done is said on stderr.
 */
function distrustEnvironment(name: string, requireFn: (id: string) => unknown): void {
  const dropped = distrustInheritedPlaces();
  const moved = leaveUntrustedDirectory();
  if (dropped.some(({ variable }) => variable === 'HOME' || variable === 'NODE_PATH')) {
    // Node took its global module directories ($HOME/.node_modules, NODE_PATH) as it started: anew without them.
    (requireFn('module') as { _initPaths?: () => void })._initPaths?.();
  }
  const said = [...dropped.map(({ text }) => text).filter((text) => text !== ''), ...(moved ? [moved] : [])];
  if (said.length > 0) {
    process.stderr.write(
      `tendril: ${name}: not trusted, as another account could change what they name: ${said.join('; ')}\n`,
    );
  }
}

/** The heartbeat BOOT gives (the parent's choice for this stream, and this context's default), within sane bounds. */
function bootHeartbeat(value: BootConfig['heartbeat']): HeartbeatSettings | false {
  if (!Array.isArray(value)) return false;
  const [interval, timeout] = value;
  if (!(typeof interval === 'number' && typeof timeout === 'number')) return false;
  if (!(interval >= MIN_HEARTBEAT_INTERVAL && timeout > interval && timeout <= MAX_TIMER)) return false;
  return { interval, timeout };
}

function exitNow(why: string): void {
  process.stderr.write(`tendril: ${why}\n`);
  process.exit(1);
}

function start(
  stream: Stream,
  bootMessage: Message,
  coreSource: CoreSource,
  requireFn: (id: string) => unknown,
  core: object,
  codeCache: TargetCodeCache | undefined,
): void {
  const config = bootMessage.unpack() as BootConfig;
  if (config.debug) createDebug.enable(config.debug);
  distrustEnvironment(config.name, requireFn);
  try {
    process.title = `tendril:${config.name}`;
  } catch {
    // Not permitted everywhere; purely cosmetic.
  }
  stream.setMaxMessageSize(config.maxMessageSize);
  const router = new MessageSwitch({
    id: config.id,
    name: config.name,
    parentIds: config.parentIds,
    maxMessageSize: config.maxMessageSize,
    ...(typeof config.maxHeldBytes === 'number' && config.maxHeldBytes > 0 && { maxHeldBytes: config.maxHeldBytes }),
  });
  const heartbeat = bootHeartbeat(config.heartbeat);
  router.setParentStream(stream, heartbeat);
  config.parentIds.forEach((id, i) => {
    const name = config.parentNames?.[i];
    if (typeof name === 'string') router.setName(id, name);
  });
  // Refusals in a child are reported on its stderr, which reaches the master as log records.
  router.on('warning', (warning) => process.stderr.write(`tendril warning: ${warning.message}\n`));
  const broker = new Broker(router);
  const resolver = new ResolverWatch(requireFn);
  const importer = new Importer(router, core, requireFn as NodeJS.Require, {
    preferTargetModules: config.preferTargetModules === true,
    requestSync: (message) => requestSync(router, stream, message),
    onBuiltin: (name) => resolver.loaded(name),
  });
  serve(router, MODULE_STATS_SPEC, () => importer.stats);
  const logs = new LogForwarder(router);
  const ids = new IdPool(router, config.idBlock);
  // A child announces only IDs of its own subtree: not those this context numbers its next children with.
  router.idClaims = (target, childId) => ids.mayClaim(target, childId);
  router.grants = new GrantWatch((start, end, childId) => ids.granted(start, end, childId));
  router.on('disconnect', (contextId) => ids.forget(contextId));
  const runtime: Runtime = {
    router,
    broker,
    ids,
    coreSource,
    codeCache: codeCacheForChildren(coreSource, requireFn),
    firstStage: config.firstStage,
    heartbeat,
    debugNamespaces: config.debug,
    moduleBase: config.moduleBase,
    importer,
    onChildLog: (record) => logs.forward(record),
  };
  setContextRuntime(runtime);
  // Resolved as the services' own calls resolve it (see Dispatcher.callExport), so both share one copy.
  setServicesLoader(() => importer.require(callOrigin(config.moduleBase), TOOLKIT_MODULE_ID) as ServicesModule);
  // A stray exception in user code must not take the context down with it.
  process.on(
    'uncaughtException',
    markOwn((error: Error) => reportStray(config.name, 'an uncaught exception', error)),
  );
  process.on(
    'unhandledRejection',
    markOwn((reason: unknown) => reportStray(config.name, 'an unhandled rejection', reason)),
  );
  new Dispatcher(router, importer, {
    defaultBase: config.moduleBase,
    onUnreported: (error) => {
      process.stderr.write(
        `tendril: a function called with callNoReply failed: ${toRemoteErrorInfo(error).stack || error}\n`,
      );
    },
    // Taken once the context is set up: what calls find, and are to leave.
    state: new ProcessState(),
    beforeCall: () => resolver.check(),
  });

  let stopping = false;
  const shutdown = (grace: number | undefined, code: number) => {
    if (stopping) return;
    stopping = true;
    void broker.shutdown(grace).then(() => process.exit(code));
  };
  serve(router, SHUTDOWN_SPEC, () => shutdown(undefined, 0));
  router.on('parentClosed', () => {
    // The parent is gone, so nobody can ask this context to do anything: leave promptly.
    setTimeout(() => process.exit(1), ORPHAN_DEADLINE);
    shutdown(ORPHAN_GRACE, 1);
  });
  serve(router, CONNECT_SPEC, async (request) => {
    const connection = (await importer.import(CONNECTION_MODULE_ID, CONNECTION_MODULE_ID)) as ConnectionModule;
    // A user's own method is loaded from the module the master names, fetched like a call's module.
    return connection.connectFromRequest(runtime, request, (path) => importer.import(path, path));
  });

  const info: ReadyInfo = {
    id: config.id,
    name: config.name,
    pid: process.pid,
    nodeVersion: process.version,
    hostname: os.hostname(),
    platform: process.platform,
    arch: process.arch,
  };
  router.reply(bootMessage, info);
  // Written once the ready reply is on its way, from what V8 has compiled by now (the core's start and BOOT).
  if (codeCache) {
    setImmediate(() =>
      writeTargetCodeCache(codeCache.script, codeCache.path, (why) =>
        debug('%s: no code cache written to %s: %s', config.name, codeCache.path, why),
      ),
    );
  }
}

/**
 * Sends `message` to the parent and blocks until the reply: how a
 * synchronous `require()` of a module outside the static closure is served.
 */
function requestSync(router: MessageSwitch, stream: Stream, message: Message): Message {
  // The handle only reserves a number; the reply is taken off the stream directly.
  const handle = router.addHandler(() => {});
  message.replyTo = handle;
  try {
    const reply = stream.blockingRequest(
      message,
      blockingIo,
      (incoming) => incoming.dst === router.id && incoming.handle === handle,
      SYNC_FETCH_TIMEOUT,
    );
    return reply;
  } finally {
    router.removeHandler(handle);
  }
}

const blockingIo: BlockingIo = {
  read(buffer) {
    try {
      return fs.readSync(STREAM_IN_FD, buffer, 0, buffer.length, null);
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code === 'EAGAIN') return -1;
      throw error;
    }
  },
  write(data) {
    try {
      return fs.writeSync(STREAM_OUT_FD, data);
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code === 'EAGAIN') return -1;
      throw error;
    }
  },
};

/**
 * Reports an exception no call caught (a throw in a call's stray timer, a
 * rejection nobody awaited) on stderr, which reaches the master as a log
 * record, naming where it was thrown: the context carries on.
 */
function reportStray(contextName: string, what: string, error: unknown): void {
  let text: string;
  try {
    text = withoutOwnFrames(String((error as Error)?.stack ?? error));
  } catch {
    text = Object.prototype.toString.call(error);
  }
  // `[ \t]+`, not `\s+`: a run of newlines in a message must not be scanned again from each of them.
  const frame = /\n[ \t]+at (?![^\n]*(?:node:|internal\/))([^\n]+)/.exec(text)?.[1];
  const where = frame ? `, thrown by a call's code at ${frame}` : '';
  process.stderr.write(`tendril: ${what} in context '${contextName}'${where} (the context carries on): ${text}\n`);
}
