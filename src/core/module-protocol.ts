/**
 * Shapes exchanged by module forwarding (GET_MODULE) and what every serving
 * context shares: request validation and limits, the closure computation,
 * and the packing of replies under `maxMessageSize`. Paths are always paths
 * on the master's file system: a child's modules live in memory under the
 * names the master gave them.
 *
 * Every object keyed by data from a request or a reply (specifiers, paths)
 * has a null prototype, and is read with `ownValue`: a specifier named
 * `__proto__` or `constructor` is just a name.
 */
import { inflateRawSync } from 'node:zlib';
import { encode } from './codec.js';
import { ModuleRequestError } from './errors.js';

/** How a specifier is being loaded: Node resolves `require` and `import` with different conditions. */
export type ModuleKind = 'require' | 'import';

/** What a specifier resolved to, as decided by the master. */
export type Target =
  /** A file the master will ship. */
  | { path: string }
  /** A Node built-in; never shipped. */
  | { builtin: string }
  /** tendril's core, already running in every context. */
  | { core: true }
  /** A native addon (`.node`); never shipped. `native` is the package name. */
  | { native: string; path: string }
  /** Nothing matched; `missing` is the message to throw (code MODULE_NOT_FOUND). */
  | { missing: string }
  /** The master will not serve it; `refused` says why. */
  | { refused: string };

/** One shipped file. */
export interface FileRecord {
  /** Absolute path on the master; the module's `__filename` in the child. */
  path: string;
  /**
   * `cjs`: CommonJS source (ES modules arrive converted); `json`: JSON text;
   * `error`: the file cannot be loaded and `source` is the message to throw
   * (a syntax error with file and line, say).
   */
  format: 'cjs' | 'json' | 'error';
  /** The text to evaluate; empty when it travels `deflated`. */
  source: string;
  /**
   * The text, compressed with raw deflate (zlib's `deflateRaw`), in place
   * of `source`: larger files travel this way, and intermediate contexts
   * keep and forward them compressed.
   */
  deflated?: Uint8Array;
  /** Static specifiers in this file and what each resolved to (null prototype where it is built). */
  deps: Record<string, Target>;
  /**
   * For `error` records that are not syntax errors, the `code` of the error
   * loading the file throws (e.g. `ERR_TENDRIL_MODULE_TOO_LARGE`); absent,
   * loading throws a `SyntaxError`.
   */
  code?: string;
}

/** A GET_MODULE request: resolve `specs` as written in file `from`. */
export interface ModuleRequest {
  /** The file the specifiers appear in (or a file name in the base directory of a call). */
  from: string;
  /** Specifiers to resolve, each with its static closure. At most `MAX_SPECS_PER_REQUEST`. */
  specs: string[];
  /** Whether they are being `require()`d or `import()`ed. */
  kind: ModuleKind;
}

/**
 * The reply: what each specifier resolved to, and the files of their
 * closure the requester lacks.
 *
 * A closure too large for one message arrives in several replies: each but
 * the last has `partial: true`, carries as many files as fit and an empty
 * `resolved`; the requester repeats the same request until a reply is not
 * partial (files already sent are not sent again, so each file still
 * crosses each stream once). The last reply carries `resolved`.
 */
export interface ModuleReply {
  /** Each requested specifier's target (empty in a partial reply). */
  resolved: Record<string, Target>;
  /** Files of their static closures that the requester was not sent before. */
  files: FileRecord[];
  /** More files follow: send the same request again. */
  partial?: boolean;
}

/** Most specifiers one GET_MODULE request may carry; the importer splits longer lists. */
export const MAX_SPECS_PER_REQUEST = 1024;
/** Longest specifier or `from` path accepted, in UTF-16 code units (Linux's PATH_MAX is 4096 bytes). */
export const MAX_SPECIFIER_LENGTH = 4096;
/** Requests of one requester being resolved at once; more wait their turn. */
export const MODULE_REQUEST_CONCURRENCY = 2;
/** Requests of one requester that may wait for a turn; past this they are answered at once with an error. */
export const MAX_WAITING_MODULE_REQUESTS = 64;
/** Bytes of requests of one requester that may wait for a turn; past this they are answered at once with an error. */
export const MAX_WAITING_MODULE_BYTES = 4 * 1024 * 1024;

