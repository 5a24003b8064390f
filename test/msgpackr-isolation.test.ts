import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { join } from 'node:path';
import { test } from 'node:test';
import { promisify } from 'node:util';
import { ROOT } from './support/procs.js';

// tendril's codec registers its extensions with msgpackr, whose extension
// tables are process-wide: it must use types of its own, never replace
// msgpackr's (its Error extension), or a program's own msgpackr would
// encode and decode differently once tendril is loaded.
test("a program's own msgpackr round-trips Errors in a master using tendril as it does without tendril", async () => {
  const run = async (...args: string[]) => {
    const { stdout } = await promisify(execFile)(
      process.execPath,
      [join(ROOT, 'build', 'test', 'fixtures', 'msgpackr-roundtrip.js'), ...args],
      { timeout: 20_000 },
    );
    return JSON.parse(stdout) as Record<string, unknown>;
  };
  const [without, withTendril] = await Promise.all([run(), run('tendril')]);
  assert.deepEqual(withTendril, without);
});
