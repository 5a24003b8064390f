/**
 * Type-checks TypeScript files as a user's project would: the repository's
 * compiler, module `nodenext`, strict, and `skipLibCheck` off, so tendril's
 * own declarations are checked too.
 */
import { spawnSync } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { ROOT } from './procs.js';

/**
 * Writes a tsconfig.json for `files` into `dir` and runs tsc on it.
 * @param extra compiler options added to the defaults.
 * @returns tsc's output when it fails, undefined when the files check.
 */
export function typeCheck(dir: string, files: string[], extra: Record<string, unknown> = {}): string | undefined {
  const compilerOptions = {
    module: 'nodenext',
    target: 'es2022',
    strict: true,
    skipLibCheck: false,
    noEmit: true,
    types: ['node'],
    ...extra,
  };
  writeFileSync(join(dir, 'tsconfig.json'), JSON.stringify({ compilerOptions, files }));
  const tsc = spawnSync(join(ROOT, 'node_modules', '.bin', 'tsc'), ['-p', dir], { cwd: dir, encoding: 'utf8' });
  return tsc.status === 0 ? undefined : `${tsc.stdout}${tsc.stderr}`;
}
