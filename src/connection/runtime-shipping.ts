/**
 * The parent's side of a start on a target without a usable Node (the
 * shell's side is ship-stage.ts): it reads what the shell says the target
 * is and has, decides which runtime it gets, and sends it on the stream
 * the core goes on, before the core. What the shell says is untrusted:
 * its line is bounded and checked word by word, and it can make the
 * parent send one runtime per start, of the version the program chose,
 * for an architecture that is published.
 */
import type { Runtime } from '../core/runtime.js';
import { BootstrapError, InterpreterError } from './errors.js';
import type { Session, Transport } from './method.js';
import { childRuntimeSource } from './runtime-cache.js';
import { ENTRY, RUNTIME_ARCHES, type RuntimeArch, type RuntimeSource, type ShippableRuntime } from './runtime-types.js';
import { SHIP_REQUEST } from './ship-stage.js';

/** Whether to bring a Node runtime to a target (the connection option `shipNode`). */
export type ShipNode = 'auto' | 'always' | 'never';

/** `uname -m` as Node names the architecture. */
const MACHINES: Readonly<Record<string, string>> = {
  x86_64: 'x64',
  amd64: 'x64',
  aarch64: 'arm64',
  arm64: 'arm64',
  armv7l: 'armv7l',
  armv6l: 'armv6l',
  ppc64le: 'ppc64le',
  s390x: 's390x',
  riscv64: 'riscv64',
  i686: 'ia32',
  i386: 'ia32',
};

/** What the shell said about the target. */
export interface ShipRequest {
  /** `uname -m`. */
  readonly machine: string;
  /** The C library: glibc and its version, musl, or unknown. */
  readonly libc:
    | { readonly kind: 'glibc'; readonly version: readonly [number, number] }
    | { readonly kind: 'musl' | 'unknown' };
  /** Runtimes in the target's cache (entries). */
  readonly have: readonly string[];
  /** The platform as the shell described it (`Linux x86_64, Debian GNU/Linux 12 (bookworm), glibc 2.36`). */
  readonly platform: string;
}

/** Longest request line taken, in bytes. */
export const MAX_SHIP_REQUEST = 4096;
/**
 * The request in `line` (without its newline), checked.
 * @returns the request, or a string saying what is wrong with it.
 */
export function parseShipRequest(line: string): ShipRequest | string {
  if (!line.startsWith(SHIP_REQUEST)) return 'not a request for a Node runtime';
  if (line.length > MAX_SHIP_REQUEST) return `a request of ${line.length} bytes (at most ${MAX_SHIP_REQUEST})`;
  const [machine = '', libc = '', have = '', ...rest] = line.slice(SHIP_REQUEST.length).split(';');
  if (!/^[A-Za-z0-9_.-]{1,32}$/.test(machine)) return `a machine name that is not one: ${JSON.stringify(machine)}`;
  const glibc = /^glibc-(\d{1,3})\.(\d{1,3})/.exec(libc);
  const parsedLibc: ShipRequest['libc'] = glibc
    ? { kind: 'glibc', version: [Number(glibc[1]), Number(glibc[2])] }
    : { kind: libc === 'musl' ? 'musl' : 'unknown' };
  const entries = have.split(' ').filter((word) => word !== '');
  // Entries that are not ours are the target's business: they are never named back to it.
  return {
    machine,
    libc: parsedLibc,
    have: entries.filter((entry) => ENTRY.test(entry)),
    platform: rest
      .join(';')
      .replace(/[^\x20-\x7e]/g, '?')
      .trim(),
  };
}

/** The oldest glibc an official build of Node `major` runs on. */
export function glibcNeeded(major: number): readonly [number, number] {
  return major >= 18 ? [2, 28] : [2, 17];
}

/**
 * The architecture to ship for, or an `InterpreterError` saying why
 * nothing can be shipped (musl, an unpublished architecture).
 * @param name the context being started, for the error.
 */
export function shippableArch(request: ShipRequest, name: string): RuntimeArch | InterpreterError {
  const target = `the target is ${request.platform || request.machine}`;
  if (request.libc.kind === 'musl') {
    return new InterpreterError(
      name,
      `no usable Node.js interpreter, and none can be shipped: ${target}, and no official Node.js build exists for musl; install Node with its package manager (apk add nodejs on Alpine) or set nodePath to one`,
      '',
    );
  }
  const arch = MACHINES[request.machine] ?? request.machine;
  if (!(RUNTIME_ARCHES as readonly string[]).includes(arch)) {
    return new InterpreterError(
      name,
      `no usable Node.js interpreter, and none can be shipped: ${target}, and the npm registry publishes official Node.js builds only for ${RUNTIME_ARCHES.join(', ')} (not ${arch}); install Node there or set nodePath to one`,
      '',
    );
  }
  if (request.libc.kind === 'unknown') {
    return new InterpreterError(
      name,
      `no usable Node.js interpreter, and none can be shipped: ${target}, whose C library is neither glibc nor musl as far as the shell could tell; install Node there or set nodePath to one`,
      '',
    );
  }
  return arch as RuntimeArch;
}

