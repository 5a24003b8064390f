// `npm run bench`: tendril beside its peers, every figure measured in this
// run, peers alternating with tendril so drift hits both (issue 12):
// Mitogen (Debian's python3-mitogen, bench/peers/mitogen_bench.py), plain
// OpenSSH, `node -e 0`, cat through pipes and ssh, a raw Node pipe echo,
// and Ansible (ansible-core, with ansible-mitogen's strategy), against the
// test suite's loopback sshd (root needed, as for the suite).
//
//   node build/bench/index.js [--smoke] [--write-docs] [--json FILE]
//
// --smoke runs every measurement with a few iterations and small sizes, so
// the suite can check the whole bench still works (it asserts nothing about
// speed). --write-docs rewrites the table, versions and plot in
// docs/performance.md and docs/performance.svg.
import { execFileSync } from 'node:child_process';
import { chmodSync, closeSync, mkdtempSync, openSync, readFileSync, rmSync, writeFileSync, writeSync } from 'node:fs';
import { cpus, tmpdir } from 'node:os';
import { join } from 'node:path';
import { type Context, Router } from 'tendril';
import { openSshArgs, startTestbed } from '../test/support/testbed.js';
import { commandLine } from './cli.js';
import { ANSIBLE_VARIANTS, runPlaybook, writePlaybook } from './compare/ansible.js';
import { plot } from './compare/plot.js';
import {
  ensurePackages,
  MitogenServer,
  mitogen,
  PYTHON,
  ROOT,
  run,
  tendrilScript,
  versionOf,
} from './compare/processes.js';
import { markdownTable, printTable, type Row, type Summary, summarise } from './compare/results.js';
import { SCALE_SHAPES, type ScaleRaw, scale, scaleGroup } from './compare/scale.js';
import { projectionTable } from './compare/scale-projection.js';
import {
  bytes,
  type CallSamples,
  callsOf,
  coldCalls,
  commands,
  cpuPer10k,
  EchoFloor,
  idleChildRss,
  isolatedCalls,
  type Kind,
  readyOnce,
  roundTrips,
  SIZES,
  senderRates,
  start,
  type Targets,
  warmCallsOf,
} from './compare/tendril.js';
import { MIB, median, progress, shellQuote, timeShell } from './flow-shared.js';

const { values: flags } = commandLine({
  script: 'node build/bench/index.js',
  description: `tendril beside its peers (npm run bench): Mitogen, plain OpenSSH, node -e 0, cat through
pipes and ssh, a raw Node pipe echo and Ansible, every figure measured in this run,
against the test suite's loopback sshd. Needs root (the test bed), python3-mitogen,
ansible-core and ansible-mitogen.`,
  options: {
    smoke: { type: 'boolean', description: 'every measurement once, with small sizes (what the suite runs)' },
    'write-docs': {
      type: 'boolean',
      description: 'rewrite the table, versions and plot in docs/performance.md and .svg',
    },
    json: { type: 'string', value: 'FILE', description: 'also write the results as JSON to FILE' },
  },
});
const SMOKE = flags.smoke === true;
const ROUNDS = SMOKE ? 1 : 10;
const FEW = SMOKE ? 1 : 3;
const CALLS = SMOKE ? 20 : 2000;
const COLD_CALLS = SMOKE ? 20 : 1000;
const BULK_MIB = SMOKE ? 4 : 256;
const COMMANDS = SMOKE ? 10 : 100;
const STEPS = SMOKE ? 2 : 20;
const FAN_OUT = SMOKE ? [2, 4] : [10, 50, 100];
const SCALE = SMOKE ? SCALE_SHAPES.smoke : SCALE_SHAPES.full;

/** Times `import('tendril')` in a fresh Node, from the package's own directory, in ms. */
const IMPORT_TENDRIL =
  "const t = performance.now(); import('tendril').then(() => process.stdout.write(String(performance.now() - t)))";
/** The same for what a Mitogen script imports. */
const IMPORT_MITOGEN =
  'import time; t = time.perf_counter(); import mitogen.master, mitogen.utils; print((time.perf_counter() - t) * 1000, end="")';

