import { existsSync, realpathSync, statSync } from 'node:fs';
import { builtinModules } from 'node:module';
import { dirname, join, sep } from 'node:path';
import { fileURLToPath } from 'node:url';
import { CALL_FILE } from '../core/dispatcher.js';
import { GET_MODULE } from '../core/handles.js';
import { CONNECTION_MODULE_ID, CORE_MODULE_ID } from '../core/importer.js';
import { logger } from '../core/log.js';
import type { Message } from '../core/message.js';
import {
  type FileRecord,
  isBareSpecifier,
  type ModuleKind,
  type ModuleReply,
  type ModuleRequest,
  type Target,
} from '../core/module-protocol.js';
import { fromChildStream } from '../core/policy.js';
import type { Router } from '../core/router.js';
import { assetPath } from './assets.js';
import { ModuleGraph } from './module-graph.js';
import { ModuleSources } from './module-source.js';

const debug = logger('responder');

/** Module forwarding counters of the master, per requesting context and in total. */
export interface ResponderStats {
  /** GET_MODULE requests answered. */
  requests: number;
  /** Files sent. */
  filesSent: number;
  /** Bytes of source sent. */
  bytesSent: number;
  /** Files read from disk (each at most once). */
  filesRead: number;
  /** Specifiers refused because they resolved outside the allowed roots. */
  refused: number;
  /** The same counters for each context that asked (a direct child, or an intermediate asking for its subtree). */
  byContext: Record<number, { requests: number; filesSent: number; bytesSent: number }>;
}

/** Called when a request is refused, with a message naming what and why. */
export type RefusalListener = (message: string) => void;

/**
 * The master's answer to GET_MODULE, and the only reader of module source
 * on disk. It resolves specifiers as the master would, sends each requester
 * the static closure of what it asked for minus the files it was already
 * sent, and serves only files under its roots: the packages of the
 * modules and base directories the program used, packages those reach by
 * name, and tendril itself. Anything else (`/etc/shadow`, `../../`, a
 * symlink out of a root) is refused and logged.
 */
export class ModuleResponder {
  private readonly roots = new Set<string>();
  /** Locations already passed to `trust`, so repeated calls cost no file system work. */
  private readonly trusted = new Set<string>();
  /** Files shipped functions were told to resolve from, for error messages. */
  private readonly callBases = new Set<string>();
  private readonly sentTo = new Map<number, Set<string>>();
  private readonly sources = new ModuleSources();
  private readonly graph: ModuleGraph;
  private readonly connectionPath: string;
  private readonly counters = { requests: 0, filesSent: 0, bytesSent: 0, refused: 0 };
  private readonly byContext: ResponderStats['byContext'] = {};

  /**
   * @param router the master's router; GET_MODULE is served on it.
   * @param onRefusal told about every refused specifier.
   */
  constructor(
    private readonly router: Router,
    private readonly onRefusal: RefusalListener,
  ) {
    this.connectionPath = realpathSync(assetPath('connection.cjs'));
    this.trust(fileURLToPath(new URL('../', import.meta.url)));
    this.graph = new ModuleGraph(
      builtinModules,
      (spec, importer, resolved) => this.check(spec, importer, resolved),
      (spec) => this.preset(spec),
    );
    router.addHandler((message) => void this.onGetModule(message), {
      handle: GET_MODULE,
      policy: fromChildStream(router),
    });
  }

  /** Prepares module analysis before it is first needed (see `ModuleGraph.warm`). */
  warm(): void {
    this.graph.warm();
  }

  /** Stops the helper process module analysis uses; called at router shutdown. */
  close(): Promise<void> {
    return this.graph.close();
  }

