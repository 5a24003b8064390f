// The import rules of src/ (see docs/architecture.md and DESIGN.md's layers),
// checked by test/core-cycles.test.ts through dependency-cruiser's API.
//
// dependency-cruiser tells type-only imports from run-time ones with the
// TypeScript compiler API, which TypeScript 7 (the repository's `tsc`) no
// longer has: this file points it at the `typescript-5` dev dependency
// before dependency-cruiser loads TypeScript. That works through the API, as
// the test loads it; the CLI (`npx depcruise`) loads TypeScript before it
// reads this file, sees no type-only import and reports type cycles as
// run-time ones, so check with `node test/run.mjs build/test/core-cycles.test.js`.
const Module = require('node:module');
const { pathToFileURL } = require('node:url');

const ts5 = require.resolve('typescript-5');
const fromCruiser = (where) => typeof where === 'string' && where.includes('/dependency-cruiser/');
const resolveFilename = Module._resolveFilename;
Module._resolveFilename = function (request, parent, ...rest) {
  const redirected =
    (request === 'typescript' || request.startsWith('typescript/')) && fromCruiser(parent?.filename)
      ? `typescript-5${request.slice('typescript'.length)}`
      : request;
  return resolveFilename.call(this, redirected, parent, ...rest);
};
Module.register?.(
  `data:text/javascript,${encodeURIComponent(
    `export async function resolve(specifier, context, next) {
      if (specifier === 'typescript' && (context.parentURL || '').includes('/dependency-cruiser/')) {
        return { url: ${JSON.stringify(pathToFileURL(ts5).href)}, shortCircuit: true };
      }
      return next(specifier, context);
    }`,
  )}`,
);

// Imports that exist at run time: not `import type`, not `import('...').T` in a type.
const TYPE_ONLY = ['type-only', 'type-import'];
// What each layer may not import: everything above it (connection, master,
// toolkit, unix, then the public assembly in src/*.ts).
const ABOVE = {
  core: '^src/(?!core/)',
  connection: '^src/(?!core/|connection/)',
  master: '^src/(?!core/|connection/|master/)',
};

/** @type {import('dependency-cruiser').IConfiguration} */
module.exports = {
  forbidden: [
    {
      name: 'no-runtime-cycle',
      comment:
        'A cycle of run-time imports inside src/: which module initialises first depends on who imports first. Move what both sides need (a symbol, a helper) into a module of its own that imports neither.',
      severity: 'error',
      from: { path: '^src/' },
      to: {
        circular: true,
        dependencyTypesNot: TYPE_ONLY,
        viaOnly: { dependencyTypesNot: TYPE_ONLY },
      },
    },
    ...Object.entries(ABOVE).map(([layer, above]) => ({
      name: `no-upward-import-from-${layer}`,
      comment: `src/${layer} imports only the layers below it (DESIGN.md, "Layers").`,
      severity: 'error',
      from: { path: `^src/${layer}/` },
      to: { path: above },
    })),
  ],
  options: {
    tsPreCompilationDeps: true,
    tsConfig: { fileName: 'tsconfig.json' },
    doNotFollow: { path: 'node_modules' },
    exclude: { path: '^src/.*\\.d\\.ts$' },
  },
};