const KINDS: [Kind, string][] = [
  ['local', 'local'],
  ['ssh', 'ssh'],
  ['sshsudo', 'ssh → sudo'],
];
const SIZE_NAMES = ['empty', '1 KiB', '64 KiB', '1 MiB'];
const GROUPS = {
  whole: 'Whole process, one call (start to exit)',
  ready: 'Time to a context that answered one call, in a warm master',
  rtt: 'Call round trip (after the same warm-up for each)',
  cold: `A new local context's first ${COLD_CALLS} empty calls, in a warm master`,
  isolated: 'Isolated calls (isolate: true): a fresh interpreter per call',
  bulk: 'Bulk',
  commands: `${COMMANDS} commands on one host`,
  steps: `${STEPS} trivial steps on one host (whole process)`,
  fanout: 'Fan-out: local contexts started at once, one call each (fresh master)',
  scale: scaleGroup(SCALE),
  memory: 'Memory',
  bytes: 'Bytes on the wire',
  cpu: 'CPU per 10,000 empty calls (user + system)',
};

ensurePackages({
  'python3-mitogen': '/usr/lib/python3/dist-packages/mitogen/__init__.py',
  'ansible-core': '/usr/bin/ansible-playbook',
  'ansible-mitogen': '/usr/lib/python3/dist-packages/ansible_mitogen/__init__.py',
});

// Node reads NODE_EXTRA_CA_CERTS when it starts, which on this kind of
// machine costs every Node process tens of milliseconds (Python ignores it).
// It is measured once as it is set, then removed for everything else.
const extraCaCerts = process.env.NODE_EXTRA_CA_CERTS;
delete process.env.NODE_EXTRA_CA_CERTS;

const rows: Row[] = [];
/** The scale row's raw reports, for --json (docs/performance.md's projection reads them). */
let scaleRaw: ScaleRaw | undefined;
/** Mitogen FileService throughput (MB/s), from its in-process run, for the bulk rows. */
const mitogenCopy: Record<string, number> = {};
const bed = await startTestbed();
// In memory, so the disk is not what is measured; writable by the ssh account.
const scratch = mkdtempSync(join('/dev/shm', 'tendril-bench-'));
chmodSync(scratch, 0o1777);
const bulkFile = join(scratch, 'bulk.bin');
writeBulkFile(bulkFile, BULK_MIB);
const sshTarget = {
  host: '127.0.0.1',
  port: bed.port,
  user: bed.accounts.sudoer.name,
  key: bed.keyFile,
  target: bed.accounts.target.name,
  knownHosts: bed.knownHosts,
  file: bulkFile,
};
const env: NodeJS.ProcessEnv = {
  ...process.env,
  BENCH_SSH: JSON.stringify(sshTarget),
  ...(SMOKE && { BENCH_SMOKE: '1' }),
};
const targets: Targets = {
  login: {
    hostname: '127.0.0.1',
    port: bed.port,
    username: sshTarget.user,
    identityFile: bed.keyFile,
    knownHostsFile: bed.knownHosts,
    sshConfig: false,
  },
  sudoTo: sshTarget.target,
};
const ssh = openSshArgs(bed, ['Compression=no']);

try {
  await wholeProcess();
  await inProcess();
  await bulk();
  await steps();
  await fanOut();
  const scaled = await scale(SCALE, env);
  rows.push(...scaled.rows);
  scaleRaw = scaled.raw;
} finally {
  await bed.stop();
  rmSync(scratch, { recursive: true, force: true });
}

// Grouped in the order of GROUPS (a row may be added after its group's others).
const order: string[] = Object.values(GROUPS);
const summaries = rows.sort((a, b) => order.indexOf(a.group) - order.indexOf(b.group)).map(summarise);
console.log(`\ntendril ${SMOKE ? 'smoke run' : 'benchmark'}: ${machine()}`);
printTable(summaries);
if (flags.json)
  writeFileSync(
    flags.json,
    `${JSON.stringify({ machine: machine(), versions: versions(), summaries, scale: scaleRaw }, null, 2)}\n`,
  );
