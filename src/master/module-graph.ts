import { dirname, join, resolve as resolvePath } from 'node:path';
import type { Plugin } from 'esbuild';
import {
  closureOf,
  emptyRecord,
  isBuiltinSpecifier,
  type ModuleKind,
  packageNameOf,
  type Target,
} from '../core/module-protocol.js';
import { readRegularFile } from '../core/regular-file.js';
import { loadEsbuild, stopEsbuild } from './esbuild.js';
import { describeBuildError, describeLocatedError } from './module-source.js';

/**
 * Decides whether a resolved file may be shipped (where it lies and what
 * kind of file it is); returns the reason when it may not. Nothing of a
 * file is read before it says yes.
 */
export type ServePolicy = (spec: string, importer: string, resolved: string) => string | undefined;

/** Specifiers every child already has, and what they stand for. */
export type Preset = (spec: string) => Target | undefined;

const STDIN = '<tendril request>';
/** Extensions esbuild parses by its own loader; any other file the policy admits is parsed as JavaScript. */
const OWN_LOADER = /\.(?:[cm]?[jt]s|tsx|json)$/;

/** Module graphs not yet closed: esbuild's helper process is stopped when the last one closes. */
let open = 0;

/**
 * The master's view of the module graph: resolves specifiers the way Node
 * would (exports and imports maps, conditions per `require` or `import`,
 * self-references, symlinks to real paths) and finds every file statically
 * reachable from them, using esbuild's resolver and parser. Dynamic
 * `import()` and `require.resolve()` are left for later, lazy requests.
 *
 * Each file is analysed once; later requests reuse what is known and only
 * walk files not seen before.
 */
export class ModuleGraph {
  /** Resolved static dependencies of every analysed file (null-prototype records: specifiers are data). */
  readonly deps = new Map<string, Record<string, Target>>();
  /** Files that could not be parsed, with the message to throw when loaded. */
  readonly broken = new Map<string, string>();

  /**
   * @param builtins names of Node's built-in modules.
   * @param policy decides whether a resolved file may be shipped.
   * @param preset targets of specifiers every child already has.
   */
  constructor(
    private readonly builtins: readonly string[],
    private readonly policy: ServePolicy,
    private readonly preset: Preset,
  ) {
    open++;
  }

  private closed = false;

