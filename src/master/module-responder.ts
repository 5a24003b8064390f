import { existsSync, readFileSync, realpathSync, statSync } from 'node:fs';
import { builtinModules } from 'node:module';
import { homedir } from 'node:os';
import { basename, dirname, isAbsolute, join, resolve as resolvePath, sep } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { deflateRaw } from 'node:zlib';
import { CALL_FILE } from '../core/call-base.js';
import {
  CONNECTION_MODULE_ID,
  CONTAINERS_MODULE_ID,
  CORE_MODULE_ID,
  SSH_MODULE_ID,
  TOOLKIT_MODULE_ID,
} from '../core/importer.js';
import { logger } from '../core/log.js';
import type { Message } from '../core/message.js';
import {
  bareSpecifierPackage,
  emptyRecord,
  type FileRecord,
  fitRecord,
  hasDotSegments,
  isBareSpecifier,
  type ModuleReply,
  type ModuleRequest,
  ownValue,
  packReply,
  RequestLimiter,
  requesterOf,
  sourceBytes,
  type Target,
} from '../core/module-protocol.js';
import { GET_MODULE_SPEC } from '../core/protocol/get-module.js';
import { serve } from '../core/protocol/serve.js';
import type { Stream } from '../core/stream.js';
import type { MessageSwitch } from '../core/switch.js';
import { assetPath } from './assets.js';
import { dotSegment, type ModuleFilter, moduleVerdict, realpathOrUndefined, within } from './module-files.js';
import type { ModuleGraph } from './module-graph.js';
import type { ModuleSources, ShippedSource } from './module-source.js';

const debug = logger('responder');
const deflate = promisify(deflateRaw);

/** Files from this size on travel compressed, in bytes: smaller ones gain too little. */
const COMPRESS_FROM = 1024;

/** Module analysis: esbuild's resolver and the lexer behind it, loaded on the first request that needs them. */
interface Analysis {
  graph: ModuleGraph;
  sources: ModuleSources;
}

/** Module forwarding counters of the master, per requesting context and in total. */
export interface ResponderStats {
  /** GET_MODULE requests answered (each round of a reply split into several counts once). */
  requests: number;
  /** Files sent. */
  filesSent: number;
  /** Bytes of source sent, as they travelled (files over 1 KiB go compressed). */
  bytesSent: number;
  /** Files read from disk (each at most once). */
  filesRead: number;
  /** Specifiers refused: resolved outside the roots, or to a file inside them that is not a module served. */
  refused: number;
  /** Requests answered at once with an error because their requester had too many waiting. */
  busy: number;
  /** The same counters for each context that asked (a direct child, or an intermediate asking for its subtree). */
  byContext: Record<number, { requests: number; filesSent: number; bytesSent: number }>;
}

/** Called when a request is refused, with a message naming what and why. */
export type RefusalListener = (message: string) => void;

/** Roots listed in a refusal message; more are summarised, so replies stay small. */
const ROOTS_LISTED = 5;

/**
 * The master's answer to GET_MODULE, and the only reader of module source
 * on disk. It resolves specifiers as the master would, sends each requester
 * the static closure of what it asked for minus the files it was already
 * sent, and serves only files under its roots: the packages of the
 * modules and base directories the program used, packages those reach by
 * name, and tendril itself. Anything else (`/etc/shadow`, `../../`, a
 * symlink out of a root, `dep/../../x`) is refused and logged. Inside the
 * roots it serves only what a module system loads (see `moduleVerdict`),
 * unless the program's `moduleFilter` decides otherwise: never `.git/config`,
 * `.env`, `id_rsa` or `key.pem`. Every file passes `servable` before it is
 * read, however it was reached, and no error it sends quotes a file's text.
 *
 * A child controls what it asks, so everything it can make the master hold
 * is bounded: requests are resolved a few at a time per child stream, a
 * bounded number wait, and the rest are answered at once with an error;
 * replies never exceed `maxMessageSize` (a large closure is sent in several
 * replies); no object is keyed by a specifier with a prototype to pollute.
 */