if (flags['write-docs']) await writeDocs(summaries);

/**
 * A new local context's first calls, tendril and Mitogen alternating:
 * the wall time of each call, and each side's CPU per call.
 */
async function coldRows(router: Router, server: MitogenServer): Promise<void> {
  progress("a new context's first calls: tendril and Mitogen alternating");
  const mine: CallSamples[] = [];
  const theirs: CallSamples[] = [];
  for (let round = 0; round < FEW; round++) {
    mine.push(await coldCalls(router, COLD_CALLS));
    theirs.push(await server.request<CallSamples>({ op: 'cold', kind: 'local', count: COLD_CALLS }));
  }
  rows.push({
    group: GROUPS.cold,
    metric: 'round trip',
    unit: 'ms',
    tendril: mine.flatMap((s) => s.samples),
    peers: { Mitogen: median(theirs.flatMap((s) => s.samples)) },
  });
  for (const side of ['master', 'child'] as const) {
    rows.push({
      group: GROUPS.cold,
      metric: `${side === 'master' ? 'master' : 'context'} CPU per call (user + system)`,
      unit: 'µs',
      tendril: mine.map((s) => s[side]),
      peers: { Mitogen: median(theirs.map((s) => s[side])) },
    });
  }
}

/**
 * CPU per 10,000 empty calls on each side, tendril and Mitogen (its held
 * local context, which made the same round trips) alternating.
 */
async function cpuRows(context: Context, server: MitogenServer): Promise<void> {
  progress('CPU: tendril and Mitogen alternating');
  const count = SMOKE ? 1000 : 10_000;
  const mine: { master: number; child: number }[] = [];
  const theirs: { master: number; child: number }[] = [];
  for (let round = 0; round < FEW; round++) {
    mine.push(await cpuPer10k(context, count));
    theirs.push(await server.request<{ master: number; child: number }>({ op: 'cpu', kind: 'local', count }));
  }
  for (const side of ['master', 'child'] as const) {
    rows.push({
      group: GROUPS.cpu,
      metric: side,
      unit: 'ms CPU',
      tendril: mine.map((s) => s[side]),
      peers: { Mitogen: median(theirs.map((s) => s[side])) },
    });
  }
}

/** Appends `value` to the samples under `key`. */
function collect(samples: Record<string, number[]>, key: string, value: number): void {
  samples[key] ??= [];
  samples[key].push(value);
}

/** A file of random bytes (incompressible), `mib` MiB. */
function writeBulkFile(path: string, mib: number): void {
  const fd = openSync(path, 'w');
  const chunk = Buffer.alloc(MIB);
  for (let i = 0; i < mib; i++) {
    for (let j = 0; j < MIB; j += 4) chunk.writeUInt32LE((Math.random() * 0x1_0000_0000) >>> 0, j);
    writeSync(fd, chunk);
  }
  closeSync(fd);
}