  /**
   * Releases esbuild's helper process once no graph in this process needs
   * it (esbuild starts it again if anything else uses esbuild later).
   */
  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    if (--open === 0) await stopEsbuild();
  }

  /**
   * Resolves `specs` as written in file `from` and returns their targets and
   * the paths of their static closure.
   */
  async resolve(
    from: string,
    specs: string[],
    kind: ModuleKind,
  ): Promise<{ resolved: Record<string, Target>; closure: string[] }> {
    const resolved = emptyRecord<Target>();
    const pending: string[] = [];
    for (const spec of specs) {
      const preset = this.preset(spec);
      if (!preset) pending.push(spec);
      else {
        resolved[spec] = preset;
        // A preset file (tendril's connection layer) has dependencies of its own to ship.
        if ('path' in preset && !this.deps.has(preset.path)) await this.walk(preset.path, [preset.path], 'require');
      }
    }
    if (pending.length > 0) Object.assign(resolved, await this.walk(from, pending, kind));
    return { resolved, closure: closureOf(Object.values(resolved), (path) => this.deps.get(path)) };
  }

  private async walk(from: string, specs: string[], kind: ModuleKind): Promise<Record<string, Target>> {
    const workingDir = process.cwd();
    const contents = specs
      .map((spec) => (kind === 'require' ? `require(${JSON.stringify(spec)});` : `import ${JSON.stringify(spec)};`))
      .join('\n');
    // A syntax error stops esbuild; such files are recorded as broken and the walk runs again without them.
    for (let attempt = 0; attempt < 20; attempt++) {
      const entry = emptyRecord<Target>();
      const found = new Map<string, Record<string, Target>>();
      try {
        await (await loadEsbuild()).build({
          stdin: { contents, resolveDir: dirname(from), sourcefile: STDIN, loader: 'js' },
          bundle: true,
          write: false,
          absWorkingDir: workingDir,
          platform: 'node',
          format: kind === 'require' ? 'cjs' : 'esm',
          conditions: [],
          mainFields: ['main'],
          resolveExtensions: ['.js', '.json', '.node', '.cjs', '.mjs', '.ts', '.mts', '.cts', '.tsx'],
          logLevel: 'silent',
          plugins: [this.plugin(from, entry, found)],
        });
      } catch (error) {
        const located = (
          error as { errors?: { text: string; location?: { file: string; line: number; column: number } }[] }
        ).errors;
        const bad = located?.filter(
          (e) =>
            e.location &&
            !e.location.file.endsWith(STDIN) &&
            !this.broken.has(resolvePath(workingDir, e.location.file)),
        );
        // esbuild's message may quote a file: say only where and what kind of error.
        if (!bad || bad.length === 0) throw new Error(`module analysis failed: ${describeBuildError(error, from)}`);
        for (const e of bad) {
          const loc = e.location as { file: string; line: number; column: number };
          // esbuild names files relative to its working directory.
          const file = resolvePath(workingDir, loc.file);
          this.broken.set(file, describeLocatedError(file, loc, e.text));
        }
        continue;
      }
      for (const [path, deps] of found) this.deps.set(path, deps);
      for (const path of this.broken.keys()) if (!this.deps.has(path)) this.deps.set(path, emptyRecord());
      return entry;
    }
    throw new Error(`too many unparsable files reached from ${from}`);
  }

  private plugin(from: string, entry: Record<string, Target>, found: Map<string, Record<string, Target>>): Plugin {
    const inner = Symbol('inner');
    const stdinName = join(dirname(from), STDIN);
    return {
      name: 'tendril-module-graph',
      setup: (esbuild) => {
        esbuild.onResolve({ filter: /.*/ }, async (args) => {
          if (args.pluginData === inner || args.kind === 'entry-point') return undefined;
          // esbuild names the request's own imports as coming from <resolveDir>/<sourcefile>.
          const fromRequest = args.importer === stdinName || args.importer === STDIN || args.importer === '';
          const importer = fromRequest ? from : args.importer;
          const record = (target: Target) => {
            if (fromRequest) {
              entry[args.path] = target;
              return;
            }
            let deps = found.get(importer);
            if (!deps) {
              deps = emptyRecord();
              found.set(importer, deps);
            }
            deps[args.path] = target;
          };
          // Resolved lazily, when the code runs: not part of the static closure.
          if (args.kind === 'dynamic-import' || args.kind === 'require-resolve')
            return { path: args.path, external: true };
          const preset = this.preset(args.path);
          if (preset) {
            record(preset);
            return { path: args.path, external: true };
          }
          if (isBuiltinSpecifier(args.path, this.builtins)) {
            record({ builtin: args.path });
            return { path: args.path, external: true };
          }
          const result = await esbuild.resolve(args.path, {
            kind: args.kind,
            resolveDir: args.resolveDir,
            importer: args.importer,
            pluginData: inner,
          });
          if (result.errors.length > 0 || !result.path) {
            record({ missing: `Cannot find module '${args.path}' from '${importer}'` });
            return { path: args.path, external: true };
          }
          const path = result.path;
          if (path.endsWith('.node')) {
            record({ native: packageNameOf(path) ?? nearestPackageName(path) ?? path, path });
            return { path, external: true };
          }
          const refusal = this.policy(args.path, importer, path);
          if (refusal) {
            record({ refused: refusal });
            return { path, external: true };
          }
          record({ path });
          // Known files need no second walk; their closure comes from what is recorded.
          if (this.deps.has(path) || this.broken.has(path)) return { path, external: true };
          if (!found.has(path)) found.set(path, emptyRecord());
          return { path };
        });
        // Extensionless files (bin scripts), and whatever else the policy admits, are JavaScript to Node.
        esbuild.onLoad({ filter: /.*/ }, (args) =>
          OWN_LOADER.test(args.path)
            ? undefined
            : { contents: readRegularFile(args.path, { follow: true }).toString('utf8'), loader: 'js' },
        );
      },
    };
  }
}

/** The `name` in the nearest package.json above `path`. */
function nearestPackageName(path: string): string | undefined {
  for (let dir = dirname(path); dirname(dir) !== dir; dir = dirname(dir)) {
    try {
      const manifest = readRegularFile(join(dir, 'package.json'), { follow: true }).toString('utf8');
      const name = (JSON.parse(manifest) as { name?: unknown }).name;
      if (typeof name === 'string') return name;
    } catch {
      // No (readable) package.json here; look further up.
    }
  }
  return undefined;
}