export class ModuleResponder {
  private readonly roots = new Set<string>();
  /** Locations already passed to `trust`, so repeated calls cost no file system work. */
  private readonly trusted = new Set<string>();
  /** Files shipped functions were told to resolve from, for error messages. */
  private readonly callBases = new Set<string>();
  /** Per requesting context, the files it was sent (after the reply carrying them was). */
  private readonly sentTo = new Map<number, Set<string>>();
  private readonly records = new Map<string, Promise<FileRecord>>();
  private analysis: Promise<Analysis> | undefined;
  private sources: ModuleSources | undefined;
  private layersRead = 0;
  /** tendril's own layers (`tendril:connection`...) by specifier: built to be shipped as they are. */
  private readonly layers = new Map<string, string>();
  private readonly layerPaths = new Set<string>();
  private readonly counters = { requests: 0, filesSent: 0, bytesSent: 0, refused: 0, busy: 0 };
  private readonly byContext = new Map<number, { requests: number; filesSent: number; bytesSent: number }>();
  /** Requests in flight per child stream (a child speaks for its whole subtree, whatever IDs it uses). */
  private readonly limiter = new RequestLimiter<Stream | number>();

  /**
   * @param router the master's router; GET_MODULE is served on it.
   * @param onRefusal told about every refused specifier.
   * @param filter the Router's `moduleFilter`: decides which files inside the roots are served.
   */
  constructor(
    private readonly router: MessageSwitch,
    private readonly onRefusal: RefusalListener,
    private readonly filter?: ModuleFilter,
  ) {
    for (const [spec, file] of [
      [CONNECTION_MODULE_ID, 'connection.cjs'],
      [SSH_MODULE_ID, 'ssh.cjs'],
      [CONTAINERS_MODULE_ID, 'containers.cjs'],
      [TOOLKIT_MODULE_ID, 'toolkit.cjs'],
    ] as const) {
      const path = realpathSync(assetPath(file));
      this.layers.set(spec, path);
      this.layerPaths.add(path);
    }
    // The bundle's own directory (dist/): tendril itself is served.
    this.trust(fileURLToPath(new URL('./', import.meta.url)));
    // Files count as sent only once the reply carrying them has gone out.
    serve(router, GET_MODULE_SPEC, (request, message, stream) => this.answer(request, message, stream), {
      onSent: (reply, message) => this.markSent(requesterOf(this.router, message), reply as ModuleReply),
      // Nothing could tell the child what was resolved, or mark files as sent: not worth any work.
      replyRequired: true,
    });
    // A context that is gone asks nothing more; what it was sent need not be remembered.
    router.on('disconnect', (contextId) => this.sentTo.delete(contextId));
  }

  /**
   * Module analysis, loaded on first use: a program whose children never
   * ask for a module of its own never loads esbuild or starts its helper
   * process.
   */
  private analyse(): Promise<Analysis> {
    this.analysis ??= Promise.all([import('./module-graph.js'), import('./module-source.js')]).then(
      ([{ ModuleGraph }, { ModuleSources }]) => {
        this.sources = new ModuleSources();
        const graph = new ModuleGraph(
          builtinModules,
          (spec, importer, resolved) => this.check(spec, importer, resolved),
          (spec) => this.preset(spec),
        );
        return { graph, sources: this.sources };
      },
    );
    return this.analysis;
  }

  /** Stops the helper process module analysis uses, if it was started; called at router shutdown. */
  async close(): Promise<void> {
    // Analysis that could not be loaded started nothing; its requests already failed.
    const analysis = await this.analysis?.catch(() => undefined);
    await analysis?.graph.close();
  }

  /** Counters so far. */
  stats(): ResponderStats {
    const byContext: ResponderStats['byContext'] = {};
    for (const [contextId, counts] of this.byContext) byContext[contextId] = { ...counts };
    return { ...this.counters, filesRead: this.layersRead + (this.sources?.filesRead ?? 0), byContext };
  }

  /**
   * Allows serving everything under `dir`, exactly (the Router's
   * `moduleRoots` option): the program asked for it, so even `/` is taken.
   */
  addRoot(dir: string): void {
    try {
      this.roots.add(realpathSync(dir));
    } catch {
      // A root that does not exist has nothing to serve.
    }
  }