/** 1: whole processes, tendril's script and Mitogen's alternating; the floors in the same rounds. */
async function wholeProcess(): Promise<void> {
  progress('whole process: tendril and Mitogen scripts, node -e 0, ssh host node -e 0');
  const samples: Record<string, number[]> = {};
  const add = (key: string, ms: number) => collect(samples, key, ms);
  const withCa = extraCaCerts === undefined ? undefined : { ...env, NODE_EXTRA_CA_CERTS: extraCaCerts };
  for (let round = 0; round < ROUNDS; round++) {
    for (const [kind] of KINDS) {
      add(`tendril-${kind}`, (await tendrilScript('call', [kind], env)).ms);
      add(`mitogen-${kind}`, (await mitogen([`whole-${kind === 'sshsudo' ? 'sshsudo' : kind}`], env)).ms);
    }
    add('node', (await run(process.execPath, ['-e', '0'], env)).ms);
    add('import', Number((await run(process.execPath, ['-e', IMPORT_TENDRIL], env)).stdout));
    add('import-mitogen', Number((await run(PYTHON, ['-c', IMPORT_MITOGEN], env)).stdout));
    add('ssh-node', (await run('ssh', [...ssh, 'node -e 0'], env)).ms);
    if (withCa) {
      add('tendril-ca', (await tendrilScript('call', ['local'], withCa)).ms);
      add('mitogen-ca', (await mitogen(['whole-local'], withCa)).ms);
      add('node-ca', (await run(process.execPath, ['-e', '0'], withCa)).ms);
    }
  }
  for (const [kind, label] of KINDS) {
    rows.push({
      group: GROUPS.whole,
      metric: label,
      unit: 'ms',
      tendril: samples[`tendril-${kind}`] ?? [],
      peers: { Mitogen: median(samples[`mitogen-${kind}`] ?? []) },
    });
  }
  if (withCa) {
    rows.push({
      group: GROUPS.whole,
      metric: 'local, with NODE_EXTRA_CA_CERTS as set here',
      unit: 'ms',
      tendril: samples['tendril-ca'] ?? [],
      peers: { Mitogen: median(samples['mitogen-ca'] ?? []), 'node -e 0 with it': median(samples['node-ca'] ?? []) },
    });
  }
  rows.push({
    group: GROUPS.whole,
    metric: "import('tendril'), in process",
    unit: 'ms',
    tendril: samples.import ?? [],
    peers: { 'import mitogen.master': median(samples['import-mitogen'] ?? []) },
  });
  rows.push({ group: GROUPS.whole, metric: 'floor: node -e 0', unit: 'ms', tendril: samples.node ?? [], peers: {} });
  rows.push({
    group: GROUPS.whole,
    metric: 'floor: ssh host node -e 0',
    unit: 'ms',
    tendril: samples['ssh-node'] ?? [],
    peers: {},
  });
}

/**
 * 2, 3, 5, 8, 9, 10, in one warm master each. Time to a context and round
 * trips alternate with Mitogen's (its driver in serve mode) and the raw
 * echo; the rest come from Mitogen's inproc run, just before tendril's.
 */
