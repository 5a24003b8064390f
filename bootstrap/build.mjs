// Builds the package's code: the master's bundle (dist/*.js, beside the
// declarations tsc wrote), and what children receive: the first stage, the
// deflated core, and the connection and toolkit bundles (dist/bootstrap/).
// Run after `tsc` (see package.json).
import { createHash } from 'node:crypto';
import { chmodSync, copyFileSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { deflateRawSync } from 'node:zlib';
import * as esModuleLexer from 'es-module-lexer';
import * as esbuild from 'esbuild';

const root = resolve(dirname(fileURLToPath(import.meta.url)), '..');
const out = join(root, 'dist', 'bootstrap');
const coreDir = join(root, 'src', 'core');
// The oldest Node a child may run; syntax newer than this is lowered.
const target = 'node12';

mkdirSync(out, { recursive: true });

// msgpackr's Node entry loads an optional native addon; children must run
// pure JavaScript, so the core uses the portable entry.
const portableMsgpackr = {
  name: 'portable-msgpackr',
  setup(build) {
    build.onResolve({ filter: /^msgpackr$/ }, () => ({ path: join(root, 'node_modules', 'msgpackr', 'index.js') }));
  },
};

// In children, `debug` skips its terminal probing (see child-debug.cjs).
const childDebug = {
  name: 'child-debug',
  setup(build) {
    build.onResolve({ filter: /^debug$/ }, () => ({ path: join(root, 'bootstrap', 'child-debug.cjs') }));
  },
};

// In children, the built-in modules the core needs only now and then are
// loaded on first use. On a Node built without its startup snapshot
// (Debian's), a child pays at its start for every built-in it requires:
// crypto about 5 ms, fs about 4 ms (requiring it from user land reads every
// export, and fs.ReadStream and fs.promises load the stream classes and the
// promises API), zlib about 1.5 ms, child_process (with dgram and the
// socket list) about 0.5 MB of an idle child's memory. The core gets an
// ES module in its place whose exports load the module when first used: a
// function for each of its functions, a proxy for each class or object
// (its members read, called or constructed), and the value itself for a
// primitive (read when the core starts, so only one the core uses). Being
// an ES module, only what the core uses is bundled, with no getter per
// export and no copy of the namespace per importing file.
const LAZY_IN_CHILDREN = ['child_process', 'crypto', 'fs', 'os', 'zlib'];
const IDENTIFIER = /^[A-Za-z_$][\w$]*$/;
const lazyBuiltins = {
  name: 'lazy-builtins',
  setup(build) {
    const filter = new RegExp(`^node:(${LAZY_IN_CHILDREN.join('|')})$`);
    build.onResolve({ filter }, (args) => ({ path: args.path.slice('node:'.length), namespace: 'lazy-builtin' }));
    build.onLoad({ filter: /.*/, namespace: 'lazy-builtin' }, async (args) => {
      const module = await import(`node:${args.path}`);
      const id = JSON.stringify(args.path);
      const lines = [
        `let m;const load=()=>m||(m=require(${id}));`,
        'const member=(n)=>new Proxy(function(){},{get:(t,k)=>Reflect.get(load()[n],k),has:(t,k)=>k in load()[n],apply:(t,self,a)=>Reflect.apply(load()[n],self,a),construct:(t,a)=>Reflect.construct(load()[n],a)});',
        'const value=(n)=>load()[n];',
      ];
      for (const name of Object.keys(module)) {
        if (name === 'default') continue;
        if (!IDENTIFIER.test(name)) throw new Error(`node:${args.path} exports ${name}, not an identifier`);
        const exported = module[name];
        const key = JSON.stringify(name);
        if (typeof exported === 'function' && /^[a-z_]/.test(name)) {
          lines.push(`export function ${name}(){const x=load();return x[${key}].apply(x,arguments)}`);
        } else if (exported !== null && (typeof exported === 'function' || typeof exported === 'object')) {
          lines.push(`export const ${name}=/* @__PURE__ */member(${key});`);
        } else {
          lines.push(`export const ${name}=/* @__PURE__ */value(${key});`);
        }
      }
      return { loader: 'js', contents: lines.join('\n') };
    });
  },
};

// Modules loaded into a child after the core must share the core's
// instances (classes, handle tables), so their imports of src/core resolve
// to the core already running there.
const coreAsExternal = {
  name: 'core-as-external',
  setup(build) {
    build.onResolve({ filter: /\/core\/.+\.js$/ }, (args) => {
      const path = resolve(args.resolveDir, args.path).replace(/\.js$/, '.ts');
      return path.startsWith(coreDir) ? { path: 'tendril:core', external: true } : undefined;
    });
  },
};

async function bundle(entry, globalName, plugins, format = 'iife') {
  const result = await esbuild.build({
    entryPoints: [join(root, entry)],
    bundle: true,
    platform: 'node',
    target,
    format,
    ...(format === 'iife' && { globalName }),
    // Whitespace and syntax only: with identifiers minified, keepNames
    // would have to rename every closure as it is made (see cheapNames).
    minifyWhitespace: true,
    minifySyntax: true,
    // Class names travel in errors (CallError.remoteName) and brands, and
    // esbuild renames some (a clash of top-level names, `class _Channel`).
    keepNames: true,
    legalComments: 'none',
    write: false,
    logLevel: 'warning',
    plugins,
    // Packages the connection layer uses reach children by module forwarding, not inside the bundle.
    external: ['ssh2'],
  });
  return cheapNames(result.outputFiles[0].text, entry);
}

/**
 * esbuild's keepNames wraps every named function and class in `__name()`,
 * which defines its `name` property: for the arrow functions made on every
 * call (a request's settle, a reply's handler) that cost a call about 1 to
 * 2 µs. Here the helper leaves arrow functions (no `prototype`) as they
 * are, unnamed in stack traces, and names a class or function only when
 * its own name differs, which in code whose identifiers are not minified
 * is where esbuild renamed it (a clash of names, `class _Channel`).
 */
function cheapNames(text, file) {
  // Its parameters are renamed where the bundle has a `target` or `value` of its own.
  const helper =
    /\b__name ?= ?\((\w+), ?(\w+)\) ?=> ?__defProp\(\1, ?"name", ?\{ ?(?:value: ?)?\2, ?configurable: ?(?:true|!0) ?\}\)/;
  if (!helper.test(text)) {
    // Chunks that import the helper from the one that defines it.
    if (/\b__name ?= ?\(/.test(text))
      throw new Error(`${file}: esbuild's __name helper is not in the form cheapNames rewrites`);
    return text;
  }
  return text.replace(
    helper,
    (_, target, value) =>
      `__name = (${target}, ${value}) => ${target}.prototype === undefined || ${target}.name === ${value} ? ${target} : __defProp(${target}, "name", { value: ${value}, configurable: true })`,
  );
}

// Core: evaluates to a function of the child's require, returning the core's exports.
const core = await bundle('src/core/bundle.ts', '__tendril', [portableMsgpackr, childDebug, lazyBuiltins]);
const coreSource = `(function(require){${core};return __tendril})`;
const deflated = deflateRawSync(Buffer.from(coreSource), { level: 9 });
writeFileSync(join(out, 'core.deflate'), deflated);

// First stage: minified, with the core's size and form left as a
// placeholder; two of them, the default without the part that looks for the
// core's code cache on the target, and first-stage-cache.js with it (for
// the Router's targetCodeCache). The key names that cache (see
// first-stage.js).
const coreKey = createHash('sha256').update(coreSource).digest('hex').slice(0, 16);
const stageSource = readFileSync(join(root, 'bootstrap', 'first-stage.js'), 'utf8').replace(
  '__TENDRIL_CORE_KEY__',
  coreKey,
);
const CODE_CACHE_PART = /\n *\/\/ <code-cache>[^\n]*\n[\s\S]*?\n *\/\/ <\/code-cache>\n/;
if (!CODE_CACHE_PART.test(stageSource)) throw new Error('first-stage.js has no <code-cache> part to leave out');
const stages = {};
for (const [file, source] of [
  ['first-stage.js', stageSource.replace(CODE_CACHE_PART, '\n')],
  ['first-stage-cache.js', stageSource],
]) {
  // Identifiers and whitespace are minified, but not syntax: that would turn
  // `false` into `!1`, and a `!` breaks csh-family login shells' quoting.
  const stage = (
    await esbuild.transform(source, {
      minifyWhitespace: true,
      minifyIdentifiers: true,
      target,
      supported: { 'template-literal': false },
    })
  ).code.trim();
  if (/[!\n']/.test(stage)) throw new Error(`the first stage must not contain ! or ' or a newline: ${stage}`);
  writeFileSync(join(out, file), `${stage}\n`);
  stages[file] = stage;
}

// The master: one ES module bundle instead of a hundred files, because Node's
// module loader costs about a millisecond per file, more for a CommonJS
// package, and a script pays for `import('tendril')` on every run. Parts a
// program may never use (the ssh method, the listener, module analysis) are
// chunks loaded by `import()` on first use. `internal.js` is a second entry
// sharing the same chunks, so what the tests reach through it is the very
// code behind the public API.
//
// Small dependencies are bundled in: the master then uses the portable
// msgpackr the children use (its Node entry loads an optional native addon,
// which costs more to load than it saves on tendril's small messages).
// Those loaded only on demand stay packages: ssh2 (and its native addons),
// semver and ssri (the runtime store, for targets without Node),
// esbuild, the function parser, the module lexer; and `debug`, which must be
// the program's own copy, is loaded on first use (see master-debug.mjs).
const LAZY_PACKAGES = ['ssh2', 'esbuild', 'acorn', 'eslint-scope', 'es-module-lexer', 'debug', 'semver', 'ssri'];
const masterDebug = {
  name: 'master-debug',
  setup(build) {
    build.onResolve({ filter: /^debug$/ }, (args) =>
      args.importer.endsWith('master-debug.mjs') ? undefined : { path: join(root, 'bootstrap', 'master-debug.mjs') },
    );
  },
};
const master = await esbuild.build({
  entryPoints: {
    index: join(root, 'src', 'index.ts'),
    internal: join(root, 'src', 'internal.ts'),
    // The command that fills the master's store of Node runtimes (package.json's bin).
    'bin/tendril-runtime': join(root, 'src', 'bin', 'tendril-runtime.ts'),
  },
  outdir: join(root, 'dist'),
  chunkNames: 'chunk-[hash]',
  bundle: true,
  splitting: true,
  platform: 'node',
  format: 'esm',
  target: 'node20',
  // esbuild renames clashing top-level names (two modules' `Router`); class names travel in errors.
  keepNames: true,
  external: LAZY_PACKAGES,
  plugins: [portableMsgpackr, masterDebug],
  legalComments: 'none',
  metafile: true,
  logLevel: 'warning',
});

for (const output of Object.keys(master.metafile.outputs)) {
  if (!output.endsWith('.js')) continue;
  const file = join(root, output);
  const text = readFileSync(file, 'utf8');
  const cheap = cheapNames(text, output);
  if (cheap !== text) writeFileSync(file, cheap);
}

// `tendril/child` as the master loads it (children get the core instead): a
// bundle of its own, holding no state, so it adds no chunk to what
// `import('tendril')` loads.
await esbuild.build({
  entryPoints: { child: join(root, 'src', 'child.ts') },
  outdir: join(root, 'dist'),
  bundle: true,
  platform: 'node',
  format: 'esm',
  target: 'node20',
  keepNames: true,
  legalComments: 'none',
  logLevel: 'warning',
});

// The master's own code renames dynamic imports for shipping (see src/master/module-source.ts).
const { renameDynamicImports } = await import(join(root, 'dist', 'internal.js'));
await esModuleLexer.init;

// Modules loaded into a child after the core: CommonJS, shipped to children by
// module forwarding like any other, requiring the running core as `tendril:core`.
async function layer(entry, file, plugins = []) {
  const source = await bundle(entry, undefined, [portableMsgpackr, childDebug, coreAsExternal, ...plugins], 'cjs');
  // A second copy of core code in it would split classes and tables in two.
  if (source.includes('tendril.routerSwitch') || source.includes('tendril.errorBrands')) {
    throw new Error(`${file} contains core modules: import them from src/core so they resolve to tendril:core`);
  }
  // Written in the form children evaluate, so the master ships it as it is, without analysing it.
  const [imports] = esModuleLexer.parse(source, file);
  const shipped = renameDynamicImports(source, imports);
  writeFileSync(join(out, file), shipped);
  return shipped;
}

// The connection layer, for contexts that start children. Its SSH methods
// and its container methods are layers of their own, `tendril:ssh` and
// `tendril:containers`, loaded on first use: they need the connection
// layer's instances (bootstrap, errors) rather than copies of them.
const connectionDir = join(root, 'src', 'connection');
const SUB_LAYERS = {
  'tendril:ssh': {
    entry: 'ssh-methods.ts',
    only: [
      'ssh-methods.ts',
      'ssh.ts',
      'ssh-auth.ts',
      'ssh-connect-hop.ts',
      'ssh-hops.ts',
      'ssh-host-key.ts',
      'ssh-library.ts',
      'ssh-options.ts',
      'ssh-transport.ts',
      'openssh.ts',
      'ssh-config',
      'known-hosts.ts',
    ],
  },
  'tendril:containers': { entry: 'containers/index.ts', only: ['containers'] },
};
// A name in `only` is a file, or a folder whose files are all that layer's.
const subLayerOnly = (path) =>
  Object.values(SUB_LAYERS).some(({ only }) =>
    only.some((name) => {
      const file = join(connectionDir, name);
      return path === file || path.startsWith(`${file}/`);
    }),
  );
const subLayersExternal = {
  name: 'sub-layers-external',
  setup(build) {
    build.onResolve({ filter: /\.js$/ }, (args) => {
      if (args.kind !== 'dynamic-import') return undefined;
      const path = resolve(args.resolveDir, args.path).replace(/\.js$/, '.ts');
      const found = Object.entries(SUB_LAYERS).find(([, { entry }]) => path === join(connectionDir, entry));
      return found ? { path: found[0], external: true } : undefined;
    });
  },
};
const connectionAsExternal = {
  name: 'connection-as-external',
  setup(build) {
    // `../` too: a file in a folder of a sub-layer reaches the connection layer that way.
    build.onResolve({ filter: /^\.\.?\/.+\.js$/ }, (args) => {
      const path = resolve(args.resolveDir, args.path).replace(/\.js$/, '.ts');
      if (!path.startsWith(connectionDir) || subLayerOnly(path)) return undefined;
      return { path: 'tendril:connection', external: true };
    });
  },
};
const connection = await layer('src/connection/index.ts', 'connection.cjs', [subLayersExternal]);
const ssh = await layer('src/connection/ssh-methods.ts', 'ssh.cjs', [connectionAsExternal]);
const containers = await layer('src/connection/containers/index.ts', 'containers.cjs', [connectionAsExternal]);
if (connection.includes('"ssh2"')) {
  throw new Error('connection.cjs contains the SSH methods: they belong in ssh.cjs');
}
if (connection.includes('nsenter')) {
  throw new Error('connection.cjs contains the container methods: they belong in containers.cjs');
}
// The toolkit (commands, files, services), on first use.
const toolkit = await layer('src/toolkit/remote.ts', 'toolkit.cjs');

// The openssh method's SSH_ASKPASS helper ships with the built package.
copyFileSync(join(root, 'bootstrap', 'askpass.sh'), join(out, 'askpass.sh'));
chmodSync(join(out, 'askpass.sh'), 0o755);
chmodSync(join(root, 'dist', 'bin', 'tendril-runtime.js'), 0o755);

const sizes = {
  firstStage: Buffer.byteLength(stages['first-stage.js']),
  firstStageCodeCache: Buffer.byteLength(stages['first-stage-cache.js']),
  core: Buffer.byteLength(coreSource),
  coreDeflated: deflated.length,
  connection: Buffer.byteLength(connection),
  connectionDeflated: deflateRawSync(Buffer.from(connection)).length,
  ssh: Buffer.byteLength(ssh),
  sshDeflated: deflateRawSync(Buffer.from(ssh)).length,
  containers: Buffer.byteLength(containers),
  containersDeflated: deflateRawSync(Buffer.from(containers)).length,
  toolkit: Buffer.byteLength(toolkit),
  master: Object.fromEntries(
    Object.entries(master.metafile.outputs).map(([file, output]) => [file.replace(/^.*\//, ''), output.bytes]),
  ),
};
writeFileSync(join(out, 'sizes.json'), `${JSON.stringify(sizes, null, 2)}\n`);
console.log(
  `bootstrap: first stage ${sizes.firstStage} B (${sizes.firstStageCodeCache} B with the code cache part), core ${sizes.core} B (${sizes.coreDeflated} B deflated), connection ${sizes.connection} B (${sizes.connectionDeflated} B deflated), ssh ${sizes.ssh} B (${sizes.sshDeflated} B deflated), containers ${sizes.containers} B (${sizes.containersDeflated} B deflated), toolkit ${sizes.toolkit} B`,
);