/**
 * An `InterpreterError` when `runtime` needs a newer glibc than the
 * target has, else undefined.
 */
export function glibcTooOld(
  request: ShipRequest,
  runtime: ShippableRuntime,
  name: string,
): InterpreterError | undefined {
  if (request.libc.kind !== 'glibc') return undefined;
  const [major, minor] = request.libc.version;
  const [needMajor, needMinor] = glibcNeeded(Number(runtime.version.split('.')[0]));
  if (major > needMajor || (major === needMajor && minor >= needMinor)) return undefined;
  return new InterpreterError(
    name,
    `no usable Node.js interpreter, and the one tendril would ship cannot run there: the target is ${request.platform}, and Node ${runtime.version} needs glibc ${needMajor}.${needMinor} or newer; install Node there, set nodePath to one, or choose an older Node for the Router's nodeRuntime (Node 16 runs on glibc 2.17)`,
    '',
  );
}

/** The line that tells the shell to use a runtime it has. */
export function useLine(runtime: ShippableRuntime): string {
  return `use ${runtime.entry}\n`;
}

/** The line that announces a runtime's bytes. */
export function getLine(runtime: ShippableRuntime): string {
  return `get ${runtime.entry} ${runtime.bytes} ${runtime.sha512}\n`;
}

/** Counters of the runtimes a context sent (`router.runtimeStats()`). */
export interface RuntimeStats {
  /** Runtimes sent: to a target's shell, or (from the master) to an intermediate's cache. */
  shipped: number;
  /** Bytes of runtime packages sent. */
  bytesSent: number;
  /** Starts where the target had the runtime already, so no bytes were sent. */
  reused: number;
  /** The same counters for each context they went to (the new context, or the intermediate that asked). */
  byContext: Record<number, { shipped: number; bytesSent: number; reused: number }>;
}

const counters = new WeakMap<object, RuntimeStats>();

/** The counters of the context whose router is `router`, made on first use. */
export function runtimeCounters(router: object): RuntimeStats {
  let stats = counters.get(router);
  if (!stats) {
    stats = { shipped: 0, bytesSent: 0, reused: 0, byContext: {} };
    counters.set(router, stats);
  }
  return stats;
}

/** Adds to the counters of `router`, and to those of `contextId` in it. */
export function countShipping(router: object, contextId: number, shipped: number, bytes: number, reused: number): void {
  const stats = runtimeCounters(router);
  const mine = stats.byContext[contextId] ?? { shipped: 0, bytesSent: 0, reused: 0 };
  stats.byContext[contextId] = mine;
  stats.shipped += shipped;
  mine.shipped += shipped;
  stats.bytesSent += bytes;
  mine.bytesSent += bytes;
  stats.reused += reused;
  mine.reused += reused;
}

/** A copy of the counters of `router`. */
export function runtimeStats(router: object): RuntimeStats {
  const stats = runtimeCounters(router);
  const byContext: RuntimeStats['byContext'] = {};
  for (const [id, counts] of Object.entries(stats.byContext)) byContext[Number(id)] = { ...counts };
  return { ...stats, byContext };
}

/** Progress of a runtime being sent (the Router's `ship` event). */
export interface ShipProgress {
  /** The context it goes to (the one being started, or the intermediate that asked). */
  readonly contextName: string;
  /** Where it goes: the target (`ssh:deploy@web1:22`) or `cache of <intermediate>`. */
  readonly where: string;
  /** The Node release. */
  readonly version: string;
  /** Its architecture. */
  readonly arch: RuntimeArch;
  /** Bytes sent so far. */
  readonly bytes: number;
  /** Bytes in all (the package's size). */
  readonly total: number;
}

/** Most bytes between two progress reports: 1 MiB. */
export const PROGRESS_STEP = 1024 * 1024;

/**
 * Writes `runtime`'s bytes to `output`, waiting for it to drain; calls
 * `onProgress` every `PROGRESS_STEP` bytes and at the end.
 * @throws Error when `output` closes first, or the runtime's bytes are not as many as it said.
 */