async function inProcess(): Promise<void> {
  progress('in process: Mitogen');
  const theirs = JSON.parse((await mitogen(['inproc'], env)).stdout) as Record<string, number[]>;
  const peer = (key: string) => median(theirs[key] ?? []);
  const server = new MitogenServer(env);
  const echo = new EchoFloor();
  const router = new Router();
  const held: Context[] = [];
  try {
    progress('time to a context: tendril and Mitogen alternating');
    const ready: Record<string, number[]> = {};
    for (let round = -1; round < ROUNDS; round++) {
      for (const [kind] of KINDS) {
        const mine = await readyOnce(router, kind, targets);
        const other = await server.request<number>({ op: 'ready', kind });
        // Round -1 warms both masters.
        if (round < 0) continue;
        collect(ready, `tendril-${kind}`, mine);
        collect(ready, `mitogen-${kind}`, other);
      }
    }
    const floor = (metric: string) => median(rows.find((r) => r.metric === metric)?.tendril ?? []);
    const floors: Record<string, Record<string, number>> = {
      local: { 'node -e 0': floor('floor: node -e 0') },
      ssh: { 'ssh host node -e 0': floor('floor: ssh host node -e 0') },
      sshsudo: {},
    };
    for (const [kind, label] of KINDS) {
      rows.push({
        group: GROUPS.ready,
        metric: label,
        unit: 'ms',
        tendril: ready[`tendril-${kind}`] ?? [],
        peers: { Mitogen: median(ready[`mitogen-${kind}`] ?? []), ...floors[kind] },
      });
    }

    progress('round trips: tendril, Mitogen and the raw echo alternating');
    const contexts: Record<string, Context> = {};
    for (const [kind] of KINDS) contexts[kind] = await start(router, kind, targets, held);
    const chunks = SMOKE ? 1 : 5;
    for (const [kind, label] of KINDS) {
      for (const [i, size] of SIZES.entries()) {
        const count = Math.max(1, Math.floor(callsOf(size, CALLS) / chunks));
        const samples: Record<string, number[]> = { tendril: [], mitogen: [], echo: [] };
        // The same warm-up for all three: V8 optimizes a function only after it has run some
        // thousands of times, and until then a call costs both sides several times its steady
        // cost (the cold row below measures that part).
        const warm = SMOKE ? 1 : warmCallsOf(size);
        await roundTrips(contexts[kind] as Context, size, warm);
        await server.request<number[]>({ op: 'rtt', kind, size, count: warm });
        if (kind === 'local') await echo.trips(size, warm);
        for (let chunk = 0; chunk < chunks; chunk++) {
          const mine = await roundTrips(contexts[kind] as Context, size, count);
          const other = await server.request<number[]>({ op: 'rtt', kind, size, count });
          const floor = kind === 'local' ? await echo.trips(size, count) : [];
          samples.tendril?.push(...mine);
          samples.mitogen?.push(...other);
          samples.echo?.push(...floor);
        }
        const peers: Record<string, number> = { Mitogen: median(samples.mitogen ?? []) };
        if (kind === 'local') peers['raw Node pipe echo'] = median(samples.echo ?? []);
        rows.push({
          group: GROUPS.rtt,
          metric: `${label}, ${SIZE_NAMES[i]}`,
          unit: 'ms',
          tendril: samples.tendril ?? [],
          peers,
        });
      }
    }
    await coldRows(router, server);
    await cpuRows(contexts.local as Context, server);
    await commandRows(router, contexts, server);
    await server.close();

    progress('isolated calls');
    for (const [kind, label] of KINDS) {
      if (kind === 'sshsudo') continue;
      const isolation = await isolatedCalls(contexts[kind] as Context, SMOKE ? 1 : 10);
      const beside = {
        'empty call': median(isolation.normal),
        'node -e 0 on that host': median(isolation.nodeE0),
      };
      rows.push({
        group: GROUPS.isolated,
        metric: `${label}, spare started`,
        unit: 'ms',
        tendril: isolation.warm,
        peers: beside,
      });
      rows.push({
        group: GROUPS.isolated,
        metric: `${label}, back to back`,
        unit: 'ms',
        tendril: isolation.backToBack,
        peers: beside,
      });
    }

    progress('memory');
    const idleChild = await idleChildRss(router);
    rows.push({
      group: GROUPS.memory,
      metric: 'RSS of an idle local child',
      unit: 'bytes',
      tendril: [idleChild],
      peers: { Mitogen: peer('idle-child-rss') },
    });

    progress('bytes');
    const wire = await bytes();
    rows.push({
      group: GROUPS.bytes,
      metric: 'first stage (command line)',
      unit: 'bytes',
      tendril: [wire.firstStage ?? Number.NaN],
      peers: {},
    });
    rows.push({
      group: GROUPS.bytes,
      metric: 'to a ready local context, both ways',
      unit: 'bytes',
      tendril: [wire.ready ?? Number.NaN],
      peers: {},
    });
    rows.push({
      group: GROUPS.bytes,
      metric: 'a via hop (local via local)',
      unit: 'bytes',
      tendril: [wire.hop ?? Number.NaN],
      peers: {},
    });
    rows.push({
      group: GROUPS.bytes,
      metric: "first call importing chalk's package graph",
      unit: 'bytes',
      tendril: [wire.graph ?? Number.NaN],
      peers: {},
    });

    progress('Sender streams');
    const rates = await senderRates(router, contexts.local as Context, BULK_MIB);
    rows.push({
      group: GROUPS.bulk,
      metric: `Sender stream, local context → master, ${BULK_MIB} MiB`,
      unit: 'MB/s',
      tendril: [rates.up],
      peers: {},
    });
    rows.push({
      group: GROUPS.bulk,
      metric: `Channel, master → local context, ${BULK_MIB} MiB`,
      unit: 'MB/s',
      tendril: [rates.down],
      peers: {},
    });
    for (const key of ['local', 'ssh']) {
      const ms = theirs[`copy-${key}`];
      if (ms) mitogenCopy[key] = (BULK_MIB * MIB) / 1e6 / (median(ms) / 1000);
    }
  } finally {
    echo.close();
    await Promise.race([server.close(), new Promise((resolve) => setTimeout(resolve, 5000))]);
    await router.shutdown();
  }
}

