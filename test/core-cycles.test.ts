// The import rules of src/ (.dependency-cruiser.cjs): no cycle of run-time
// imports anywhere in src/, and no layer importing one above it.
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { dirname, join } from 'node:path';
import { test } from 'node:test';
import { fileURLToPath } from 'node:url';
import type { ICruiseResult } from 'dependency-cruiser';

const root = join(dirname(fileURLToPath(import.meta.url)), '..', '..');
const config = join(root, '.dependency-cruiser.cjs');
const cli = join(root, 'node_modules', 'dependency-cruiser', 'bin', 'dependency-cruise.mjs');

/**
 * dependency-cruiser's report on src/, from its CLI in a process of its own
 * (preloading the config, which points it at a TypeScript it can use; see
 * .dependency-cruiser.cjs), as a contributor would run it.
 */
function cruiseSource(): ICruiseResult {
  let json: string;
  try {
    json = execFileSync(process.execPath, ['-r', config, cli, '--config', config, '--output-type', 'json', 'src'], {
      cwd: root,
      encoding: 'utf8',
      maxBuffer: 64 << 20,
    });
  } catch (error) {
    // It exits non-zero when a rule is broken; the report is still on stdout.
    json = (error as { stdout?: string }).stdout ?? '';
    if (!json) throw error;
  }
  return JSON.parse(json) as ICruiseResult;
}

/** Files of src/core (the namespace index.ts aside) in a cycle, counting every import, or run-time ones only. */
function filesInCycles(result: ICruiseResult, runtimeOnly: boolean): string[] {
  const isCore = (path: string) => path.startsWith('src/core/') && path !== 'src/core/index.ts';
  const edges = new Map<string, string[]>();
  for (const module of result.modules) {
    if (!isCore(module.source)) continue;
    const targets = module.dependencies.filter(
      (d) => isCore(d.resolved) && !(runtimeOnly && d.dependencyTypes.some((t) => t.startsWith('type'))),
    );
    edges.set(
      module.source,
      targets.map((d) => d.resolved),
    );
  }
  // Tarjan's strongly connected components; a file is in a cycle when its component has two or more.
  let next = 0;
  const index = new Map<string, number>();
  const low = new Map<string, number>();
  const stack: string[] = [];
  const inCycles: string[] = [];
  const visit = (file: string): void => {
    index.set(file, next);
    low.set(file, next++);
    stack.push(file);
    for (const to of edges.get(file) ?? []) {
      if (!index.has(to)) {
        visit(to);
        low.set(file, Math.min(low.get(file) as number, low.get(to) as number));
      } else if (stack.includes(to)) low.set(file, Math.min(low.get(file) as number, index.get(to) as number));
    }
    if (low.get(file) !== index.get(file)) return;
    const component = stack.splice(stack.indexOf(file));
    if (component.length > 1) inCycles.push(...component);
  };
  for (const file of edges.keys()) if (!index.has(file)) visit(file);
  return inCycles.sort();
}

test('src/ keeps its import rules: no run-time import cycle, no upward import', async (t) => {
  const result = cruiseSource();
  // The checks only mean something if dependency-cruiser tells type-only imports apart.
  assert.ok(
    result.modules.some((m) => m.dependencies.some((d) => d.dependencyTypes.includes('type-only'))),
    'dependency-cruiser saw no type-only import: it is not using typescript-5 (see .dependency-cruiser.cjs)',
  );
  const broken = result.summary.violations.map((v) =>
    v.cycle
      ? `${v.rule.name}: ${[v.from, ...v.cycle.map((c) => c.name)].join(' -> ')}`
      : `${v.rule.name}: ${v.from} -> ${v.to}`,
  );
  assert.deepEqual(broken, [], `import rules broken:\n${broken.join('\n')}`);
  assert.deepEqual(filesInCycles(result, true), []);
  const cycles = filesInCycles(result, false);
  t.diagnostic(`core files in an import cycle counting type imports: ${cycles.length} (${cycles.join(' ')})`);
});
