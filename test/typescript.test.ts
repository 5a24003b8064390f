// Programs written in TypeScript and run directly, the way users run their
// orchestration scripts: through tsx (esbuild, with keepNames), ts-node
// (compiling with swc) and Node's own type stripping. Functions they ship
// keep working, and `.ts` modules are forwarded (their types stripped).
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { readFileSync } from 'node:fs';
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

/** The 1-based line of main.ts that holds `marker`. */
function lineOf(marker: string): number {
  const text = readFileSync(join(FIXTURE, 'main.ts'), 'utf8');
  assert.ok(text.includes(marker), `main.ts holds ${marker}`);
  return text.slice(0, text.indexOf(marker)).split('\n').length;
}

/**
 * Checks where the first remote frame of a function of main.ts points, and
 * takes it out of the result: at main.ts, on the line of the throw where
 * the code Node runs keeps the file's positions (type stripping), on the
 * line where the function starts where it is transpiled (tsx writes each
 * function on one line; only its start is mapped back).
 */
function checkThrown(result: Record<string, unknown>, marker: string): Record<string, unknown> {
  const { thrown, ...rest } = result;
  const at = `${pathToFileURL(join(FIXTURE, 'main.ts')).href}:${lineOf(marker)}:`;
  assert.ok(String(thrown).startsWith(at), `${thrown} is at ${at}`);
  return rest;
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
    const result = await run(process.execPath, ['--import', 'tsx', 'main.ts']);
    assert.deepEqual(checkThrown(result, '.call((): never => {'), ESM_RESULT);
  });

  for (const major of [22, 24]) {
    test(`node --experimental-strip-types (Node ${major})`, async () => {
      const result = await run(nodeBinary(major), ['--experimental-strip-types', 'main.ts']);
      assert.deepEqual(checkThrown(result, "throw new Error('thrown from main.ts')"), ESM_RESULT);
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
