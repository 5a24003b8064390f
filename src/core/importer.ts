import * as vm from 'node:vm';
import { encode } from './codec.js';
import { deadReason } from './dead-replies.js';
import { ModuleRequestError, TendrilError } from './errors.js';
import { Message } from './message.js';
import {
  closureOf,
  emptyRecord,
  type FileRecord,
  fitRecord,
  isBareSpecifier,
  isBuiltinSpecifier,
  MAX_SPECS_PER_REQUEST,
  MAX_WAITING_MODULE_REQUESTS,
  MODULE_REQUEST_CONCURRENCY,
  type ModuleKind,
  type ModuleReply,
  type ModuleRequest,
  ownValue,
  packReply,
  RequestLimiter,
  requesterOf,
  resolutionKey,
  sourceBytes,
  sourceText,
  type Target,
} from './module-protocol.js';
import { GET_MODULE_SPEC } from './protocol/get-module.js';
import type { ImporterStats } from './protocol/module-stats.js';
import { openReply, serve } from './protocol/serve.js';
import type { Stream } from './stream.js';
import type { MessageSwitch } from './switch.js';

/** Specifier under which tendril's bundled modules ask for the core they run against. */
export const CORE_MODULE_ID = 'tendril:core';
/** Module forwarding's name for tendril's connection layer. */
export const CONNECTION_MODULE_ID = 'tendril:connection';
/** The SSH connection methods (src/connection/ssh-methods.ts), loaded by the connection layer when first used. */
export const SSH_MODULE_ID = 'tendril:ssh';
/** The container methods (src/connection/containers), loaded by the connection layer when first used. */
export const CONTAINERS_MODULE_ID = 'tendril:containers';
/** Module forwarding's name for tendril's services (commands, files), loaded in a context on its first use. */
export const TOOLKIT_MODULE_ID = 'tendril:toolkit';
/** How long a synchronous `require()` waits for its module, in ms. */
export const SYNC_FETCH_TIMEOUT = 30_000;

/** Counters of one context's module forwarding (defined with MODULE_STATS). */
export type { ImporterStats } from './protocol/module-stats.js';

/** Options of a context's importer. */
export interface ImporterOptions {
  /** Load bare specifiers installed on the target from there, and only fetch what is missing. */
  preferTargetModules: boolean;
  /** Sends a GET_MODULE request and blocks until its reply (for synchronous `require()`). */
  requestSync: (message: Message) => Message;
  /**
   * Set where no parent serves modules (a job, after it detached): the
   * error a module outside what was loaded beforehand fails with.
   */
  offline?: (specs: string[], from: string) => Error;
  /** Told of each built-in module loaded through this importer (see `ResolverWatch`). */
  onBuiltin?: (name: string) => void;
}

/** One specifier as written in a file, and how it is loaded. */
export interface ModuleUse {
  /** The file (or a shipped function's base) it is written in. */
  from: string;
  /** The specifier as written. */
  spec: string;
  /** Whether it is `require`d or `import`ed. */
  kind: ModuleKind;
}

/**
 * What an importer holds for some specifiers: their resolutions and every
 * file of their closures, so another process can load them with no parent
 * to ask (see `Importer.snapshot`).
 */
export interface ModuleSnapshot {
  /** `[resolutionKey, target]` pairs. */
  resolved: [string, Target][];
  /** Every file of their closures. */
  files: FileRecord[];
}

/** The error a native addon `require()` throws in a child. */
export class NativeModuleError extends TendrilError {
  /**
   * @param pkg package the addon belongs to.
   * @param path the addon's path on the master.
   */
  constructor(pkg: string, path: string) {
    super(
      `${path} is a native addon of package '${pkg}'; tendril never ships native code. Install '${pkg}' on the target and start the context with preferTargetModules: true`,
      'ERR_TENDRIL_NATIVE_MODULE',
    );
  }
}

/** Loaded modules and the `require` of each file: the context's shared one, or a call's own (`Importer.freshScope`). */
export interface ModuleScope {
  /** Loaded modules by path: what `require.cache` is in this scope. */
  readonly cache: Record<string, LoadedModule>;
  /** The `require` made for each file, so a file gets the same one every time. */
  readonly requires: Map<string, NodeJS.Require>;
}