/**
 * Bytes of a reply spent outside `resolved` and the file records: map
 * headers, the keys `resolved`, `files`, `partial`, the array header. A
 * generous upper bound.
 */
const REPLY_ENVELOPE = 64;
/** Upper bound of a file record's bytes beyond its path, source and deps: map header, keys, string headers, format. */
const RECORD_ENVELOPE = 64;

/** An own property of `record`, never one inherited from `Object.prototype` (`constructor`, `__proto__`...). */
export function ownValue<T>(record: Readonly<Record<string, T>> | undefined, key: string): T | undefined {
  // biome-ignore lint/suspicious/noPrototypeBuiltins: Object.hasOwn is missing on the Node 12 to 16.8 a child may run.
  return record !== undefined && Object.prototype.hasOwnProperty.call(record, key) ? record[key] : undefined;
}

/** An empty object for keys that come from requests or replies: no prototype, so no key is special. */
export function emptyRecord<T>(): Record<string, T> {
  return Object.create(null) as Record<string, T>;
}

/**
 * Checks a decoded GET_MODULE payload and returns it as a request.
 * @returns the request, or a string saying what is wrong with it.
 */
export function parseModuleRequest(value: unknown): ModuleRequest | string {
  if (typeof value !== 'object' || value === null || Array.isArray(value)) return 'the payload is not a map';
  const { from, specs, kind } = value as Partial<Record<keyof ModuleRequest, unknown>>;
  if (typeof from !== 'string' || from.length === 0 || from.length > MAX_SPECIFIER_LENGTH)
    return `'from' must be a path of 1 to ${MAX_SPECIFIER_LENGTH} characters`;
  if (kind !== 'require' && kind !== 'import') return `'kind' must be 'require' or 'import'`;
  if (!Array.isArray(specs)) return `'specs' must be a list of specifiers`;
  if (specs.length > MAX_SPECS_PER_REQUEST)
    return `${specs.length} specifiers in one request, more than the limit of ${MAX_SPECS_PER_REQUEST}`;
  for (const spec of specs) {
    if (typeof spec !== 'string' || spec.length === 0 || spec.length > MAX_SPECIFIER_LENGTH)
      return `each specifier must be a string of 1 to ${MAX_SPECIFIER_LENGTH} characters`;
  }
  return { from, specs: specs as string[], kind };
}

/** The name a GET_MODULE request and the importer use for a resolution. */
export function resolutionKey(kind: ModuleKind, from: string, spec: string): string {
  return `${kind}\0${from}\0${spec}`;
}

/**
 * Paths of every file statically reachable from `targets`, following each
 * file's resolved dependencies as `depsOf` gives them. Files it knows
 * nothing of are not followed (the caller must hold every file it serves).
 */
export function closureOf(
  targets: Iterable<Target>,
  depsOf: (path: string) => Readonly<Record<string, Target>> | undefined,
): string[] {
  const seen = new Set<string>();
  const queue: string[] = [];
  const visit = (target: Target) => {
    if (typeof target === 'object' && target !== null && typeof (target as { path?: unknown }).path === 'string') {
      const path = (target as { path: string }).path;
      if ('native' in target || seen.has(path)) return;
      seen.add(path);
      queue.push(path);
    }
  };
  for (const target of targets) visit(target);
  for (let next = 0; next < queue.length; next++) {
    const deps = depsOf(queue[next] as string);
    if (deps) for (const key of Object.keys(deps)) visit(deps[key] as Target);
  }
  return [...seen];
}

/** Specifiers of Node built-ins, with or without `node:`. */
export function isBuiltinSpecifier(spec: string, builtins: readonly string[]): boolean {
  return spec.startsWith('node:') || builtins.includes(spec);
}

/** True for bare specifiers (`lodash`, `@scope/pkg/sub`), as opposed to relative or absolute ones. */
export function isBareSpecifier(spec: string): boolean {
  return !(spec.startsWith('.') || spec.startsWith('/') || spec.startsWith('file:') || spec.startsWith('#'));
}

/** The package name a bare specifier names: `lodash` for `lodash/fp`, `@scope/pkg` for `@scope/pkg/sub`. */
export function bareSpecifierPackage(spec: string): string {
  const parts = spec.split('/');
  return spec.startsWith('@') && parts.length > 1 ? `${parts[0]}/${parts[1]}` : (parts[0] as string);
}

