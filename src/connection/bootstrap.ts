import { describeExit } from '../core/broker.js';
import { encode } from '../core/codec.js';
import { BootstrapError, ConnectTimeoutError } from '../core/errors.js';
import { BOOT } from '../core/handles.js';
import { LineSplitter, logger } from '../core/log.js';
import type { BootConfig, ReadyInfo, Runtime } from '../core/runtime.js';
import { Stream } from '../core/stream.js';
import { bootstrapArgv, bootstrapPayload, firstStage } from './first-stage.js';
import type { ConnectionMethod, Transport } from './method.js';

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
export interface CommonOptions {
  /** Name of the new context in logs and errors. Default: `<method>.<pid>`. */
  name?: string;
  /**
   * Milliseconds from the start of the connection until the child must be
   * ready; past it the child is killed and reaped and the connection fails
   * with `ConnectTimeoutError`. Default 30000.
   */
  connectTimeout?: number;
  /**
   * The Node interpreter on the target: a path or command name, or an argv
   * prefix such as `['nice', '-n', '10', 'node']`. Default: the method's
   * choice (for `local`, the same binary as the starting context).
   */
  nodePath?: string | string[];
  /**
   * Load packages installed on the target (found from its working
   * directory) instead of shipping the master's copy; only what is missing
   * there is shipped. Default false: the master's copy wins, so code runs
   * against the versions it was written for.
   */
  preferTargetModules?: boolean;
}

/**
 * Starts a child context with `method` from the context `runtime` belongs
 * to: spawns the target, sends the core and the BOOT configuration, and
 * waits until the child reports ready. The child's output becomes log
 * records; its process is handed to the broker.
 *
 * @returns what the child reported about itself.
 * @throws BootstrapError when the child exits or fails before it is ready,
 *   quoting its last output.
 * @throws ConnectTimeoutError when it is not ready within `connectTimeout`.
 * @throws RangeError when `connectTimeout` is not a positive number.
 */
export async function bootstrap<O extends CommonOptions>(
  runtime: Runtime,
  method: ConnectionMethod<O>,
  options: O,
): Promise<ReadyInfo> {
  const { router } = runtime;
  const timeout = options.connectTimeout ?? DEFAULT_CONNECT_TIMEOUT;
  if (!(timeout > 0 && Number.isFinite(timeout))) {
    throw new RangeError(`connectTimeout must be a positive number of milliseconds, got ${timeout}`);
  }
  const started = Date.now();
  const ids = await runtime.ids.allocateChild();
  const node = options.nodePath === undefined ? method.defaultNode(options) : ([] as string[]).concat(options.nodePath);
  const stage = firstStage(runtime.firstStage, runtime.coreBundle.length);
  let transport: Transport;
  try {
    transport = await method.start(bootstrapArgv(node, stage), options);
  } catch (error) {
    throw new BootstrapError(
      options.name ?? method.name,
      `${method.name} could not start: ${(error as Error).message}`,
      '',
    );
  }
  const name = options.name ?? `${method.name}.${transport.process.pid ?? ids.id}`;
  debug('%s: starting %s (id %d) %s', router.name, name, ids.id, transport.where);

  const tail: string[] = [];
  const lines = new LineSplitter((text) => {
    tail.push(text);
    if (tail.length > TAIL_LINES) tail.shift();
    runtime.onChildLog({ contextId: ids.id, contextName: name, text });
  });
  const outputDone = new Promise<void>((resolve) => {
    transport.stderr.on('data', (chunk: Buffer) => lines.push(chunk));
    transport.stderr.on('end', () => {
      lines.flush();
      resolve();
    });
    transport.stderr.on('error', () => resolve());
  });
  (transport.stderr as { unref?: () => void }).unref?.();

  const stream = new Stream({
    name,
    input: transport.stdout,
    output: transport.stdin,
    maxMessageSize: router.maxMessageSize,
  });
  router.addChildStream(stream, ids.id, name);
  // Made (once) while the new interpreter is still starting, so it costs the child no time.
  const sameBinary = method.sameMachine === true && node.length === 1 && node[0] === process.execPath;
  const cache = sameBinary ? runtime.codeCache() : undefined;
  for (const part of bootstrapPayload(runtime.coreBundle, cache)) transport.stdin.write(part);

  const config: BootConfig = {
    id: ids.id,
    name,
    parentIds: [router.id, ...router.parentIds],
    maxMessageSize: router.maxMessageSize,
    idBlock: ids.block,
    debug: runtime.debugNamespaces,
    firstStage: runtime.firstStage,
    moduleBase: runtime.moduleBase,
    preferTargetModules: options.preferTargetModules === true,
  };
  const remaining = Math.max(0, timeout - (Date.now() - started));
  // Why the child died, once its process has exited and its last output is in.
  const ended = async (): Promise<string> => {
    const status = await transport.process.exited;
    await within(outputDone, OUTPUT_SETTLE, undefined);
    return `${transport.where} process ended before it was ready (${describeExit(status)})`;
  };
  let timer: ReturnType<typeof setTimeout> | undefined;
  const timedOut = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new ConnectTimeoutError(name, timeout, '')), remaining);
  });
  try {
    const reply = await Promise.race([
      router.request(ids.id, BOOT, encode(config), { what: 'bootstrap' }),
      ended().then((why) => Promise.reject(new BootstrapError(name, why, tail.join('\n')))),
      timedOut,
    ]);
    const info = reply.unpack() as ReadyInfo;
    // From now on the child only keeps the event loop alive while calls to it are pending.
    transport.process.unref();
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
    if (error instanceof ConnectTimeoutError) {
      await abandon(transport, stream, 'connect timeout');
      throw new ConnectTimeoutError(name, timeout, tail.join('\n'));
    }
    if (error instanceof BootstrapError) {
      await abandon(transport, stream, error.message);
      throw error;
    }
    // The stream failed first (the child closed it, or wrote garbage); the
    // process is usually exiting too, and its status says more.
    const why = await within(ended(), EXIT_SETTLE, (error as Error).message);
    await abandon(transport, stream, why);
    throw new BootstrapError(name, why, tail.join('\n'));
  } finally {
    clearTimeout(timer);
  }
}

/** Kills and reaps a child that failed to start. */
async function abandon(transport: Transport, stream: Stream, reason: string): Promise<void> {
  stream.close(`bootstrap failed: ${reason}`);
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