  /**
   * Allows serving the package `location` lies in: the nearest directory
   * with a package.json at or above it, else the location's own directory
   * (a file's directory). A directory implicitly taken is never `/`, a
   * home directory or a parent of one (see `tooBroad`): then the
   * location's own directory is taken instead, and if that too is too
   * broad, only the location itself when it is a file. When the
   * location's directory lies in a dot-directory below that package (a
   * build in `.output/server/`), that directory is a root too, so the
   * location and what lies beside and below it are served, dot segments
   * being judged below it. Only the program's own locations come here (a
   * module passed to `context.import()`, a call's or the Router's
   * `base`), never what a child names. Returns the location unchanged.
   * Specifiers that are not paths are ignored: they are resolved from a
   * trusted base.
   */
  trust(location: string): string {
    if (!location.startsWith(sep) || this.trusted.has(location)) return location;
    if (this.trusted.size >= 10_000) this.trusted.clear();
    this.trusted.add(location);
    let dir = location;
    let file: string | undefined;
    try {
      if (statSync(location).isFile()) {
        dir = dirname(location);
        file = location;
      }
    } catch {
      dir = dirname(location);
    }
    const own = realpathOrUndefined(dir);
    // A base that does not exist has nothing to serve.
    if (own === undefined) return location;
    const manifestDir = nearestPackageDirectory(dir);
    const pkg = manifestDir === undefined ? undefined : realpathOrUndefined(manifestDir);
    const root = pkg !== undefined && !tooBroad(pkg) ? pkg : own;
    if (!tooBroad(root)) {
      this.roots.add(root);
      // A build the program names in a dot-directory of its package (`.output/server/index.mjs`):
      // below the package, every file there is in a dot-directory, so its own directory is a root too.
      if (own !== root && within(own, root) && dotSegment(own, root) !== undefined) this.roots.add(own);
      return location;
    }
    if (file !== undefined) {
      const real = realpathOrUndefined(file) ?? file;
      debug(
        'serving only %s: its directory %s is too broad to serve (/, a home directory or a parent of one)',
        real,
        root,
      );
      this.roots.add(real);
    } else {
      debug('not serving %s: the only directory it could stand for, %s, is too broad to serve', location, root);
    }
    return location;
  }

  /** Records that shipped functions resolve from `file`, so a failure to resolve there can say how to change it. */
  noteCallBase(file: string): void {
    if (this.callBases.has(file)) return;
    if (this.callBases.size >= 1000) this.callBases.delete(this.callBases.values().next().value as string);
    this.callBases.add(file);
  }

  private preset(spec: string): Target | undefined {
    // In a child, tendril and its `tendril/child` entry are the core already running there.
    if (spec === CORE_MODULE_ID || spec === 'tendril' || spec === 'tendril/child') return { core: true };
    const layer = this.layers.get(spec);
    return layer === undefined ? undefined : { path: layer };
  }

  private inRoots(path: string): boolean {
    return this.rootsOf(path).length > 0;
  }

  /** The roots `path` lies in (it may lie in several: a package inside the program's own). */
  private rootsOf(path: string): string[] {
    const roots: string[] = [];
    for (const root of this.roots) if (within(path, root)) roots.push(root);
    return roots;
  }

  /** True when `file` (an absolute path, normalized) is served, so specifiers written in it may be resolved. */
  private servesFrom(file: string): boolean {
    if (!isAbsolute(file)) return false;
    // A pseudo-file (a call's base directory + '[tendril call]') does not exist: its directory does.
    const real = realpathOrUndefined(file) ?? join(realpathOrUndefined(dirname(file)) ?? dirname(file), basename(file));
    return this.inRoots(real);
  }

  private describeRoots(): string {
    const roots = [...this.roots];
    const listed = roots.slice(0, ROOTS_LISTED).join(', ');
    return roots.length > ROOTS_LISTED ? `${listed} and ${roots.length - ROOTS_LISTED} more` : listed;
  }

  /**
   * Counts and reports a refusal; returns `reason`, the text the child is
   * told. `detail`, for the master's warning only, is what the program's
   * own filter threw (which a child has no business reading).
   */
  private refuse(reason: string, detail?: string): string {
    this.counters.refused++;
    const told = detail === undefined ? reason : `${reason} (${detail})`;
    debug('%s', told);
    this.onRefusal(told);
    return reason;
  }