export async function pipeRuntime(
  runtime: ShippableRuntime,
  output: NodeJS.WritableStream & { destroyed?: boolean },
  onProgress: (bytes: number) => void,
): Promise<number> {
  let sent = 0;
  let reported = 0;
  for await (const chunk of runtime.open()) {
    if (sent + chunk.length > runtime.bytes)
      throw new Error(`the runtime ${runtime.entry} has more than its ${runtime.bytes} bytes`);
    if (!output.write(chunk)) await drained(output);
    sent += chunk.length;
    if (sent - reported >= PROGRESS_STEP) {
      reported = sent;
      onProgress(sent);
    }
  }
  if (sent !== runtime.bytes)
    throw new Error(`the runtime ${runtime.entry} ended after ${sent} of its ${runtime.bytes} bytes`);
  onProgress(sent);
  return sent;
}

function drained(output: NodeJS.WritableStream & { destroyed?: boolean }): Promise<void> {
  return new Promise<void>((resolve, reject) => {
    if (output.destroyed) {
      reject(new Error('the stream closed'));
      return;
    }
    const cleanup = () => {
      output.off('drain', onDrain);
      output.off('close', onFail);
      output.off('error', onFail);
    };
    const onDrain = () => {
      cleanup();
      resolve();
    };
    const onFail = () => {
      cleanup();
      reject(new Error('the stream closed'));
    };
    output.on('drain', onDrain);
    output.on('close', onFail);
    output.on('error', onFail);
  });
}

/** The start a runtime is asked for in. */
export interface ShipStart {
  /** The new context's name. */
  readonly name: string;
  /** The new context's ID. */
  readonly contextId: number;
  /** The shell's request line, without its newline. */
  readonly line: string;
}

/**
 * Answers a shell's request for a runtime (see the module's comment):
 * tells it to use one it has, or sends one from this context's source.
 * The caller sends the core after it.
 * @throws InterpreterError when none can be shipped there (musl, an
 *   unpublished architecture, too old a glibc); BootstrapError when the
 *   request is malformed or no runtime can be had; Error when the stream
 *   closes while the runtime is sent.
 */
export async function shipRuntime(
  runtime: Runtime,
  transport: Transport,
  session: Session,
  start: ShipStart,
): Promise<void> {
  const { name, contextId } = start;
  const request = parseShipRequest(start.line);
  if (typeof request === 'string') {
    throw new BootstrapError(name, `the shell on ${transport.where} sent ${request}`, '');
  }
  const arch = shippableArch(request, name);
  if (arch instanceof InterpreterError) throw arch;
  session.step = `getting a Node runtime for ${request.platform || arch} (${transport.where} has no usable Node)`;
  let chosen: ShippableRuntime;
  try {
    chosen = await runtimeSource(runtime).get(arch, request.have);
  } catch (error) {
    throw new BootstrapError(
      name,
      `${transport.where} has no usable Node.js interpreter, and no runtime could be had to ship there: ${(error as Error).message}`,
      '',
    );
  }
  const tooOld = glibcTooOld(request, chosen, name);
  if (tooOld) throw tooOld;
  const router = runtime.router;
  if (request.have.includes(chosen.entry)) {
    transport.stdin.write(useLine(chosen));
    countShipping(router, contextId, 0, 0, 1);
    return;
  }
  const size = `${(chosen.bytes / 1e6).toFixed(1)} MB`;
  runtime.onChildLog({
    contextId,
    contextName: name,
    text: `tendril: ${transport.where} has no usable Node; sending Node ${chosen.version} (linux-${chosen.arch}, ${size}) from ${router.name}`,
  });
  session.step = `sending Node ${chosen.version} (${size}) to ${transport.where}`;
  transport.stdin.write(getLine(chosen));
  const progress = (bytes: number) =>
    shippings.get(router)?.onProgress?.({
      contextName: name,
      where: transport.where,
      version: chosen.version,
      arch: chosen.arch,
      bytes,
      total: chosen.bytes,
    });
  progress(0);
  // A failure here is most often the target's shell giving up: not a BootstrapError, so that the
  // start reports the process's exit and last words when it has them (see bootstrap.ts).
  const sent = await pipeRuntime(chosen, transport.stdin, progress).catch((error: Error) => {
    throw new Error(`sending Node ${chosen.version} to ${transport.where} failed: ${error.message}`);
  });
  countShipping(router, contextId, 1, sent, 0);
}

/** How a context that is not a child (the master) ships: set by it with `setShipping`. */
interface Shipping {
  readonly source: RuntimeSource;
  readonly onProgress?: (progress: ShipProgress) => void;
}

const shippings = new WeakMap<object, Shipping>();

/** Sets where the context of `router` gets runtimes, and who hears of their progress (the master does, at its start). */
export function setShipping(router: object, shipping: Shipping): void {
  shippings.set(router, shipping);
}

/** Where `runtime`'s context gets runtimes: the master's own source, or a child's cache and parent. */
function runtimeSource(runtime: Runtime): RuntimeSource {
  return shippings.get(runtime.router)?.source ?? childRuntimeSource(runtime);
}
