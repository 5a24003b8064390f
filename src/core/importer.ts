import * as vm from 'node:vm';
import { encode } from './codec.js';
import { GET_MODULE } from './handles.js';
import { Message } from './message.js';
import {
  closureOf,
  type FileRecord,
  isBareSpecifier,
  isBuiltinSpecifier,
  type ModuleKind,
  type ModuleReply,
  type ModuleRequest,
  resolutionKey,
  type Target,
} from './module-protocol.js';
import { fromChildStream } from './policy.js';
import type { Router } from './router.js';

/** Specifier under which tendril's bundled modules ask for the core they run against. */
export const CORE_MODULE_ID = 'tendril:core';
/** Module forwarding's name for tendril's connection layer. */
export const CONNECTION_MODULE_ID = 'tendril:connection';
/** How long a synchronous `require()` waits for its module, in ms. */
export const SYNC_FETCH_TIMEOUT = 30_000;

/** Counters of one context's module forwarding, from `context.moduleStats()`. */
export interface ImporterStats {
  /** GET_MODULE requests this context sent to its parent (round trips). */
  requestsSent: number;
  /** Of those, requests made synchronously (a `require()` outside the static closure). */
  syncRequests: number;
  /** Files received from the parent. */
  filesReceived: number;
  /** Bytes of source received from the parent. */
  bytesReceived: number;
  /** GET_MODULE requests from children answered. */
  requestsServed: number;
  /** Of those, requests answered entirely from this context's cache. */
  servedFromCache: number;
  /** Files sent to children. */
  filesSent: number;
  /** Bytes of source sent to children. */
  bytesSent: number;
  /** Modules evaluated in this context. */
  modulesLoaded: number;
}

/** Options of a context's importer. */
export interface ImporterOptions {
  /** Load bare specifiers installed on the target from there, and only fetch what is missing. */
  preferTargetModules: boolean;
  /** Sends a GET_MODULE request and blocks until its reply (for synchronous `require()`). */
  requestSync: (message: Message) => Message;
}

/** The error a native addon `require()` throws in a child. */
export class NativeModuleError extends Error {
  /** Stable code. */
  readonly code = 'ERR_TENDRIL_NATIVE_MODULE';
  /**
   * @param pkg package the addon belongs to.
   * @param path the addon's path on the master.
   */
  constructor(pkg: string, path: string) {
    super(
      `${path} is a native addon of package '${pkg}'; tendril never ships native code. Install '${pkg}' on the target and start the context with preferTargetModules: true`,
    );
    this.name = 'NativeModuleError';
  }
}

interface LoadedModule {
  exports: unknown;
  loaded: boolean;
}

/**
 * A child's module system for code shipped from the master. Files arrive
 * with the static closure of what was asked for and their specifiers
 * already resolved, so loading them needs no further round trip; a
 * specifier outside that closure (a computed `require()` or `import()`)
 * is fetched on demand. Every file is kept, and this context serves its own
 * children from that cache: each file crosses each stream at most once.
 */
export class Importer {
  /** Counters for `context.moduleStats()`. */
  readonly stats: ImporterStats = {
    requestsSent: 0,
    syncRequests: 0,
    filesReceived: 0,
    bytesReceived: 0,
    requestsServed: 0,
    servedFromCache: 0,
    filesSent: 0,
    bytesSent: 0,
    modulesLoaded: 0,
  };
  private readonly files = new Map<string, FileRecord>();
  private readonly resolved = new Map<string, Target>();
  private readonly modules = new Map<string, LoadedModule>();
  private readonly sentTo = new Map<number, Set<string>>();
  private readonly inflight = new Map<string, Promise<void>>();
  private readonly builtins: readonly string[];
  private readonly requires = new Map<string, NodeJS.Require>();

  /**
   * @param core the core's exports, handed to modules that require `tendril:core`.
   * @param nativeRequire the context's own `require`, for built-ins and target-installed packages.
   */
  constructor(
    private readonly router: Router,
    private readonly core: object,
    private readonly nativeRequire: NodeJS.Require,
    private readonly options: ImporterOptions,
  ) {
    this.builtins = (nativeRequire('module') as { builtinModules: string[] }).builtinModules;
    router.addHandler((message) => this.onGetModule(message), {
      handle: GET_MODULE,
      policy: fromChildStream(router),
    });
  }

  /** A `require` for code in file `from` (a shipped function's base uses a file name in the base directory). */
  requireFrom(from: string): NodeJS.Require {
    let require = this.requires.get(from);
    if (require) return require;
    require = this.makeRequire(from);
    this.requires.set(from, require);
    return require;
  }

  private makeRequire(from: string): NodeJS.Require {
    const require = ((spec: string) => this.require(from, spec)) as NodeJS.Require;
    require.resolve = ((spec: string) => {
      const target = this.targetFor(from, spec, 'require', true);
      if ('path' in target) return target.path;
      if ('builtin' in target) return target.builtin;
      return this.fail(target, spec, from);
    }) as NodeJS.RequireResolve;
    require.cache = Object.create(null);
    return require;
  }

