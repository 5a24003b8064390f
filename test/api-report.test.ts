// The package's public surface is recorded in etc/tendril.api.md (the
// `tendril` entry) and etc/tendril-child.api.md (`tendril/child`):
// api-extractor reports over the built declarations. A change of what the
// package exports, or of a public signature, fails here until the report
// is updated with `npm run api:update` and the difference is reviewed
// with the change: every export is a compatibility promise, made on purpose.
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { join } from 'node:path';
import { describe, test } from 'node:test';
import { ROOT } from './support/procs.js';

const REPORTS = [
  { config: 'etc/api-extractor.json', report: 'tendril.api.md' },
  { config: 'etc/api-extractor.child.json', report: 'tendril-child.api.md' },
];

/** api-extractor's command-line script, as installed for the project. */
function apiExtractor(): string {
  const require = createRequire(join(ROOT, 'package.json'));
  const manifestPath = require.resolve('@microsoft/api-extractor/package.json');
  const manifest = JSON.parse(readFileSync(manifestPath, 'utf8')) as { version: string; bin: Record<string, string> };
  // 8.0.0 on npm is an old build that bundles TypeScript 3.1, which cannot read today's declarations.
  assert.match(
    manifest.version,
    /^7\./,
    `@microsoft/api-extractor ${manifest.version} is installed; the report needs 7.x`,
  );
  return join(manifestPath, '..', manifest.bin['api-extractor'] as string);
}

describe('the API report', () => {
  for (const { config, report } of REPORTS) {
    test(`${report} is the public surface of the built declarations`, () => {
      const run = spawnSync(process.execPath, [apiExtractor(), 'run', '-c', config], {
        cwd: ROOT,
        encoding: 'utf8',
        timeout: 120_000,
      });
      const fresh = join(ROOT, 'build', 'api', report);
      const expected = readFileSync(join(ROOT, 'etc', report), 'utf8');
      const actual = existsSync(fresh) ? readFileSync(fresh, 'utf8') : undefined;
      assert.ok(
        run.status === 0 && (actual === undefined || actual === expected),
        `the public API differs from etc/${report}: if the change is meant, run \`npm run api:update\` and commit the report.\n${diff(expected, actual)}\n${run.stdout}${run.stderr}`,
      );
    });
  }
});

/** The lines that differ, `-` as recorded and `+` as built. */
function diff(expected: string, actual: string | undefined): string {
  if (actual === undefined) return '(no fresh report was written)';
  const before = expected.split('\n');
  const after = actual.split('\n');
  const kept = new Set(before);
  const made = new Set(after);
  return [
    ...before.filter((line) => !made.has(line)).map((l) => `- ${l}`),
    ...after.filter((l) => !kept.has(l)).map((l) => `+ ${l}`),
  ].join('\n');
}
