import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { promisify } from 'node:util';
import { ROOT } from './support/procs.js';

interface Summary {
  group: string;
  metric: string;
  median: number;
  peers: Record<string, { median: number }>;
}

// The side-by-side benchmark keeps working: every measurement and every
// peer (Mitogen, OpenSSH, Ansible three ways, the pipe floors) runs once,
// with small sizes. Nothing about speed is asserted.
test('npm run bench, in smoke mode, measures every row against every peer', { timeout: 600_000 }, async () => {
  const dir = mkdtempSync(join(tmpdir(), 'tendril-bench-smoke-'));
  try {
    const json = join(dir, 'results.json');
    await promisify(execFile)(process.execPath, [join(ROOT, 'build', 'bench', 'index.js'), '--smoke', '--json', json], {
      cwd: ROOT,
      timeout: 540_000,
      maxBuffer: 16 * 1024 * 1024,
    });
    const { summaries } = JSON.parse(readFileSync(json, 'utf8')) as { summaries: Summary[] };
    const groups = new Set(summaries.map((s) => s.group.split(' ')[0]));
    for (const group of ['Whole', 'Time', 'Call', 'Bulk', '10', '2', 'Fan-out:', 'Memory', 'Bytes', 'CPU']) {
      assert.ok(groups.has(group), `no row in the group starting '${group}': ${[...groups].join(', ')}`);
    }
    const peers = new Set(summaries.flatMap((s) => Object.keys(s.peers)));
    for (const peer of [
      'Mitogen',
      'Mitogen FileService',
      'raw Node pipe echo',
      'node -e 0',
      'ssh host node -e 0',
      'ssh host true',
      'ssh host true, ControlMaster',
      'cat | cat',
      'cat | ssh cat',
      'Ansible linear, ControlPersist',
      'Ansible linear, pipelining',
      'Ansible mitogen_linear',
    ]) {
      assert.ok(peers.has(peer), `no row compares with ${peer}`);
    }
    for (const s of summaries) {
      assert.ok(Number.isFinite(s.median), `${s.group} / ${s.metric}: tendril measured nothing`);
      for (const [name, peer] of Object.entries(s.peers)) {
        assert.ok(Number.isFinite(peer.median), `${s.group} / ${s.metric}: ${name} measured nothing`);
      }
    }
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});