  /** An `import()` for code in file `from`: resolves with the module namespace. */
  importFrom(from: string): (spec: string) => Promise<unknown> {
    return (spec) => this.import(from, spec);
  }

  /** `require(spec)` as written in file `from`; fetches synchronously if it must. */
  require(from: string, spec: string): unknown {
    return this.load(this.targetFor(from, String(spec), 'require', true), spec, from);
  }

  /** `import(spec)` as written in file `from`; fetches (asynchronously) if it must. */
  async import(from: string, spec: string): Promise<unknown> {
    spec = String(spec);
    let target = this.knownTarget(from, spec, 'import');
    if (!target) {
      await this.fetch(from, [spec], 'import');
      target = this.knownTarget(from, spec, 'import') ?? unanswered(spec, from);
    }
    return namespaceOf(this.load(target, spec, from));
  }

  /**
   * Makes sure `specs` (as written in `from`) and their closures are here,
   * in one round trip for all that are missing. Used before running a
   * shipped function, so its literal `require()`s need not block.
   */
  async prefetch(from: string, specs: string[], kind: ModuleKind): Promise<void> {
    const missing = specs.filter((spec) => !this.knownTarget(from, spec, kind));
    if (missing.length > 0) await this.fetch(from, missing, kind);
  }

  /**
   * What `spec` in `from` is known to resolve to, without asking anyone.
   * @param here true when the module is for this context (then packages
   *   installed on the target may win); false when serving a child.
   */
  private knownTarget(from: string, spec: string, kind: ModuleKind, here = true): Target | undefined {
    if (isBuiltinSpecifier(spec, this.builtins)) return { builtin: spec };
    if (spec === CORE_MODULE_ID) return { core: true };
    if (here && this.options.preferTargetModules && isBareSpecifier(spec)) {
      try {
        // Node's own resolution on the target, from its working directory; `builtin` loads it natively.
        return { builtin: this.nativeRequire.resolve(spec, { paths: [process.cwd()] }) };
      } catch {
        // Not installed on the target: ship it.
      }
    }
    // A file's recorded dependencies are its static imports, which reach a child as require() calls.
    const fromFile = kind === 'require' ? this.files.get(from)?.deps[spec] : undefined;
    return fromFile ?? this.resolved.get(resolutionKey(kind, from, spec));
  }

  private targetFor(from: string, spec: string, kind: ModuleKind, sync: boolean): Target {
    const known = this.knownTarget(from, spec, kind);
    if (known) return known;
    if (!sync) throw new Error('internal: asynchronous resolution requested synchronously');
    this.fetchSync(from, [spec], kind);
    return this.knownTarget(from, spec, kind) ?? unanswered(spec, from);
  }

  private load(target: Target, spec: string, from: string): unknown {
    if ('builtin' in target) return this.nativeRequire(target.builtin);
    if ('core' in target) return this.core;
    if ('path' in target && !('native' in target)) return this.loadFile(target.path);
    return this.fail(target, spec, from);
  }

  private fail(target: Target, spec: string, from: string): never {
    if ('native' in target) throw new NativeModuleError(target.native, target.path);
    if ('missing' in target) throw Object.assign(new Error(target.missing), { code: 'MODULE_NOT_FOUND' });
    if ('refused' in target) throw Object.assign(new Error(target.refused), { code: 'ERR_TENDRIL_MODULE_REFUSED' });
    throw new Error(`cannot load '${spec}' from ${from}`);
  }

  private loadFile(path: string): unknown {
    const cached = this.modules.get(path);
    if (cached) return cached.exports;
    const record = this.files.get(path);
    if (!record) throw Object.assign(new Error(`module ${path} was not received`), { code: 'MODULE_NOT_FOUND' });
    if (record.format === 'error') throw new SyntaxError(record.source);
    if (record.format === 'json') {
      const module: LoadedModule = { exports: JSON.parse(record.source), loaded: true };
      this.modules.set(path, module);
      return module.exports;
    }
    const Module = this.nativeRequire('module') as new (id: string) => LoadedModule & Record<string, unknown>;
    const module = new Module(path);
    module.filename = path;
    module.paths = [];
    this.modules.set(path, module);
    const dirname = path.slice(0, path.lastIndexOf('/')) || '/';
    try {
      const fn = vm.compileFunction(
        record.source,
        ['exports', 'require', 'module', '__filename', '__dirname', '__tendril_import', '__tendril_meta'],
        { filename: path },
      );
      const meta = { url: `file://${path}`, filename: path, dirname };
      fn.call(
        module.exports,
        module.exports,
        this.requireFrom(path),
        module,
        path,
        dirname,
        this.importFrom(path),
        meta,
      );
    } catch (error) {
      this.modules.delete(path);
      throw error;
    }
    module.loaded = true;
    this.stats.modulesLoaded++;
    return module.exports;
  }