  /** Counters so far. */
  stats(): ResponderStats {
    return { ...this.counters, filesRead: this.sources.filesRead, byContext: structuredClone(this.byContext) };
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
   * Allows serving the package `location` lies in (the nearest directory
   * with a package.json, or the location's own directory). Returns the
   * location unchanged. Specifiers that are not paths are ignored: they are
   * resolved from a trusted base.
   */
  trust(location: string): string {
    if (!location.startsWith(sep) || this.trusted.has(location)) return location;
    if (this.trusted.size >= 10_000) this.trusted.clear();
    this.trusted.add(location);
    let dir = location;
    try {
      if (statSync(location).isFile()) dir = dirname(location);
    } catch {
      dir = dirname(location);
    }
    for (let probe = dir; ; probe = dirname(probe)) {
      if (existsSync(join(probe, 'package.json'))) {
        dir = probe;
        break;
      }
      if (dirname(probe) === probe) break;
    }
    try {
      const root = realpathSync(dir);
      // A base with no package above it up to `/` must not make the whole file system servable.
      if (root === sep) {
        debug('not serving %s: the only directory it could stand for is /', location);
        return location;
      }
      this.roots.add(root);
    } catch {
      // A base that does not exist has nothing to serve.
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
    if (spec === CORE_MODULE_ID || spec === 'tendril') return { core: true };
    if (spec === CONNECTION_MODULE_ID) return { path: this.connectionPath };
    return undefined;
  }

  private inRoots(path: string): boolean {
    for (const root of this.roots)
      if (path === root || path.startsWith(root === sep ? sep : `${root}${sep}`)) return true;
    return false;
  }

  /** Why `resolved` (reached as `spec` from `importer`) may not be served, or undefined if it may. */
  private check(spec: string, importer: string, resolved: string): string | undefined {
    let real: string;
    try {
      real = realpathSync(resolved);
    } catch {
      real = resolved;
    }
    if (this.inRoots(real)) return undefined;
    // A package reached by name from served code is one the master itself would load.
    if (isBareSpecifier(spec) && this.inRoots(dirname(importer))) {
      this.trust(real);
      return undefined;
    }
    this.counters.refused++;
    const reason = `the master refused to serve '${spec}' (resolved to ${real}, required from ${importer}): it is outside the module roots it serves (${[...this.roots].join(', ')}); pass the directory in the Router's moduleRoots option to allow it`;
    debug('%s', reason);
    this.onRefusal(reason);
    return reason;
  }

  private async onGetModule(message: Message): Promise<void> {
    let request: ModuleRequest | undefined;
    let reply: ModuleReply;
    try {
      request = message.unpack() as ModuleRequest;
      reply = await this.answer(message.src, request);
    } catch (error) {
      const resolved: Record<string, Target> = {};
      for (const spec of Array.isArray(request?.specs) ? request.specs : []) {
        resolved[String(spec)] = { missing: `could not resolve '${spec}': ${(error as Error).message}` };
      }
      reply = { resolved, files: [] };
    }
    this.router.reply(message, reply);
  }

  private async answer(requester: number, request: ModuleRequest): Promise<ModuleReply> {
    if (
      typeof request?.from !== 'string' ||
      !Array.isArray(request.specs) ||
      !request.specs.every((spec) => typeof spec === 'string') ||
      (request.kind !== 'require' && request.kind !== 'import')
    ) {
      throw new Error('malformed GET_MODULE request');
    }
    const { from, specs, kind } = request as { from: string; specs: string[]; kind: ModuleKind };
    this.counters.requests++;
    this.byContext[requester] ??= { requests: 0, filesSent: 0, bytesSent: 0 };
    const perContext = this.byContext[requester];
    perContext.requests++;
    // Requests must come from where served code lives; tendril's own modules may be asked for from anywhere.
    const trustedFrom = this.inRoots(safeRealpath(dirname(from)));
    const allowed = specs.filter((spec) => trustedFrom || this.preset(spec));
    const resolved: Record<string, Target> = {};
    for (const spec of specs) {
      if (!allowed.includes(spec)) {
        this.counters.refused++;
        const reason = `the master refused to resolve '${spec}' from ${from}: that location is outside the module roots it serves (${[...this.roots].join(', ')}); pass its directory in the Router's moduleRoots option to allow it`;
        this.onRefusal(reason);
        resolved[spec] = { refused: reason };
      }
    }
    const result = await this.graph.resolve(from, allowed, kind);
    Object.assign(resolved, result.resolved);
    for (const spec of allowed) resolved[spec] ??= { missing: `Cannot find module '${spec}' from '${from}'` };
    if (this.callBases.has(from)) {
      for (const spec of allowed) {
        if (resolved[spec] && 'missing' in (resolved[spec] as Target))
          resolved[spec] = { missing: notFromCall(spec, from) };
      }
    }
    let sent = this.sentTo.get(requester);
    if (!sent) {
      sent = new Set();
      this.sentTo.set(requester, sent);
    }
    const files: FileRecord[] = [];
    for (const path of result.closure) {
      if (sent.has(path)) continue;
      sent.add(path);
      files.push(await this.record(path));
    }
    for (const file of files) {
      this.counters.filesSent++;
      this.counters.bytesSent += file.source.length;
      perContext.filesSent++;
      perContext.bytesSent += file.source.length;
    }
    debug('context %d: %o from %s -> %d files', requester, specs, from, files.length);
    return { resolved, files };
  }

  private async record(path: string): Promise<FileRecord> {
    const deps = this.graph.deps.get(path) ?? {};
    const broken = this.graph.broken.get(path);
    if (broken) return { path, format: 'error', source: broken, deps };
    const { format, source } = await this.sources.get(path);
    return { path, format, source, deps };
  }
}

/** Why `spec` was not found from a shipped function's base, and how to resolve it from elsewhere. */
function notFromCall(spec: string, from: string): string {
  const where = from.endsWith(CALL_FILE) ? `the directory ${dirname(from)}` : `the module ${from}`;
  return `Cannot find module '${spec}': the master resolved it as if required from ${where} (a shipped function's require() and import() resolve from the module that defines it, else the main module); pass \`base\` to context.callWith() or to the Router to resolve from elsewhere, or install the package there`;
}

function safeRealpath(path: string): string {
  try {
    return realpathSync(path);
  } catch {
    return path;
  }
}