  /** Why `resolved` (reached as `spec` from `importer`) may not be served, or undefined if it may. */
  private check(spec: string, importer: string, resolved: string): string | undefined {
    const real = realpathOrUndefined(resolved) ?? resolved;
    const bare = isBareSpecifier(spec);
    if (bare && hasDotSegments(spec)) return this.refuseDotSegments(spec, importer);
    const what = `'${spec}' (resolved to ${real}, required from ${importer})`;
    if (!this.inRoots(real)) {
      // A package reached by name from served code is one the master itself would load: serve that package's directory.
      if (!bare || !this.servesFrom(importer)) return this.refuseOutside(what);
      const pkg = packageDirectory(bareSpecifierPackage(spec), importer, real);
      if (pkg === undefined) {
        return this.refuse(
          `the master refused to serve ${what}: that file is not inside the directory of package '${bareSpecifierPackage(spec)}' (node_modules/${bareSpecifierPackage(spec)}), so the name does not vouch for it; pass its directory in the Router's moduleRoots option to allow it`,
        );
      }
      this.roots.add(pkg);
    }
    const refusal = this.kindRefusal(real);
    return refusal && this.refuse(`the master refused to serve ${what}: ${refusal.reason}`, refusal.detail);
  }

  private refuseOutside(what: string): string {
    return this.refuse(
      `the master refused to serve ${what}: it is outside the module roots it serves (${this.describeRoots()}); pass the directory in the Router's moduleRoots option to allow it`,
    );
  }

  /**
   * Why the file at `path` may not be read for a child, or undefined if it
   * may: what `readRecord` asks before reading any file, as `check` (the
   * graph's policy) does before esbuild parses one, so a file reached any
   * way (a specifier, a static closure, a preload list) is judged by the
   * same rule (`kindRefusal`). Files reach here already checked by
   * `check`; this holds if a future path forgets to.
   */
  private servable(path: string): string | undefined {
    const real = realpathOrUndefined(path) ?? path;
    if (!this.inRoots(real)) return this.refuseOutside(real);
    const refusal = this.kindRefusal(real);
    return refusal && this.refuse(`the master refused to serve ${real}: ${refusal.reason}`, refusal.detail);
  }

  /**
   * Why the file at `real`, inside the roots, is not a module served
   * (tendril's verdict, as the program's `moduleFilter` amends it), or
   * undefined when it is. `reason` says how to allow it; `detail` is for
   * the master only.
   */
  private kindRefusal(real: string): { reason: string; detail?: string } | undefined {
    const verdict = moduleVerdict(real, this.rootsOf(real));
    if (this.filter === undefined) {
      return verdict.served
        ? undefined
        : { reason: `${verdict.reason}; the Router's moduleFilter option can serve it` };
    }
    let served: unknown;
    try {
      served = this.filter(real, { ...verdict });
    } catch (error) {
      return {
        reason: "the Router's moduleFilter threw on it (the master's warning says what)",
        detail: `moduleFilter threw: ${(error as Error)?.message ?? String(error)}`,
      };
    }
    if (served === true) return undefined;
    if (served !== false) return { reason: `the Router's moduleFilter returned ${typeof served}, not a boolean` };
    return {
      reason: verdict.served
        ? "the Router's moduleFilter refused it"
        : `${verdict.reason}, and the Router's moduleFilter did not serve it`,
    };
  }

  private refuseDotSegments(spec: string, importer: string): string {
    return this.refuse(
      `the master refused to serve '${spec}' (required from ${importer}): a package specifier may not have '.' or '..' path segments, which could name a file outside the package`,
    );
  }

  /** Records the files `reply` carried as sent to `requester`. */
  private markSent(requester: number, reply: ModuleReply): void {
    if (reply.files.length === 0) return;
    let sent = this.sentTo.get(requester);
    if (!sent) {
      sent = new Set();
      this.sentTo.set(requester, sent);
    }
    const perContext = this.contextCounters(requester);
    for (const file of reply.files) {
      sent.add(file.path);
      this.counters.filesSent++;
      this.counters.bytesSent += sourceBytes(file);
      perContext.filesSent++;
      perContext.bytesSent += sourceBytes(file);
    }
  }