/** 4: a file copied to a local and an ssh context, beside cat through a pipe and through ssh. */
/**
 * 5: commands, tendril and Mitogen alternating on contexts that have both
 * made the round trips above (Mitogen's through its driver in serve mode),
 * beside OpenSSH, and tendril's command spawner beside Node's own spawn in
 * local contexts fresh and after 1 MiB calls (a context that has held a
 * lot of memory costs Node's fork more).
 */
async function commandRows(router: Router, contexts: Record<string, Context>, server: MitogenServer): Promise<void> {
  progress('commands');
  const mine: number[] = [];
  const theirs: number[] = [];
  const plain: number[] = [];
  const master: number[] = [];
  const control = mkdtempSync(join(tmpdir(), 'tendril-bench-cm-'));
  const controlArgs = openSshArgs(bed, [
    'Compression=no',
    'ControlMaster=auto',
    `ControlPath=${control}/%C`,
    'ControlPersist=60',
  ]);
  for (let i = -1; i < FEW; i++) {
    // Round -1 warms each up (the spawner starts on a context's first command).
    const round = [
      await commands(contexts.ssh as Context, COMMANDS),
      await server.request<number>({ op: 'commands', kind: 'ssh', count: COMMANDS }),
      await timeShell(`for i in $(seq ${COMMANDS}); do ssh ${ssh.map(shellQuote).join(' ')} true; done`),
      await timeShell(`for i in $(seq ${COMMANDS}); do ssh ${controlArgs.map(shellQuote).join(' ')} true; done`),
    ];
    if (i < 0) continue;
    mine.push(round[0] as number);
    theirs.push(round[1] as number);
    plain.push(round[2] as number);
    master.push(round[3] as number);
  }
  await run('ssh', [...controlArgs.slice(0, -1), '-O', 'exit', controlArgs.at(-1) as string]).catch(() => {});
  rmSync(control, { recursive: true, force: true });
  rows.push({
    group: GROUPS.commands,
    metric: `exec('true') x ${COMMANDS} in an ssh context`,
    unit: 'ms',
    tendril: mine,
    peers: {
      'ssh host true': median(plain),
      'ssh host true, ControlMaster': median(master),
      Mitogen: median(theirs),
    },
  });

  const spawner = await router.local();
  const nodeSpawn = await router.local({ env: { ...process.env, TENDRIL_EXEC_SPAWNER: 'node' } });
  for (const state of ['fresh', 'after 1 MiB calls'] as const) {
    if (state !== 'fresh') for (const context of [spawner, nodeSpawn]) await roundTrips(context, MIB, SMOKE ? 2 : 30);
    const samples: number[][] = [[], [], []];
    for (let i = -1; i < FEW; i++) {
      const round = [
        await commands(spawner, COMMANDS),
        await commands(nodeSpawn, COMMANDS),
        await server.request<number>({ op: 'commands', kind: 'local', count: COMMANDS }),
      ];
      if (i >= 0) for (const [j, value] of round.entries()) samples[j]?.push(value);
    }
    const rss = await spawner.call(() => process.memoryUsage().rss);
    rows.push({
      group: GROUPS.commands,
      metric: `exec('true') x ${COMMANDS} in a local context, ${state} (its RSS ${(rss / MIB).toFixed(0)} MiB)`,
      unit: 'ms',
      tendril: samples[0] ?? [],
      peers: {
        "Node's spawn (TENDRIL_EXEC_SPAWNER=node)": median(samples[1] ?? []),
        Mitogen: median(samples[2] ?? []),
      },
    });
  }
  await Promise.all([spawner.shutdown(), nodeSpawn.shutdown()]);
}