/**
 * True when a bare specifier has a `.` or `..` path segment, as written or
 * once URL-decoded (`dep/../../etc/hostname`, `dep/%2e%2e/x`): such a
 * specifier could name a file outside the package it names.
 */
export function hasDotSegments(spec: string): boolean {
  let decoded = spec;
  try {
    decoded = decodeURIComponent(spec);
  } catch {
    // Not valid percent-encoding: Node would not decode it either.
  }
  for (const text of decoded === spec ? [spec] : [spec, decoded]) {
    for (const segment of text.split('/')) if (segment === '.' || segment === '..') return true;
  }
  return false;
}

/** The package a file belongs to, from its path: the part after the last `node_modules/`. */
export function packageNameOf(path: string): string | undefined {
  const index = path.lastIndexOf('/node_modules/');
  if (index === -1) return undefined;
  const parts = path.slice(index + '/node_modules/'.length).split('/');
  return parts[0]?.startsWith('@') ? `${parts[0]}/${parts[1]}` : parts[0];
}

/** Bytes of `file`'s text as it travels: compressed when it is `deflated`. */
export function sourceBytes(file: FileRecord): number {
  return file.deflated ? file.deflated.length : file.source.length;
}

/** The text of `file`, inflated when it travels compressed. */
export function sourceText(file: FileRecord): string {
  return file.deflated ? inflateRawSync(file.deflated).toString('utf8') : file.source;
}

/** UTF-8 byte length of a string, without encoding it. */
function utf8Length(text: string): number {
  return Buffer.byteLength(text, 'utf8');
}

const recordSizes = new WeakMap<FileRecord, number>();

/** An upper bound of the bytes `file` takes in an encoded reply. */
export function recordSize(file: FileRecord): number {
  let size = recordSizes.get(file);
  if (size === undefined) {
    size =
      RECORD_ENVELOPE +
      utf8Length(file.path) +
      utf8Length(file.source) +
      (file.deflated?.length ?? 0) +
      encode(file.deps).length +
      (file.code === undefined ? 0 : utf8Length(file.code));
    recordSizes.set(file, size);
  }
  return size;
}

/** Bytes available for file records in a reply under `maxMessageSize`, with nothing else in it. */
export function fileBudget(maxMessageSize: number): number {
  return maxMessageSize - REPLY_ENVELOPE;
}

/**
 * `file` as it can be sent under `maxMessageSize`: itself when its record
 * fits in a reply on its own, else an `error` record whose message names
 * the file, its size and the limit (so a requester never waits for a file
 * that can never arrive).
 */
export function fitRecord(file: FileRecord, maxMessageSize: number): FileRecord {
  if (recordSize(file) <= fileBudget(maxMessageSize)) return file;
  return {
    path: file.path,
    format: 'error',
    source: `${file.path} is ${sourceBytes(file)} bytes${file.deflated ? ' compressed' : ''}, too large to send in one message (maxMessageSize is ${maxMessageSize} bytes); raise the master Router's maxMessageSize option to ship it`,
    deps: emptyRecord(),
    code: 'ERR_TENDRIL_MODULE_TOO_LARGE',
  };
}

/**
 * Builds the reply to send now from the answer `resolved` and the files
 * the requester still lacks (`pending`, each already passed through
 * `fitRecord`): the whole answer when it fits under `maxMessageSize`, else
 * a partial reply with as many files as fit (at least one). The caller
 * marks the returned `sent` files as sent, in the same synchronous step as
 * it sends the reply.
 * @throws Error when `resolved` alone does not fit in a message.
 */
export function packReply(
  resolved: Record<string, Target>,
  pending: readonly FileRecord[],
  maxMessageSize: number,
): { reply: ModuleReply; sent: FileRecord[] } {
  const budget = fileBudget(maxMessageSize);
  const resolvedSize = encode(resolved).length;
  if (resolvedSize > budget) {
    throw new Error(
      `the answer for these specifiers is ${resolvedSize} bytes, more than maxMessageSize (${maxMessageSize} bytes); ask for fewer at once`,
    );
  }
  let total = resolvedSize;
  for (const file of pending) total += recordSize(file);
  if (total <= budget) return { reply: { resolved, files: pending.slice() }, sent: pending.slice() };
  const sent: FileRecord[] = [];
  let used = 0;
  for (const file of pending) {
    const size = recordSize(file);
    if (used + size > budget) {
      if (sent.length === 0) throw new Error(`internal: ${file.path} was not fitted to maxMessageSize`);
      break;
    }
    used += size;
    sent.push(file);
  }
  return { reply: { resolved: emptyRecord(), files: sent, partial: true }, sent };
}

