import assert from 'node:assert/strict';
import { execFile, spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
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
    for (const group of [
      'Whole',
      'Time',
      'Call',
      'A',
      'Bulk',
      '10',
      '2',
      'Fan-out:',
      'Scale:',
      'Memory',
      'Bytes',
      'CPU',
    ]) {
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

// The containers bench keeps working: its own Podman store, Docker,
// LXD and Incus daemons, lxcpath and chroot tree, every way into a
// container, Mitogen's same methods (or why it has none) and the floors,
// once each. Nothing about speed is asserted; the beds are gone afterwards.
test('npm run bench:containers, in smoke mode, measures every method against its peers and removes its beds', {
  timeout: 600_000,
}, async () => {
  const dir = mkdtempSync(join(tmpdir(), 'tendril-bench-containers-'));
  try {
    const json = join(dir, 'results.json');
    const { stdout } = await promisify(execFile)(
      process.execPath,
      [join(ROOT, 'build', 'bench', 'containers.js'), '--smoke', '--json', json],
      { cwd: ROOT, timeout: 540_000, maxBuffer: 16 * 1024 * 1024 },
    );
    const { summaries, stores, noMitogen } = JSON.parse(readFileSync(json, 'utf8')) as {
      summaries: Summary[];
      stores: string[];
      noMitogen: Record<string, string>;
    };
    // The scratch directory, Podman, Docker, LXC, LXD and Incus.
    assert.equal(stores.length, 6, `the beds: ${stores.join(', ')}`);
    for (const store of stores) {
      assert.ok(store.startsWith(tmpdir()) && !existsSync(store), `the bench left ${store} behind`);
    }
    for (const group of ['Time', 'Empty', "exec('true')", 'Where']) {
      assert.ok(
        summaries.some((s) => s.group.startsWith(group)),
        `no row in the group starting '${group}'`,
      );
    }
    const ready = summaries.filter((s) => s.group.startsWith('Time to a context'));
    const mitogen = [
      'podman exec',
      'buildah run',
      'sudo → podman exec, both started',
      'podman exec via a held sudo context',
      'docker exec',
      'docker run --rm IMAGE',
      'lxc-attach (LXC)',
      'lxc exec (LXD)',
      'setns podman container (podman inspect, then nsenter)',
    ];
    const without = [
      'podman run --rm IMAGE',
      'incus exec',
      'setns pid=N (the podman container)',
      'chroot',
      'kubectl exec (a mock over podman exec)',
    ];
    assert.deepEqual(ready.map((s) => s.metric).sort(), [...mitogen, ...without].sort());
    for (const s of ready) {
      assert.ok(s.peers['floor: node -e 0'], `${s.metric}: not compared with its floor`);
      if (without.includes(s.metric)) {
        assert.ok(!s.peers.Mitogen && noMitogen[s.metric], `${s.metric}: Mitogen's row, or why there is none`);
        continue;
      }
      for (const peer of ['Mitogen', "Mitogen's floor: python3 -c 0"]) {
        assert.ok(s.peers[peer], `${s.metric}: not compared with ${peer}`);
      }
    }
    // Where the child's time goes after -e, step by step.
    const steps = summaries.filter((s) => s.metric.startsWith("in the container's Node, after -e: "));
    assert.equal(steps.length, 6, summaries.map((s) => s.metric).join('\n'));
    for (const s of summaries) {
      assert.ok(Number.isFinite(s.median), `${s.group} / ${s.metric}: tendril measured nothing`);
      for (const [name, peer] of Object.entries(s.peers)) {
        assert.ok(Number.isFinite(peer.median), `${s.group} / ${s.metric}: ${name} measured nothing`);
      }
    }
    // The bar's table: a line per method, met or not, and Mitogen's time or why there is none.
    const bar = stdout.slice(stdout.indexOf('\nThe bar: '));
    for (const s of ready) {
      const line = bar.split('\n').find((text) => text.startsWith(`  ${s.metric}  `)) ?? '';
      assert.match(line, / [\d.]+ ms +[\d.]+ ms +[\d.]+x +(met|NOT met) +([\d.]+ ms \([\d.]+x\)|none: \S)/, s.metric);
    }
    assert.match(bar, /kubectl exec: a mock over podman exec/);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

// The runtime bench keeps working: a target with Node and one without, over
// the suite's sshd, every row once; nothing about speed is asserted.
test('npm run bench:runtime, in smoke mode, measures every row against the ssh floor', {
  timeout: 600_000,
}, async () => {
  const dir = mkdtempSync(join(tmpdir(), 'tendril-bench-runtime-'));
  try {
    const json = join(dir, 'results.json');
    await promisify(execFile)(
      process.execPath,
      [join(ROOT, 'build', 'bench', 'runtime.js'), '--smoke', '--json', json],
      {
        cwd: ROOT,
        timeout: 540_000,
      },
    );
    const { summaries } = JSON.parse(readFileSync(json, 'utf8')) as { summaries: Summary[] };
    const byMetric = new Map(summaries.map((s) => [`${s.group} / ${s.metric}`, s]));
    for (const metric of [
      'target with Node',
      'no Node: first context (Node shipped)',
      'no Node: second context (Node kept)',
    ]) {
      const s = byMetric.get(`Time to a context that answered one call, over ssh / ${metric}`);
      assert.ok(s && Number.isFinite(s.median) && s.median > 0, metric);
      assert.ok(Number.isFinite(s.peers['floor: ssh host node -e 0']?.median), `${metric}: no floor`);
    }
    assert.ok((byMetric.get('Runtime bytes sent for the context / no Node: first context')?.median ?? 0) > 10_000_000);
    assert.equal(byMetric.get('Runtime bytes sent for the context / no Node: second context')?.median, 0);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

// The jobs bench keeps working: a job polled over the suite's sshd beside
// Ansible's async_status; nothing about speed is asserted.
test('npm run bench:jobs, in smoke mode, measures a poll against Ansible async_status', {
  timeout: 600_000,
}, async () => {
  const dir = mkdtempSync(join(tmpdir(), 'tendril-bench-jobs-test-'));
  try {
    const json = join(dir, 'results.json');
    await promisify(execFile)(process.execPath, [join(ROOT, 'build', 'bench', 'jobs.js'), '--smoke', '--json', json], {
      cwd: ROOT,
      timeout: 540_000,
    });
    const { summaries } = JSON.parse(readFileSync(json, 'utf8')) as { summaries: Summary[] };
    for (const metric of ['time per poll', 'bytes on the wire per poll (both ways)']) {
      const s = summaries.find((summary) => summary.metric === metric);
      assert.ok(s && Number.isFinite(s.median) && s.median > 0, metric);
      assert.ok(Number.isFinite(s.peers['Ansible async_status']?.median), `${metric}: no Ansible figure`);
    }
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

/** Every bench script a user runs (or the bench runs as a process), relative to bench/. */
const SCRIPTS = [
  'index',
  'flow',
  'files',
  'commands',
  'listener',
  'fleet',
  'containers',
  'runtime',
  'jobs',
  'scale',
  'scripts/call',
  'scripts/fanout',
  'scripts/scale',
  'scripts/steps',
];

test('every bench script answers --help with its usage, and refuses an unknown option with its usage, no stack', () => {
  for (const script of SCRIPTS) {
    const path = join(ROOT, 'build', 'bench', `${script}.js`);
    const help = spawnSync(process.execPath, [path, '--help'], { encoding: 'utf8', timeout: 30_000 });
    assert.equal(help.status, 0, `${script} --help: ${help.stderr}`);
    assert.match(help.stdout, new RegExp(`^Usage: node build/bench/${script}\\.js \\[--help\\]`), script);
    assert.match(help.stdout, /\n {2}-h, --help +print this help and exit/, script);
    const wrong = spawnSync(process.execPath, [path, '--no-such-option'], { encoding: 'utf8', timeout: 30_000 });
    assert.equal(wrong.status, 2, `${script} --no-such-option: ${wrong.stdout}${wrong.stderr}`);
    assert.match(wrong.stderr, /Unknown option '--no-such-option'[\s\S]*\nUsage: node build\/bench\//, script);
    assert.doesNotMatch(wrong.stderr, /\n\s+at /, `${script} printed a stack`);
  }
});

test('the list above holds every bench script with a command line, and none reads process.argv itself', () => {
  const sources = ['', 'scripts/', 'compare/'].flatMap((dir) =>
    readdirSync(join(ROOT, 'bench', dir))
      .filter((name) => name.endsWith('.ts'))
      .map((name) => `${dir}${name.slice(0, -3)}`),
  );
  const withCommandLine = sources.filter((name) =>
    /\bcommandLine\(\{/.test(readFileSync(join(ROOT, 'bench', `${name}.ts`), 'utf8')),
  );
  assert.deepEqual(withCommandLine.sort(), [...SCRIPTS].sort());
  for (const name of sources) {
    if (name === 'cli') continue;
    assert.doesNotMatch(
      readFileSync(join(ROOT, 'bench', `${name}.ts`), 'utf8'),
      /process\.argv\[[^1]|process\.argv\.slice/,
      name,
    );
  }
});
