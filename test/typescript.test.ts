// Programs written in TypeScript and run directly, the way users run their
// orchestration scripts: through tsx (esbuild, with keepNames), ts-node
// (compiling with swc) and Node's own type stripping. Functions they ship
// keep working, and `.ts` modules are forwarded (their types stripped).
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { join } from 'node:path';
import { describe, test } from 'node:test';
import { pathToFileURL } from 'node:url';
import { promisify } from 'node:util';
import { nodeBinary } from './support/nodes.js';
import { ROOT } from './support/procs.js';

const FIXTURE = join(ROOT, 'test', 'fixtures', 'typescript');
const ENTRY = join(ROOT, 'dist', 'index.js');

async function run(node: string, args: string[], env: Record<string, string> = {}): Promise<Record<string, unknown>> {
  const { stdout } = await promisify(execFile)(node, args, {
    cwd: FIXTURE,
    env: { ...process.env, TENDRIL_ENTRY: pathToFileURL(ENTRY).href, ...env },
    timeout: 30_000,
  });
  return JSON.parse(stdout) as Record<string, unknown>;
}

const ESM_RESULT = {
  shapes: { square: 9, cube: 27, count: 3, names: ['square', 'cube', 'Counter'] },
  inline: [8, 2, 4, 'Box'],
  required: 'REQUIRED!',
  imported: 'DEPLOY 1.0!',
  defined: 'lib',
  here: 'top',
};

describe('TypeScript masters', () => {
  test('tsx: named inner functions, const arrows and classes survive keepNames; .ts modules are forwarded', async () => {
    assert.deepEqual(await run(process.execPath, ['--import', 'tsx', 'main.ts']), ESM_RESULT);
  });

  for (const major of [22, 24]) {
    test(`node --experimental-strip-types (Node ${major})`, async () => {
      assert.deepEqual(await run(nodeBinary(major), ['--experimental-strip-types', 'main.ts']), ESM_RESULT);
    });
  }

  for (const config of ['tsconfig.json', 'tsconfig.es2019.json']) {
    test(`ts-node compiling with swc (${config}), from CommonJS`, async () => {
      const result = await run(process.execPath, ['-r', 'ts-node/register', join('cjs', 'main.ts')], {
        // ts-node needs TypeScript's classic compiler API, which the repository's TypeScript 7 does not have.
        TS_NODE_COMPILER: 'typescript-5',
        TS_NODE_PROJECT: join(FIXTURE, 'cjs', config),
        TENDRIL_ENTRY: ENTRY,
      });
      assert.deepEqual(result, {
        inline: [8, 2, 4, 'Box'],
        required: 'REQUIRED!',
        imported: 'DEPLOY 1.0!',
        defined: 'cjs/lib',
      });
    });
  }
});