async function bulk(): Promise<void> {
  progress(`bulk: ${BULK_MIB} MiB`);
  const router = new Router();
  try {
    const local = await router.local();
    const remote = await router.ssh(targets.login);
    const rate = (ms: number) => (BULK_MIB * MIB) / 1e6 / (ms / 1000);
    const mine: Record<string, number[]> = { local: [], ssh: [] };
    const cats: Record<string, number[]> = { local: [], ssh: [] };
    for (let i = 0; i < FEW; i++) {
      for (const [key, context] of [
        ['local', local],
        ['ssh', remote],
      ] as const) {
        const dest = join(scratch, `copy-${key}.bin`);
        const started = performance.now();
        await context.copy(bulkFile, dest);
        mine[key]?.push(rate(performance.now() - started));
        rmSync(dest, { force: true });
      }
      cats.local?.push(rate(await timeShell(`cat ${shellQuote(bulkFile)} | cat > /dev/null`)));
      cats.ssh?.push(
        rate(await timeShell(`cat ${shellQuote(bulkFile)} | ssh ${ssh.map(shellQuote).join(' ')} 'cat > /dev/null'`)),
      );
    }
    rows.push({
      group: GROUPS.bulk,
      metric: `copy ${BULK_MIB} MiB to a local context`,
      unit: 'MB/s',
      tendril: mine.local ?? [],
      peers: { 'Mitogen FileService': mitogenCopy.local ?? Number.NaN, 'cat | cat': median(cats.local ?? []) },
    });
    rows.push({
      group: GROUPS.bulk,
      metric: `copy ${BULK_MIB} MiB to an ssh context`,
      unit: 'MB/s',
      tendril: mine.ssh ?? [],
      peers: { 'Mitogen FileService': mitogenCopy.ssh ?? Number.NaN, 'cat | ssh cat': median(cats.ssh ?? []) },
    });
  } finally {
    await router.shutdown();
  }
}

