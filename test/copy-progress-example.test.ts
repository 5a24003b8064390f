// examples/copy-progress.ts runs as written: a progress bar (cli-progress)
// driven by onProgress while a file is copied to a local context.
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { join } from 'node:path';
import { test } from 'node:test';
import { promisify } from 'node:util';
import { ROOT } from './support/procs.js';

test('examples/copy-progress draws a progress bar to 100% and reports the copy', { timeout: 120_000 }, async () => {
  const { stdout, stderr } = await promisify(execFile)(
    process.execPath,
    [join(ROOT, 'build', 'examples', 'copy-progress.js')],
    {
      cwd: ROOT,
      timeout: 100_000,
    },
  );
  const output = stdout + stderr;
  assert.match(output, /copying \[.*\] 100% \| 64\/64 MiB/, output);
  assert.match(output, /copied 67108864 bytes in \d+ ms, sha256 [0-9a-f]{64}/, output);
});
