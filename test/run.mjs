// Runs the compiled test suite with the leak check loaded into every test
// file. Usage: node test/run.mjs [test files...] (default: all).
import { spawnSync } from 'node:child_process';
import { readdirSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
const built = join(root, 'build', 'test');
const files =
  process.argv.length > 2
    ? process.argv.slice(2)
    : readdirSync(built)
        .filter((name) => name.endsWith('.test.js'))
        .sort()
        .map((name) => join(built, name));
const result = spawnSync(
  process.execPath,
  ['--import', join(built, 'support', 'leak-check.js'), '--test', '--test-reporter=spec', ...files],
  { stdio: 'inherit', cwd: root },
);
process.exit(result.status ?? 1);