  private contextCounters(contextId: number): { requests: number; filesSent: number; bytesSent: number } {
    let counts = this.byContext.get(contextId);
    if (!counts) {
      counts = { requests: 0, filesSent: 0, bytesSent: 0 };
      this.byContext.set(contextId, counts);
    }
    return counts;
  }

  /**
   * The reply to a GET_MODULE message.
   * @throws ModuleRequestError when its requester has too many requests waiting.
   */
  private async answer(request: ModuleRequest, message: Message, stream: Stream | undefined): Promise<ModuleReply> {
    const requester = requesterOf(this.router, message);
    const name = this.router.nameOf(requester);
    this.counters.requests++;
    this.contextCounters(requester).requests++;
    try {
      return await this.limiter.run(stream ?? message.src, message.data.length, `context '${name}'`, () =>
        this.resolve(requester, request),
      );
    } catch (error) {
      if ((error as { code?: string }).code === 'ERR_TENDRIL_MODULE_REQUEST') this.counters.busy++;
      throw error;
    }
  }

  /** Resolves a valid request and packs what `requester` lacks under `maxMessageSize`. */
  private async resolve(requester: number, request: ModuleRequest): Promise<ModuleReply> {
    const { specs, kind } = request;
    // Resolution works on the normalized path, so `/root/dir/../../etc/x` is judged as `/etc/x`.
    const from = isAbsolute(request.from) ? resolvePath(request.from) : request.from;
    // Requests must come from where served code lives; tendril's own modules may be asked for from anywhere.
    const trustedFrom = this.servesFrom(from);
    const resolved = emptyRecord<Target>();
    const allowed: string[] = [];
    for (const spec of specs) {
      // Refused before resolving: the resolver may not even find what `dep/%2e%2e/x` names, but it is no less refused.
      if (trustedFrom && isBareSpecifier(spec) && hasDotSegments(spec))
        resolved[spec] = { refused: this.refuseDotSegments(spec, request.from) };
      else if (trustedFrom || this.preset(spec)) allowed.push(spec);
      else {
        resolved[spec] = {
          refused: this.refuse(
            `the master refused to resolve '${spec}' from ${request.from}: that location is outside the module roots it serves (${this.describeRoots()}); pass its directory in the Router's moduleRoots option to allow it`,
          ),
        };
      }
    }
    // tendril's own layers need no analysis: each is one file, built with its dependencies inside.
    const closure: string[] = [];
    const analysed = allowed.filter((spec) => {
      const target = this.preset(spec);
      if (target === undefined) return true;
      resolved[spec] = target;
      if ('path' in target) closure.push(target.path);
      return false;
    });
    if (analysed.length > 0) {
      const result = await (await this.analyse()).graph.resolve(from, analysed, kind);
      const fromCall = this.callBases.has(from);
      for (const spec of analysed) {
        let target = ownValue(result.resolved, spec) ?? { missing: `Cannot find module '${spec}' from '${from}'` };
        if (fromCall && 'missing' in target) target = { missing: notFromCall(spec, from) };
        resolved[spec] = target;
      }
      closure.push(...result.closure);
    }
    const sent = this.sentTo.get(requester);
    const pending: FileRecord[] = [];
    for (const path of new Set(closure)) {
      if (!sent?.has(path)) pending.push(fitRecord(await this.record(path), this.router.maxMessageSize));
    }
    const { reply } = packReply(resolved, pending, this.router.maxMessageSize);
    debug(
      'context %d: %o from %s -> %d files%s',
      requester,
      specs,
      from,
      reply.files.length,
      reply.partial ? ' (partial)' : '',
    );
    return reply;
  }

  private record(path: string): Promise<FileRecord> {
    let record = this.records.get(path);
    if (!record) {
      record = this.readRecord(path);
      this.records.set(path, record);
    }
    return record;
  }