  private fetchSync(from: string, specs: string[], kind: ModuleKind): void {
    this.stats.requestsSent++;
    this.stats.syncRequests++;
    const message = Message.encoded(
      { dst: this.router.parentId, src: this.router.id, auth: this.router.id, handle: GET_MODULE, replyTo: 0 },
      { from, specs, kind } satisfies ModuleRequest,
    );
    const reply = this.options.requestSync(message);
    this.accept(reply, from, kind);
  }

  private fetch(from: string, specs: string[], kind: ModuleKind): Promise<void> {
    const key = resolutionKey(kind, from, specs.join('\0'));
    let pending = this.inflight.get(key);
    if (!pending) {
      this.stats.requestsSent++;
      pending = this.router
        .request(this.router.parentId, GET_MODULE, encode({ from, specs, kind } satisfies ModuleRequest), {
          what: `fetching ${specs.join(', ')}`,
        })
        .then((reply) => this.accept(reply, from, kind))
        .finally(() => this.inflight.delete(key));
      this.inflight.set(key, pending);
    }
    return pending;
  }

  private accept(reply: Message, from: string, kind: ModuleKind): void {
    if (reply.isDead) throw new Error(`module request failed: ${reply.unpack()}`);
    const { resolved, files } = reply.unpack() as ModuleReply;
    for (const file of files) {
      if (!this.files.has(file.path)) {
        this.files.set(file.path, file);
        this.stats.filesReceived++;
        this.stats.bytesReceived += file.source.length;
      }
    }
    for (const [spec, target] of Object.entries(resolved)) this.resolved.set(resolutionKey(kind, from, spec), target);
  }

  private onGetModule(message: Message): void {
    let request: unknown;
    try {
      request = message.unpack();
    } catch {
      request = undefined;
    }
    if (!isModuleRequest(request)) {
      this.router.reply(message, { resolved: {}, files: [] } satisfies ModuleReply);
      return;
    }
    const { from, specs, kind } = request;
    const missing = specs.filter((spec) => !this.knownTarget(from, spec, kind, false));
    const ready = missing.length === 0 ? Promise.resolve() : this.fetch(from, missing, kind);
    ready.then(
      () => {
        this.stats.requestsServed++;
        if (missing.length === 0) this.stats.servedFromCache++;
        const resolved: Record<string, Target> = {};
        for (const spec of specs) resolved[spec] = this.knownTarget(from, spec, kind, false) ?? unanswered(spec, from);
        this.router.reply(message, { resolved, files: this.filesFor(message.src, Object.values(resolved)) });
      },
      (error: Error) => {
        const resolved: Record<string, Target> = {};
        for (const spec of specs) resolved[spec] = { missing: `could not fetch '${spec}': ${error.message}` };
        this.router.reply(message, { resolved, files: [] } satisfies ModuleReply);
      },
    );
  }

  /** Files of the closure of `targets` that child `childId` has not been sent yet. */
  private filesFor(childId: number, targets: Target[]): FileRecord[] {
    let sent = this.sentTo.get(childId);
    if (!sent) {
      sent = new Set();
      this.sentTo.set(childId, sent);
    }
    const files: FileRecord[] = [];
    for (const path of closureOf(targets, (path) => this.files.get(path)?.deps)) {
      const file = this.files.get(path);
      if (!file || sent.has(path)) continue;
      sent.add(path);
      files.push(file);
      this.stats.filesSent++;
      this.stats.bytesSent += file.source.length;
    }
    return files;
  }
}

/** The target of a specifier the parent's reply said nothing about. */
function unanswered(spec: string, from: string): Target {
  return { missing: `Cannot find module '${spec}' from '${from}': the parent's reply did not resolve it` };
}

function isModuleRequest(value: unknown): value is ModuleRequest {
  const request = value as ModuleRequest;
  return (
    typeof request === 'object' &&
    request !== null &&
    typeof request.from === 'string' &&
    Array.isArray(request.specs) &&
    request.specs.every((spec) => typeof spec === 'string') &&
    (request.kind === 'require' || request.kind === 'import')
  );
}

/** What `import()` of a loaded module resolves with, following Node's CommonJS interop. */
export function namespaceOf(exports: unknown): unknown {
  if (exports !== null && typeof exports === 'object' && (exports as { __esModule?: boolean }).__esModule) {
    return exports;
  }
  const namespace: Record<string, unknown> = {};
  if (exports !== null && (typeof exports === 'object' || typeof exports === 'function')) {
    for (const key of Object.keys(exports)) namespace[key] = (exports as Record<string, unknown>)[key];
  }
  namespace.default = exports;
  return namespace;
}