/** A loaded module as `require.cache` holds it: a Node `Module`. */
interface LoadedModule {
  exports: unknown;
  loaded: boolean;
}

/**
 * Resolutions remembered at most, oldest forgotten first (then asked
 * again if needed): a child asking for endless unique names, or from
 * endless unique files, must not grow the context serving it.
 */
const MAX_REMEMBERED_RESOLUTIONS = 10_000;

/**
 * Asynchronous requests this context has out to its parent at once: within
 * what the parent lets one child have in flight (one left for a
 * synchronous `require()`), so a context that asks only through its
 * importer is never refused for being busy; more wait here.
 */
const MAX_OUTGOING_REQUESTS = MODULE_REQUEST_CONCURRENCY + MAX_WAITING_MODULE_REQUESTS - 1;

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
  /** What each request resolved to, by `resolutionKey`, oldest first. */
  private readonly resolved = new Map<string, Target>();
  /**
   * Loaded modules by path: every `require.cache` in this context is this
   * object, as in Node, so deleting an entry makes the next `require()`
   * evaluate the file again. No prototype: paths are data.
   */
  private readonly cache: Record<string, LoadedModule> = emptyRecord();
  /** The modules calls share: this context's `require.cache`, and the `require` made for each file. */
  private readonly shared: ModuleScope = { cache: this.cache, requires: new Map() };
  private readonly sentTo = new Map<number, Set<string>>();
  private readonly inflight = new Map<string, Promise<void>>();
  private readonly builtins: readonly string[];
  private readonly Module: new (
    id: string,
  ) => LoadedModule & Record<string, unknown>;
  /** GET_MODULE requests from children in flight, per child stream. */
  private readonly limiter = new RequestLimiter<Stream | number>();
  /** Asynchronous requests out to the parent, and those waiting for a turn (see `MAX_OUTGOING_REQUESTS`). */
  private outgoing = 0;
  private readonly turns: (() => void)[] = [];

  /**
   * @param core the core's exports, handed to modules that require `tendril:core`.
   * @param nativeRequire the context's own `require`, for built-ins and target-installed packages.
   */
  constructor(
    private readonly router: MessageSwitch,
    private readonly core: object,
    private readonly nativeRequire: NodeJS.Require,
    private readonly options: ImporterOptions,
  ) {
    const moduleApi = nativeRequire('module') as { builtinModules: string[] } & Importer['Module'];
    this.builtins = moduleApi.builtinModules;
    this.Module = moduleApi;
    // Files count as sent only once the reply carrying them has gone out.
    serve(router, GET_MODULE_SPEC, (request, message, stream) => this.answer(request, message, stream), {
      onSent: (reply, message) => this.markSent(requesterOf(this.router, message), reply as ModuleReply),
      replyRequired: true,
    });
    router.on('disconnect', (contextId) => this.sentTo.delete(contextId));
  }

  /**
   * A module cache of its own, for a call that loads its modules anew
   * (`CallOptions.fresh`): files already here are evaluated again in it,
   * not fetched again.
   */
  freshScope(): ModuleScope {
    return { cache: emptyRecord(), requires: new Map() };
  }

  /** A `require` for code in file `from` (a shipped function's base uses a file name in the base directory). */
  requireFrom(from: string, scope: ModuleScope = this.shared): NodeJS.Require {
    let require = scope.requires.get(from);
    if (require) return require;
    require = this.makeRequire(from, scope);
    scope.requires.set(from, require);
    return require;
  }

  private makeRequire(from: string, scope: ModuleScope): NodeJS.Require {
    const require = ((spec: string) => this.require(from, spec, scope)) as NodeJS.Require;
    require.resolve = ((spec: string) => {
      const target = this.targetFor(from, spec, 'require', true);
      if ('path' in target) return target.path;
      if ('builtin' in target) return target.builtin;
      return this.fail(target, spec, from);
    }) as NodeJS.RequireResolve;
    require.cache = scope.cache as NodeJS.Require['cache'];
    return require;
  }

  /** An `import()` for code in file `from`: resolves with the module namespace. */
  importFrom(from: string, scope: ModuleScope = this.shared): (spec: string) => Promise<unknown> {
    return (spec) => this.import(from, spec, scope);
  }

  /** `require(spec)` as written in file `from`; fetches synchronously if it must. */
  require(from: string, spec: string, scope: ModuleScope = this.shared): unknown {
    return this.load(this.targetFor(from, String(spec), 'require', true), spec, from, scope);
  }

  /** `import(spec)` as written in file `from`; fetches (asynchronously) if it must. */
  async import(from: string, spec: string, scope: ModuleScope = this.shared): Promise<unknown> {
    spec = String(spec);
    let target = this.knownTarget(from, spec, 'import');
    if (!target) {
      await this.fetch(from, [spec], 'import');
      target = this.knownTarget(from, spec, 'import') ?? unanswered(spec, from);
    }
    return namespaceOf(this.load(target, spec, from, scope));
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
   * Fetches what `uses` need that is not here yet (each `from` in one
   * round trip), then returns their resolutions and the files of their
   * closures: what a job carries so it loads them after it has detached.
   * @throws ModuleRequestError when the parent fails to answer.
   */
  async snapshot(uses: ModuleUse[]): Promise<ModuleSnapshot> {
    const groups = new Map<string, ModuleUse[]>();
    for (const use of uses) {
      const key = `${use.kind}\0${use.from}`;
      const group = groups.get(key);
      if (group) group.push(use);
      else groups.set(key, [use]);
    }
    await Promise.all(
      [...groups.values()].map((group) =>
        this.prefetch(
          group[0]?.from as string,
          group.map((use) => use.spec),
          group[0]?.kind as ModuleKind,
        ),
      ),
    );
    const resolved: [string, Target][] = [];
    const targets: Target[] = [];
    for (const { from, spec, kind } of uses) {
      // As this context would load it: a package installed on the target (preferTargetModules) by its path there.
      const target = this.knownTarget(from, spec, kind);
      if (!target) continue;
      resolved.push([resolutionKey(kind, from, spec), target]);
      targets.push(target);
    }
    const files: FileRecord[] = [];
    for (const path of closureOf(targets, (path) => this.files.get(path)?.deps)) {
      const file = this.files.get(path);
      if (file) files.push(file);
    }
    return { resolved, files };
  }

  /** Takes in what `snapshot` returned elsewhere: its files and resolutions are then known here. */
  restore(snapshot: ModuleSnapshot): void {
    for (const file of snapshot.files) if (!this.files.has(file.path)) this.files.set(file.path, file);
    for (const [key, target] of snapshot.resolved) this.remember(key, target);
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
    const fromFile = kind === 'require' ? ownValue(this.files.get(from)?.deps, spec) : undefined;
    return fromFile ?? this.resolved.get(resolutionKey(kind, from, spec));
  }

  private targetFor(from: string, spec: string, kind: ModuleKind, sync: boolean): Target {
    const known = this.knownTarget(from, spec, kind);
    if (known) return known;
    if (!sync) throw new Error('internal: asynchronous resolution requested synchronously');
    this.fetchSync(from, [spec], kind);
    return this.knownTarget(from, spec, kind) ?? unanswered(spec, from);
  }

  private load(target: Target, spec: string, from: string, scope: ModuleScope): unknown {
    if ('builtin' in target) {
      this.options.onBuiltin?.(target.builtin);
      return this.nativeRequire(target.builtin);
    }
    if ('core' in target) return this.core;
    if ('path' in target && !('native' in target)) return this.loadFile(target.path, scope);
    return this.fail(target, spec, from);
  }

  private fail(target: Target, spec: string, from: string): never {
    if ('native' in target) throw new NativeModuleError(target.native, target.path);
    if ('missing' in target) throw Object.assign(new Error(target.missing), { code: 'MODULE_NOT_FOUND' });
    if ('refused' in target) throw Object.assign(new Error(target.refused), { code: 'ERR_TENDRIL_MODULE_REFUSED' });
    throw new Error(`cannot load '${spec}' from ${from}`);
  }

  private loadFile(path: string, scope: ModuleScope): unknown {
    const cache = scope.cache;
    const cached = ownValue(cache, path);
    if (cached) return cached.exports;
    const record = this.files.get(path);
    if (!record) throw Object.assign(new Error(`module ${path} was not received`), { code: 'MODULE_NOT_FOUND' });
    if (record.format === 'error') {
      if (record.code !== undefined) throw Object.assign(new Error(record.source), { code: record.code });
      throw new SyntaxError(record.source);
    }
    const source = sourceText(record);
    const module = new this.Module(path);
    module.filename = path;
    module.paths = [];
    if (record.format === 'json') {
      module.exports = JSON.parse(source);
      module.loaded = true;
      cache[path] = module;
      return module.exports;
    }
    cache[path] = module;
    const dirname = path.slice(0, path.lastIndexOf('/')) || '/';
    try {
      const fn = vm.compileFunction(
        source,
        ['exports', 'require', 'module', '__filename', '__dirname', '__tendril_import', '__tendril_meta'],
        { filename: path },
      );
      const meta = { url: `file://${path}`, filename: path, dirname };
      fn.call(
        module.exports,
        module.exports,
        this.requireFrom(path, scope),
        module,
        path,
        dirname,
        this.importFrom(path, scope),
        meta,
      );
    } catch (error) {
      if (cache[path] === module) delete cache[path];
      throw error;
    }
    module.loaded = true;
    this.stats.modulesLoaded++;
    return module.exports;
  }

  /**
   * Fetches `specs` from the parent synchronously (blocking this thread
   * until each reply arrives), repeating the request while replies are
   * partial.
   * @throws ModuleRequestError when the parent answers with an error.
   */
  private fetchSync(from: string, specs: string[], kind: ModuleKind): void {
    if (this.options.offline) throw this.options.offline(specs, from);
    const request: ModuleRequest = { from, specs, kind };
    for (;;) {
      this.stats.requestsSent++;
      this.stats.syncRequests++;
      const message = Message.encoded(
        {
          dst: this.router.parentId,
          src: this.router.id,
          auth: this.router.id,
          handle: GET_MODULE_SPEC.handle,
          replyTo: 0,
        },
        request,
      );
      if (!this.accept(this.options.requestSync(message), from, kind)) return;
    }
  }

  /** Fetches `specs` and their closures from the parent; concurrent fetches of the same list share one. */
  private fetch(from: string, specs: string[], kind: ModuleKind): Promise<void> {
    if (this.options.offline) return Promise.reject(this.options.offline(specs, from));
    if (specs.length > MAX_SPECS_PER_REQUEST) {
      const parts: Promise<void>[] = [];
      for (let i = 0; i < specs.length; i += MAX_SPECS_PER_REQUEST)
        parts.push(this.fetch(from, specs.slice(i, i + MAX_SPECS_PER_REQUEST), kind));
      return Promise.all(parts).then(() => undefined);
    }
    const key = resolutionKey(kind, from, specs.join('\0'));
    let pending = this.inflight.get(key);
    if (!pending) {
      pending = this.fetchRounds(from, specs, kind).finally(() => this.inflight.delete(key));
      this.inflight.set(key, pending);
    }
    return pending;
  }

  /** Sends the same request until a reply is not partial. */
  private async fetchRounds(from: string, specs: string[], kind: ModuleKind): Promise<void> {
    const payload = encode({ from, specs, kind } satisfies ModuleRequest);
    for (;;) {
      await this.turn();
      let reply: Message;
      try {
        this.stats.requestsSent++;
        reply = await this.router.request(this.router.parentId, GET_MODULE_SPEC.handle, payload, {
          what: `fetching ${specs.join(', ')}`,
        });
      } finally {
        this.endTurn();
      }
      if (!this.accept(reply, from, kind)) return;
    }
  }

  /** Waits until fewer than `MAX_OUTGOING_REQUESTS` requests are out to the parent, and takes a place. */
  private turn(): Promise<void> {
    if (this.outgoing < MAX_OUTGOING_REQUESTS) {
      this.outgoing++;
      return Promise.resolve();
    }
    // The place of the request that ends hands over to this one: `outgoing` stays as it is.
    return new Promise((resolve) => this.turns.push(resolve));
  }

  private endTurn(): void {
    const next = this.turns.shift();
    if (next) next();
    else this.outgoing--;
  }

  /**
   * Takes in a reply: its files, then (in the last reply) its targets.
   * @returns true when the reply is partial: more files follow on the same request.
   * @throws ModuleRequestError when the reply reports an error, or is
   *   partial without bringing anything new (it would never end).
   */
  private accept(reply: Message, from: string, kind: ModuleKind): boolean {
    if (reply.isDead) throw new ModuleRequestError(`module request failed: ${deadReason(reply)}`);
    const { resolved, files, partial } = openReply(this.router, this.router.parentId, GET_MODULE_SPEC, reply);
    let received = 0;
    for (const file of files) {
      if (!this.files.has(file.path)) {
        this.files.set(file.path, file);
        this.stats.filesReceived++;
        this.stats.bytesReceived += sourceBytes(file);
        received++;
      }
    }
    if (partial === true) {
      if (received === 0) {
        throw new ModuleRequestError(`the parent sent a partial module reply with no new file (fetching from ${from})`);
      }
      return true;
    }
    for (const spec of Object.keys(resolved)) {
      this.remember(resolutionKey(kind, from, spec), resolved[spec] as Target);
    }
    return false;
  }

  /** Records what a specifier resolved to; only the latest `MAX_REMEMBERED_RESOLUTIONS` are kept. */
  private remember(key: string, target: Target): void {
    this.resolved.delete(key);
    this.resolved.set(key, target);
    if (this.resolved.size > MAX_REMEMBERED_RESOLUTIONS)
      this.resolved.delete(this.resolved.keys().next().value as string);
  }

  /** Records the files `reply` carried as sent to child `childId`. */
  private markSent(childId: number, reply: ModuleReply): void {
    if (reply.files.length === 0) return;
    let sent = this.sentTo.get(childId);
    if (!sent) {
      sent = new Set();
      this.sentTo.set(childId, sent);
    }
    for (const file of reply.files) {
      sent.add(file.path);
      this.stats.filesSent++;
      this.stats.bytesSent += sourceBytes(file);
    }
  }

  /**
   * The reply to a child's GET_MODULE message, from this context's cache,
   * fetching from the parent what is not there yet.
   * @throws ModuleRequestError when the child has too many requests waiting, or the parent's answer failed.
   */
  private async answer(request: ModuleRequest, message: Message, stream: Stream | undefined): Promise<ModuleReply> {
    const { from, specs, kind } = request;
    return this.limiter.run(
      stream ?? message.src,
      message.data.length,
      `context '${this.router.nameOf(message.src)}'`,
      async () => {
        const missing = specs.filter((spec) => !this.knownTarget(from, spec, kind, false));
        if (missing.length > 0) await this.fetch(from, missing, kind);
        this.stats.requestsServed++;
        if (missing.length === 0) this.stats.servedFromCache++;
        const resolved = emptyRecord<Target>();
        for (const spec of specs) resolved[spec] = this.knownTarget(from, spec, kind, false) ?? unanswered(spec, from);
        return packReply(
          resolved,
          this.unsentFiles(requesterOf(this.router, message), resolved),
          this.router.maxMessageSize,
        ).reply;
      },
    );
  }

  /** Files of the closure of `resolved` that child `childId` has not been sent yet, each fitted to a message. */
  private unsentFiles(childId: number, resolved: Record<string, Target>): FileRecord[] {
    const sent = this.sentTo.get(childId);
    const files: FileRecord[] = [];
    const targets = Object.keys(resolved).map((spec) => resolved[spec] as Target);
    for (const path of closureOf(targets, (path) => this.files.get(path)?.deps)) {
      const file = this.files.get(path);
      if (file && !sent?.has(path)) files.push(fitRecord(file, this.router.maxMessageSize));
    }
    return files;
  }
}

/** The target of a specifier the parent's reply said nothing about. */
function unanswered(spec: string, from: string): Target {
  return { missing: `Cannot find module '${spec}' from '${from}': the parent's reply did not resolve it` };
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