  private async readRecord(path: string): Promise<FileRecord> {
    if (this.layerPaths.has(path)) return compress({ path, deps: this.layerDeps(path), ...this.readLayer(path) });
    const { graph, sources } = await this.analyse();
    const refusal = this.servable(path);
    if (refusal !== undefined) {
      return { path, format: 'error', source: refusal, deps: emptyRecord(), code: 'ERR_TENDRIL_MODULE_REFUSED' };
    }
    const deps = graph.deps.get(path) ?? emptyRecord<Target>();
    const broken = graph.broken.get(path);
    if (broken) return { path, format: 'error', source: broken, deps };
    const { format, source } = await sources.get(path);
    return compress({ path, format, source, deps });
  }

  /** What a layer requires besides Node built-ins and the core: the SSH and container methods run on the connection layer. */
  private layerDeps(path: string): Record<string, Target> {
    const deps = emptyRecord<Target>();
    const connection = this.layers.get(CONNECTION_MODULE_ID);
    const onConnection = path === this.layers.get(SSH_MODULE_ID) || path === this.layers.get(CONTAINERS_MODULE_ID);
    if (onConnection && connection !== undefined) deps[CONNECTION_MODULE_ID] = { path: connection };
    return deps;
  }

  /**
   * A layer as bootstrap/build.mjs wrote it: already in shipped form (its
   * dynamic imports renamed), requiring only Node built-ins and the core,
   * which every context resolves by itself.
   */
  private readLayer(path: string): ShippedSource {
    try {
      const source = readFileSync(path, 'utf8');
      this.layersRead++;
      return { format: 'cjs', source };
    } catch (error) {
      return { format: 'error', source: `cannot read ${path}: ${(error as Error).message}` };
    }
  }
}

/** `file` with its text compressed, when it is large enough to gain from it. */
async function compress(file: FileRecord): Promise<FileRecord> {
  if (file.format === 'error' || file.source.length < COMPRESS_FROM) return file;
  const deflated = await deflate(file.source);
  return deflated.length < Buffer.byteLength(file.source) ? { ...file, source: '', deflated } : file;
}

/** Why `spec` was not found from a shipped function's base, and how to resolve it from elsewhere. */
function notFromCall(spec: string, from: string): string {
  const where = from.endsWith(CALL_FILE) ? `the directory ${dirname(from)}` : `the module ${from}`;
  return `Cannot find module '${spec}': the master resolved it as if required from ${where} (a shipped function's require() and import() resolve from the module that defines it, else the main module); pass \`base\` to context.callWith() or to the Router to resolve from elsewhere, or install the package there`;
}

/** The nearest directory at or above `dir` holding a package.json. */
function nearestPackageDirectory(dir: string): string | undefined {
  for (let probe = dir; ; probe = dirname(probe)) {
    if (existsSync(join(probe, 'package.json'))) return probe;
    if (dirname(probe) === probe) return undefined;
  }
}

/**
 * True for directories never taken as a root implicitly (only when named
 * in `moduleRoots`): `/`, a home directory (this user's, `/root`, any
 * `/home/<user>` or `/Users/<user>`) and their parents. A program's base
 * or package there would otherwise let children read every file below
 * (SSH keys, shell history, tokens in dotfiles).
 */
function tooBroad(dir: string): boolean {
  if (dir === sep || dir === '/root' || /^\/(?:home|Users)(?:\/[^/]+)?$/.test(dir)) return true;
  const home = homedir();
  for (const candidate of [home, realpathOrUndefined(home)]) {
    if (candidate && within(candidate, dir)) return true;
  }
  return false;
}

/**
 * The directory of package `name` as Node would find it from `importer`
 * (`<ancestor>/node_modules/<name>`, by real path) when `real` lies inside
 * it; undefined when it does not, or when that directory would be too
 * broad to serve.
 */
function packageDirectory(name: string, importer: string, real: string): string | undefined {
  for (let dir = dirname(importer); ; dir = dirname(dir)) {
    if (basename(dir) !== 'node_modules') {
      const candidate = realpathOrUndefined(join(dir, 'node_modules', name));
      if (candidate !== undefined && within(real, candidate)) return tooBroad(candidate) ? undefined : candidate;
    }
    if (dirname(dir) === dir) return undefined;
  }
}
