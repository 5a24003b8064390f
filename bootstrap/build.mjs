// Builds what children receive: the first stage, the deflated core, and the
// connection bundle. Run after `tsc` (see package.json); writes into
// dist/bootstrap/, next to the compiled master that reads these files.
import { chmodSync, copyFileSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { deflateRawSync } from 'node:zlib';
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
    minify: true,
    // Class names travel in errors (CallError.remoteName), so they must survive minification.
    keepNames: true,
    legalComments: 'none',
    write: false,
    logLevel: 'warning',
    plugins,
    // Packages the connection layer uses reach children by module forwarding, not inside the bundle.
    external: ['ssh2'],
  });
  return result.outputFiles[0].text;
}

// First stage: minified, with the core size left as a placeholder.
const stageSource = readFileSync(join(root, 'bootstrap', 'first-stage.js'), 'utf8');
// Identifiers and whitespace are minified, but not syntax: that would turn
// `false` into `!1`, and a `!` breaks csh-family login shells' quoting.
const stage = (
  await esbuild.transform(stageSource, {
    minifyWhitespace: true,
    minifyIdentifiers: true,
    target,
    supported: { 'template-literal': false },
  })
).code.trim();
if (/[!\n']/.test(stage)) throw new Error(`the first stage must not contain ! or ' or a newline: ${stage}`);
writeFileSync(join(out, 'first-stage.js'), `${stage}\n`);

// Core: evaluates to a function of the child's require, returning the core's exports.
const core = await bundle('src/core/index.ts', '__tendril', [portableMsgpackr, childDebug]);
const coreSource = `(function(require){${core};return __tendril})`;
const deflated = deflateRawSync(Buffer.from(coreSource), { level: 9 });
writeFileSync(join(out, 'core.deflate'), deflated);

// Modules loaded into a child after the core: CommonJS, shipped to children by
// module forwarding like any other, requiring the running core as `tendril:core`.
async function layer(entry, file) {
  const source = await bundle(entry, undefined, [portableMsgpackr, childDebug, coreAsExternal], 'cjs');
  // A second copy of core code in it would split classes and tables in two.
  if (source.includes('tendril.routerSwitch') || source.includes('tendril.errorBrands')) {
    throw new Error(`${file} contains core modules: import them from src/core so they resolve to tendril:core`);
  }
  writeFileSync(join(out, file), source);
  return source;
}

// The connection layer, for contexts that start children; the services (commands, files), on first use.
const connection = await layer('src/connection/index.ts', 'connection.cjs');
const services = await layer('src/services/remote.ts', 'services.cjs');

// The openssh method's SSH_ASKPASS helper ships with the built package.
copyFileSync(join(root, 'bootstrap', 'askpass.sh'), join(out, 'askpass.sh'));
chmodSync(join(out, 'askpass.sh'), 0o755);

const sizes = {
  firstStage: Buffer.byteLength(stage),
  core: Buffer.byteLength(coreSource),
  coreDeflated: deflated.length,
  connection: Buffer.byteLength(connection),
  services: Buffer.byteLength(services),
};
writeFileSync(join(out, 'sizes.json'), `${JSON.stringify(sizes, null, 2)}\n`);
console.log(
  `bootstrap: first stage ${sizes.firstStage} B, core ${sizes.core} B (${sizes.coreDeflated} B deflated), connection ${sizes.connection} B, services ${sizes.services} B`,
);