/** A request waiting for its turn. */
interface Waiting {
  bytes: number;
  start: () => void;
}

/** One requester's requests: how many run, and which wait. */
interface Lane {
  running: number;
  waiting: Waiting[];
  waitingBytes: number;
}

/**
 * Who a GET_MODULE request is from, for what the serving context remembers
 * of its requesters (files sent, counters): the child whose stream it came
 * through. A child speaks for its whole subtree (its own children ask it,
 * never this context), so whatever source IDs it writes, it costs one
 * record, not one per ID it can announce.
 */
export function requesterOf(
  router: { routeOf(contextId: number): { remoteId: number } | undefined },
  message: { src: number },
): number {
  return router.routeOf(message.src)?.remoteId ?? message.src;
}

/**
 * Bounds the GET_MODULE requests of each requester (a child stream): at
 * most `concurrency` are worked on at once, at most `maxWaiting` requests
 * and `maxWaitingBytes` bytes of them wait; anything past that is refused
 * at once, so a child flooding its parent with unique specifiers costs the
 * parent a fixed amount of memory. A tiny counter rather than a queue
 * library: this runs in every context, on Node 12.
 */
export class RequestLimiter<K> {
  private readonly lanes = new Map<K, Lane>();

  /**
   * @param concurrency requests of one requester worked on at once.
   * @param maxWaiting requests of one requester that may wait.
   * @param maxWaitingBytes bytes (payload sizes) of one requester's waiting requests.
   */
  constructor(
    private readonly concurrency = MODULE_REQUEST_CONCURRENCY,
    private readonly maxWaiting = MAX_WAITING_MODULE_REQUESTS,
    private readonly maxWaitingBytes = MAX_WAITING_MODULE_BYTES,
  ) {}

  /**
   * Runs `task` for `requester` now or once a turn is free, and settles as it does.
   * @param bytes the request's size, counted against `maxWaitingBytes` while it waits.
   * @param describe names the requester in the error.
   * @throws ModuleRequestError (as a rejection) when the requester already
   *   has `maxWaiting` requests or `maxWaitingBytes` bytes waiting.
   */
  run<T>(requester: K, bytes: number, describe: string, task: () => Promise<T>): Promise<T> {
    let lane = this.lanes.get(requester);
    if (!lane) {
      lane = { running: 0, waiting: [], waitingBytes: 0 };
      this.lanes.set(requester, lane);
    }
    const current = lane;
    const go = (): Promise<T> => {
      current.running++;
      let result: Promise<T>;
      try {
        result = task();
      } catch (error) {
        result = Promise.reject(error);
      }
      return result.then(
        (value) => {
          this.done(requester, current);
          return value;
        },
        (error: unknown) => {
          this.done(requester, current);
          throw error;
        },
      );
    };
    if (current.running < this.concurrency) return go();
    if (current.waiting.length >= this.maxWaiting || current.waitingBytes + bytes > this.maxWaitingBytes) {
      return Promise.reject(
        new ModuleRequestError(
          `${describe} has too many module requests waiting (at most ${this.concurrency} are resolved at once and ${this.maxWaiting} requests or ${this.maxWaitingBytes} bytes may wait); this one was refused, ask again once others are answered`,
        ),
      );
    }
    return new Promise<T>((resolve, reject) => {
      current.waitingBytes += bytes;
      current.waiting.push({
        bytes,
        start: () => {
          current.waitingBytes -= bytes;
          go().then(resolve, reject);
        },
      });
    });
  }

  /** Requests being worked on and waiting, over all requesters (for tests and stats). */
  get size(): { running: number; waiting: number } {
    let running = 0;
    let waiting = 0;
    for (const lane of this.lanes.values()) {
      running += lane.running;
      waiting += lane.waiting.length;
    }
    return { running, waiting };
  }

  private done(requester: K, lane: Lane): void {
    lane.running--;
    const next = lane.waiting.shift();
    if (next) next.start();
    else if (lane.running === 0 && this.lanes.get(requester) === lane) this.lanes.delete(requester);
  }
}