/** 6: the same steps as a tendril script and as ansible-playbook, three ways. */
async function steps(): Promise<void> {
  progress(`${STEPS} steps: tendril script and ansible-playbook`);
  const dir = writePlaybook(
    { port: bed.port, user: sshTarget.user, key: bed.keyFile, knownHosts: bed.knownHosts },
    STEPS,
  );
  const target = { port: bed.port, user: sshTarget.user, key: bed.keyFile, knownHosts: bed.knownHosts };
  const mine: number[] = [];
  const theirs: Record<string, number[]> = {};
  try {
    for (let i = 0; i < FEW; i++) {
      mine.push((await tendrilScript('steps', [String(STEPS)], env)).ms);
      for (const variant of ANSIBLE_VARIANTS) {
        theirs[variant] ??= [];
        theirs[variant].push(await runPlaybook(dir, target, variant));
      }
    }
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
  rows.push({
    group: GROUPS.steps,
    metric: `tendril script: ssh context, exec('true') x ${STEPS}`,
    unit: 'ms',
    tendril: mine,
    peers: Object.fromEntries(ANSIBLE_VARIANTS.map((v) => [`Ansible ${v}`, median(theirs[v] ?? [])])),
  });
}

/** 7: N local contexts at once, each in a fresh master process: wall time and the master's peak RSS. */
async function fanOut(): Promise<void> {
  // The master's peak RSS at the smallest and largest fan-out: its slope is the memory per context held.
  const peaks: Record<string, number[]> = {};
  for (const count of FAN_OUT) {
    progress(`fan-out: ${count} contexts`);
    const mine: { wall: number; rss: number }[] = [];
    const theirs: { wall: number; rss: number }[] = [];
    for (let i = 0; i < FEW; i++) {
      mine.push(JSON.parse((await tendrilScript('fanout', [String(count)], env)).stdout));
      theirs.push(JSON.parse((await mitogen(['fanout', String(count)], env)).stdout));
    }
    rows.push({
      group: GROUPS.fanout,
      metric: `${count} contexts, wall time`,
      unit: 'ms',
      tendril: mine.map((m) => m.wall),
      peers: { Mitogen: median(theirs.map((m) => m.wall)) },
    });
    rows.push({
      group: GROUPS.fanout,
      metric: `${count} contexts, master peak RSS`,
      unit: 'bytes',
      tendril: mine.map((m) => m.rss),
      peers: { Mitogen: median(theirs.map((m) => m.rss)) },
    });
    collect(peaks, 'tendril', median(mine.map((m) => m.rss)));
    collect(peaks, 'mitogen', median(theirs.map((m) => m.rss)));
  }
  const slope = (values: number[] = []) =>
    ((values.at(-1) ?? Number.NaN) - (values[0] ?? Number.NaN)) / ((FAN_OUT.at(-1) ?? 0) - (FAN_OUT[0] ?? 0));
  rows.push({
    group: GROUPS.memory,
    metric: `master RSS per local context (peak RSS, ${FAN_OUT[0]} to ${FAN_OUT.at(-1)} contexts)`,
    unit: 'bytes',
    tendril: [slope(peaks.tendril)],
    peers: { Mitogen: slope(peaks.mitogen) },
  });
}

function machine(): string {
  return `${cpus().length} × ${cpus()[0]?.model ?? 'unknown CPU'}, ${new Date().toISOString().slice(0, 10)}`;
}

function versions(): Record<string, string> {
  let mitogenVersion = 'unknown';
  try {
    // dpkg-query's own format syntax, not a template.
    // biome-ignore lint/suspicious/noTemplateCurlyInString: dpkg-query expands ${Version} itself.
    mitogenVersion = execFileSync('dpkg-query', ['-W', '-f', '${Version}', 'python3-mitogen'], { encoding: 'utf8' });
  } catch {
    // Reported as unknown.
  }
  return {
    Node: process.version,
    OpenSSH: versionOf('ssh', ['-V']),
    'Mitogen (python3-mitogen)': mitogenVersion,
    Python: versionOf(PYTHON, ['--version']),
    Ansible: versionOf('/usr/bin/ansible-playbook', ['--version']),
  };
}

/** The fan-out's master RSS per context, each side: what each intermediate costs the master in the projection. */
function perDirectContext(all: Summary[]): { tendril?: number; Mitogen?: number } {
  const row = all.find((s) => s.group === GROUPS.memory && s.metric.startsWith('master RSS per local context'));
  return row ? { tendril: row.median, Mitogen: row.peers.Mitogen?.median } : {};
}

/** `doc` with what lies between `<!-- NAME:begin -->` and `<!-- NAME:end -->` replaced by `text`. */
function replaceBetween(doc: string, name: string, text: string): string {
  const begin = `<!-- ${name}:begin -->`;
  const end = `<!-- ${name}:end -->`;
  const at = doc.indexOf(begin);
  const until = doc.indexOf(end);
  if (at === -1 || until === -1) throw new Error(`docs/performance.md has no ${begin} ... ${end} section to rewrite`);
  return `${doc.slice(0, at)}${begin}\n\n${text}\n\n${doc.slice(until)}`;
}

/** Rewrites the generated part of docs/performance.md and the plot. */
async function writeDocs(all: Summary[]): Promise<void> {
  const path = join(ROOT, 'docs', 'performance.md');
  const doc = readFileSync(path, 'utf8');
  const begin = '<!-- bench:begin -->';
  const end = '<!-- bench:end -->';
  const at = doc.indexOf(begin);
  const until = doc.indexOf(end);
  if (at === -1 || until === -1) throw new Error(`${path} has no ${begin} ... ${end} section to rewrite`);
  const facts = Object.entries(versions())
    .map(([name, version]) => `- ${name}: ${version}`)
    .join('\n');
  const generated = `${begin}\n\nMeasured on ${machine()}.\n\n${facts}\n\n${markdownTable(all)}\n\n${end}`;
  let written = doc.slice(0, at) + generated + doc.slice(until + end.length);
  if (scaleRaw) written = replaceBetween(written, 'scale', projectionTable(scaleRaw, perDirectContext(all)));
  writeFileSync(path, written);
  // In the layout the lint step (biome) checks.
  execFileSync(join(ROOT, 'node_modules', '.bin', 'biome'), ['format', '--write', path], { stdio: 'ignore' });
  writeFileSync(join(ROOT, 'docs', 'performance.svg'), await plot(all, GROUPS.rtt, GROUPS.bulk));
  console.log(`wrote ${path} and docs/performance.svg`);
}
