// The package as a user installs it: `npm pack`, installed into a fresh
// project with production dependencies only, then used from ESM and
// CommonJS scripts under every master Node version, type-checked with
// skipLibCheck off, and bundled.
import assert from 'node:assert/strict';
import { execFileSync, spawnSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { cpSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { MASTER_VERSIONS, nodeBinary } from './support/nodes.js';
import { ROOT } from './support/procs.js';
import { typeCheck } from './support/typecheck.js';

const FIXTURE = join(ROOT, 'test', 'fixtures', 'consumer');
const BUNDLE_HINT = /keep tendril external/;

function npm(args: string[], cwd: string): string {
  return execFileSync('npm', [...args, '--no-audit', '--no-fund', '--loglevel=error'], {
    cwd,
    encoding: 'utf8',
    stdio: ['ignore', 'pipe', 'pipe'],
  });
}

/** Runs `node file` in the consumer project; the result with stdout and stderr. */
function run(node: string, file: string, cwd: string) {
  const result = spawnSync(node, [file], { cwd, encoding: 'utf8', timeout: 60_000 });
  return { status: result.status, stdout: result.stdout, stderr: result.stderr };
}

describe('the package as users install it', () => {
  let work: string;
  let tarball: string;
  let project: string;

  before(() => {
    work = mkdtempSync(join(tmpdir(), 'tendril-consumer-'));
    const packed = JSON.parse(npm(['pack', '--json', '--pack-destination', work], ROOT)) as { filename: string }[];
    tarball = join(work, (packed[0] as { filename: string }).filename);
    project = join(work, 'project');
    cpSync(FIXTURE, project, { recursive: true });
    writeFileSync(
      join(project, 'package.json'),
      `${JSON.stringify({ name: 'consumer', version: '1.0.0', private: true }, null, 2)}\n`,
    );
    npm(['install', '--omit=dev', tarball], project);
  });
  after(() => rmSync(work, { recursive: true, force: true }));

  test('the tarball holds the built package only: no source maps, build scripts or install scripts', () => {
    const listing = execFileSync('tar', ['-tzf', tarball], { encoding: 'utf8' }).trim().split('\n');
    assert.ok(listing.includes('package/dist/index.js'), 'dist/index.js is shipped');
    assert.ok(listing.includes('package/dist/bootstrap/core.deflate'), 'the core is shipped');
    assert.ok(listing.includes('package/dist/bootstrap/askpass.sh'), 'the askpass helper is shipped');
    assert.deepEqual(
      listing.filter((path) => path.endsWith('.map') || path.endsWith('.mjs') || path.startsWith('package/src/')),
      [],
    );
    assert.deepEqual(
      listing.filter((path) => /^package\/bootstrap\//.test(path)),
      [],
      'the build scripts in bootstrap/ are not shipped',
    );
    const installed = join(project, 'node_modules', 'tendril');
    const manifest = JSON.parse(readFileSync(join(installed, 'package.json'), 'utf8')) as {
      scripts?: Record<string, string>;
    };
    const lifecycle = ['preinstall', 'install', 'postinstall', 'prepare', 'preprepare', 'postprepare'];
    assert.deepEqual(
      Object.keys(manifest.scripts ?? {}).filter((name) => lifecycle.includes(name)),
      [],
    );
    for (const dir of ['core', 'connection', 'master']) {
      for (const file of readdirSync(join(installed, 'dist', dir)).filter((f) => f.endsWith('.js'))) {
        assert.doesNotMatch(readFileSync(join(installed, 'dist', dir, file), 'utf8'), /sourceMappingURL/, file);
      }
    }
  });

  for (const version of MASTER_VERSIONS) {
    for (const script of ['app.mjs', 'app.cjs']) {
      test(`Node ${version}: ${script} starts a context, calls it, forwards modules, runs a command, copies a file and exits`, () => {
        const result = run(nodeBinary(version), script, project);
        assert.equal(result.status, 0, `exit status ${result.status}; stderr:\n${result.stderr}`);
        const flavour = script.endsWith('.mjs') ? 'esm' : 'cjs';
        const output = JSON.parse(result.stdout.trim()) as Record<string, unknown>;
        assert.equal(output.remote, true);
        assert.match(String(output.greeting), new RegExp(`^\\[hello ${flavour} from pid \\d+\\]$`));
        assert.equal(output.duration, 2 * 3600 * 1000);
        assert.ok(Number(output.filesReceived) >= 3, `files were forwarded: ${output.filesReceived}`);
        assert.equal(output.echoed, `exec ${flavour}`);
        const source = readFileSync(join(project, script));
        assert.equal(output.copiedSha256, createHash('sha256').update(source).digest('hex'));
        assert.deepEqual(readFileSync(join(project, `${script}.copy`)), source);
        assert.equal(result.stderr, '', 'nothing on stderr (no warnings)');
      });
    }
  }

  test('the declarations compile in a user project with skipLibCheck false, from ESM and CommonJS', () => {
    // The user's own TypeScript setup: the compiler and Node's types are theirs, not tendril's dependencies.
    const failure = typeCheck(project, ['check.mts', 'check.cts'], {
      typeRoots: [join(ROOT, 'node_modules', '@types')],
    });
    assert.equal(failure, undefined, `tsc failed:\n${failure}`);
  });

  test('an app bundled with esbuild says to keep tendril external, and works when it is', () => {
    const esbuild = join(project, 'node_modules', '.bin', 'esbuild');
    for (const format of ['esm', 'cjs']) {
      const out = join(project, `bundled.${format === 'esm' ? 'mjs' : 'cjs'}`);
      execFileSync(
        esbuild,
        [
          `simple.${format === 'esm' ? 'mjs' : 'cjs'}`,
          '--bundle',
          '--platform=node',
          `--format=${format}`,
          `--outfile=${out}`,
          '--log-level=error',
        ],
        {
          cwd: project,
        },
      );
      const bundled = run(process.execPath, out, project);
      assert.notEqual(bundled.status, 0);
      assert.match(bundled.stderr, BUNDLE_HINT, `esbuild --format=${format}: ${bundled.stderr}`);
    }
    const external = join(project, 'external.mjs');
    execFileSync(
      esbuild,
      ['simple.mjs', '--bundle', '--platform=node', '--format=esm', '--external:tendril', `--outfile=${external}`],
      {
        cwd: project,
        stdio: 'ignore',
      },
    );
    const result = run(process.execPath, external, project);
    assert.equal(result.status, 0, result.stderr);
    assert.deepEqual(JSON.parse(result.stdout), { sum: 5 });
  });

  test('an app bundled with webpack says to keep tendril external, and works when it is', async () => {
    const { default: webpack } = await import('webpack');
    const pack = (config: import('webpack').Configuration) =>
      new Promise<void>((resolve, reject) =>
        webpack(config, (error, stats) => {
          if (error) reject(error);
          else if (stats?.hasErrors()) reject(new Error(stats.toString({ all: false, errors: true })));
          else resolve();
        }),
      );
    const base = {
      mode: 'production',
      target: 'node',
      context: project,
      entry: './simple.mjs',
      optimization: { minimize: false },
    } as const;
    await pack({ ...base, output: { path: join(project, 'webpack'), filename: 'inside.js' } });
    const inside = run(process.execPath, join(project, 'webpack', 'inside.js'), project);
    assert.notEqual(inside.status, 0);
    assert.match(inside.stderr, BUNDLE_HINT);
    await pack({
      ...base,
      experiments: { outputModule: true },
      externals: { tendril: 'module tendril' },
      output: { path: join(project, 'webpack'), filename: 'external.mjs', module: true, chunkFormat: 'module' },
    });
    const external = run(process.execPath, join(project, 'webpack', 'external.mjs'), project);
    assert.equal(external.status, 0, external.stderr);
    assert.deepEqual(JSON.parse(external.stdout), { sum: 5 });
  });
});
