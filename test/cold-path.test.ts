import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { join } from 'node:path';
import { test } from 'node:test';
import { promisify } from 'node:util';
import { ROOT } from './support/procs.js';

// What a script pays for before its first context: import('tendril') loads
// the bundle and nothing it may never need. (How long it takes is measured
// by `npm run bench`, never asserted here.)
test('import("tendril") loads no optional package; a local context and a call load neither esbuild nor ssh2', async () => {
  const { stdout } = await promisify(execFile)(
    process.execPath,
    [join(ROOT, 'build', 'test', 'fixtures', 'loaded-packages.js')],
    {
      timeout: 20_000,
    },
  );
  const { afterImport, afterCall } = JSON.parse(stdout) as { afterImport: string[]; afterCall: string[] };
  assert.deepEqual(afterImport, [], 'packages loaded by the import alone');
  for (const lazy of ['esbuild', 'ssh2'])
    assert.ok(!afterCall.includes(lazy), `${lazy} loaded: ${afterCall.join(', ')}`);
  // The function parser is what a first call does need.
  assert.ok(afterCall.includes('acorn'), afterCall.join(', '));
});
