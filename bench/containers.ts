// `npm run bench:containers`: the container methods beside their floors
// and Mitogen's same methods (Debian's python3-mitogen), every figure
// measured in this run, tendril, Mitogen and the floors alternating so
// drift hits all alike (issue 22). Each runtime is the test suite's own
// private bed (bench/compare/container-beds.ts: a Podman store, a
// containerd and dockerd, an lxcpath, LXD and Incus daemons, a chroot
// tree, the kubectl mock), removed at the end with every container in it,
// also when the bench fails:
//
// - time to a context that answered one call, per method: podman exec,
//   buildah run, sudo → podman (both started), podman via a held sudo
//   context, podman run --rm of an image, docker exec, docker run --rm,
//   lxc-attach, LXD's lxc exec, incus exec, setns by pid and by podman
//   container, chroot, kubectl exec (a mock over podman exec: no cluster
//   runs here); beside the floor, the tool's own start of `node -e 0`
//   (start to exit, as the issue defines it) and the same command to
//   Node's first byte on stdout (the engine's exec without its teardown),
//   and beside Mitogen's method and its floor, `python3 -c 0`, where
//   Mitogen 0.3.3 has the method (the output says why where not);
// - for the podman and buildah ways: an empty call's round trip,
//   tendril's and Mitogen's, and exec('true') x 100 in the container,
//   beside Mitogen's subprocess.check_call(['true']), the tool's own exec
//   of `true` (20 timed, scaled to 100), and Node's own execFile('true')
//   run in the context (what spawning costs the container's Node, under
//   any protocol);
// - where the time goes: the child's age when it answers its first call
//   beside Node's age when it runs its first line (-e) in the same
//   container, the container's Node doing what the first stage and the
//   core do after -e, step by step (requires, reading the code cache,
//   inflating, compiling, the core's module code), a sudo context alone
//   (the first hop of sudo → podman), the bytes sent to a fresh via before
//   it can start podman (tendril's connection and containers bundles), the
//   first stage and the core. A start that fails (LXD's exec does now and then) is taken
//   again, up to 3 times, and listed.
//
// The image: the test image with python3 added (bench/compare/python-image.ts),
// since Mitogen's children are Python. Mitogen's methods take a tool path
// but no global options, so they run a two-line wrapper that adds the
// bed's options (an sh exec, about 1 ms); the Mitogen floors run that
// wrapper too.
//
//   node build/bench/containers.js [--smoke] [--rounds N] [--json FILE] [--target-code-cache]
import { spawn } from 'node:child_process';
import { readFileSync, writeFileSync } from 'node:fs';
import { cpus } from 'node:os';
import { join } from 'node:path';
import { type Context, Router } from 'tendril';
import { CONTAINER_LIMITS } from '../test/support/containers.js';
import { commandLine } from './cli.js';
import { CONTAINER, ContainerBeds, WORK } from './compare/container-beds.js';
import { ensurePackages, MitogenServer, ROOT, run } from './compare/processes.js';
import { printTable, type Row, type Summary, summarise } from './compare/results.js';
import { commands, roundTrips } from './compare/tendril.js';
import { median, progress } from './flow-shared.js';

const { values: flags } = commandLine({
  script: 'node build/bench/containers.js',
  description: `The container methods (npm run bench:containers): time to a context that answered one
call for every method (podman, buildah, sudo → podman, docker, LXC, LXD, Incus, setns, chroot,
kubectl through a mock), beside the tool's own exec of node -e 0 and Mitogen's same methods; an
empty call's round trip and exec('true') x 100 for the podman and buildah ways. Each runtime on a
private store or daemon of the bench's own. Needs root and python3-mitogen.`,
  options: {
    smoke: { type: 'boolean', description: 'every measurement once, with few iterations (what the suite runs)' },
    rounds: {
      type: 'string',
      value: 'N',
      description: 'rounds of the time to a context, after one warm-up round (default 10; 1 with --smoke)',
    },
    json: { type: 'string', value: 'FILE', description: 'also write the results as JSON to FILE' },
    'target-code-cache': {
      type: 'boolean',
      description:
        "start contexts with the Router's targetCodeCache: true (a code cache of the core kept in each container)",
    },
  },
});
const SMOKE = flags.smoke === true;
const ROUNDS = rounds(flags.rounds, SMOKE ? 1 : 10);
const FEW = SMOKE ? 1 : 3;
const CALLS = SMOKE ? 20 : 1000;
const COMMANDS = SMOKE ? 5 : 100;
/** How many of the tool's own `exec C true` are timed for the commands floor (scaled to COMMANDS). */
const FLOOR_RUNS = Math.min(COMMANDS, 20);
/** The issue's bar: a container context within this factor of the tool's own exec of `node -e 0`. */
const BAR = 1.2;

/** What Node's first line prints in the container: its age then, in ms. */
const NODE_AGE = 'process.stdout.write(String(process.uptime() * 1000))';

/**
 * A program for `node -e` that does what the container's Node does
 * between running -e and answering, step by step as the first stage and
 * the core do it (the deflated core read from stdin here, not the
 * stream), and prints each step's ms as JSON: the first stage's requires,
 * reading the core's code cache from the account's cache directory (as
 * the first stage names it: `key` is the core's, from the built first
 * stage), inflating the core, compiling it with that cache, the requires
 * its module code makes at once (made ahead here, to time them apart),
 * the rest of its module code; then 1 when V8 took the cache, 0 when there
 * was none or it was refused. Without `useCache` (the Router's
 * targetCodeCache off, the default) no cache is looked for, as the first
 * stage does.
 */
const coreStepsProgram = (
  key: string,
  useCache: boolean,
) => `const h=()=>Number(process.hrtime.bigint())/1e6;const a=h();
const r=require;r('net');r('vm');const b=h();
const p=process,v=p.env,home=v.XDG_CACHE_HOME||v.HOME+'/.cache';let x=0;for(const ch of p.execPath)x=(x*31+ch.charCodeAt(0))|0;
let cache;if(${useCache})try{cache=r('fs').readFileSync(home+'/tendril/core-${key}-'+p.version+'-'+p.arch+'-'+(x>>>0).toString(36)+'.v8')}catch{}const c=h();
const core=r('fs').readFileSync(0);const c2=h();const src=r('zlib').inflateRawSync(core)+'';const d=h();
const s=new (r('vm').Script)(src,{filename:'tendril:core',cachedData:cache});const e=h();r('os');r('url');const f=h();
s.runInThisContext()(r);const g=h();process.stdout.write(JSON.stringify([b-a,c-b,d-c2,e-d,f-e,g-f,cache&&!s.cachedDataRejected?1:0]))`;

const GROUPS = {
  ready: 'Time to a context that answered one call, in a warm master',
  rtt: 'Empty call round trip',
  commands: `exec('true') x ${COMMANDS} in the container`,
  where: 'Where the time goes',
};

ensurePackages({ 'python3-mitogen': '/usr/lib/python3/dist-packages/mitogen/__init__.py' });
// Node reads NODE_EXTRA_CA_CERTS when it starts (tens of ms here); the
// local sudo context would pay it, the containers never see it.
delete process.env.NODE_EXTRA_CA_CERTS;

/** A way into the container: how tendril starts it, Mitogen's kind for it, and its floors. */
interface Way {
  label: string;
  /** Starts the context (and any via), pushing each onto `held`, the one to call last. */
  start: (router: Router, held: Context[]) => Promise<Context>;
  /** Floors besides the tool's own `node -e 0`: label → argv, timed from start to exit. */
  moreFloors?: Record<string, string[]>;
  /** The kind bench/peers/mitogen_bench.py serves, when Mitogen has this method. */
  mitogen?: string;
  /** Why there is no Mitogen row, when Mitogen 0.3.3 has no such method or it cannot reach the bed. */
  noMitogen?: string;
  /** The tool's own start of a program in the container: argv before the program. */
  tool: string[];
  /** The environment the tool runs with (its daemon's directory), when not the bench's own. */
  toolEnv?: NodeJS.ProcessEnv;
  /** The same for Mitogen (through its wrapper). */
  mitogenTool?: string[];
  /** The tool's own run of `true`, for the commands row; shared between ways that run the same. */
  commandsFloor?: string;
}

const rows: Row[] = [];
/** Why a way has no Mitogen row, by its label. */
const noMitogen = new Map<string, string>();
/** What failed and was measured again: the way, what was measured, the first line of the error. */
const retried: { way: string; what: string; error: string }[] = [];
/** How many times one measurement is tried before the bench gives up. */
const TRIES = 3;
const beds = new ContainerBeds();
const router = new Router({ targetCodeCache: flags['target-code-cache'] === true });
let server: MitogenServer | undefined;
try {
  await beds.start();
  const { podman: bed, docker, lxc, lxd, incus } = beds;
  const image = beds.python.image;
  const container = CONTAINER;
  const work = WORK;

  // Mitogen's tool paths are one program each: these add the beds' options.
  const wrappers = {
    podman: beds.wrapper('podman', ['podman', ...bed.args]),
    buildah: beds.wrapper('buildah', ['buildah', ...bed.buildahArgs]),
    docker: beds.wrapper('docker', ['docker', ...docker.args]),
    lxcAttach: beds.wrapper('lxc-attach', ['lxc-attach', '--lxcpath', lxc.dir]),
    lxd: beds.wrapper('lxc', ['lxc'], { LXD_DIR: lxd.socketDir }),
  };
  const env = {
    ...process.env,
    BENCH_CONTAINERS: JSON.stringify({
      podman: wrappers.podman,
      buildah: wrappers.buildah,
      docker: wrappers.docker,
      lxc_attach: wrappers.lxcAttach,
      lxd: wrappers.lxd,
      container,
      work,
      image,
      lxc_container: beds.lxcContainer,
      lxd_container: beds.lxdContainer,
    }),
    ...(SMOKE && { BENCH_SMOKE: '1' }),
  };
  server = new MitogenServer(env);

  const podmanExec = ['podman', ...bed.args, 'exec', '--interactive', container];
  const sudoPodmanExec = ['sudo', ...podmanExec];
  const leader = Number(bed.podman(['inspect', '--format', '{{.State.Pid}}', container]));
  const nsenter = ['-m', '-u', '-i', '-n', '-p', '-r', '-w'];
  // The floor of setns by name: the leader found as the method finds it, then nsenter.
  const inspectThenNsenter = [
    'sh',
    '-c',
    `exec nsenter -t "$(podman ${bed.args.join(' ')} inspect --format '{{.State.Pid}}' ${container})" ${nsenter.join(' ')} -- "$@"`,
    'sh',
  ];
  let heldSudo: Context | undefined;
  const ways: Way[] = [
    {
      label: 'podman exec',
      start: async (r, held) => keep(held, await r.podman({ container, podmanArgs: bed.args })),
      mitogen: 'podman',
      tool: podmanExec,
      mitogenTool: [wrappers.podman, 'exec', '--interactive', container],
      commandsFloor: 'podman exec C true',
    },
    {
      label: 'buildah run',
      start: async (r, held) => keep(held, await r.buildah({ container: work, buildahArgs: bed.buildahArgs })),
      mitogen: 'buildah',
      tool: ['buildah', ...bed.buildahArgs, 'run', work],
      mitogenTool: [wrappers.buildah, 'run', work],
      commandsFloor: 'buildah run C true',
    },
    {
      label: 'sudo → podman exec, both started',
      start: async (r, held) => {
        const sudo = keep(held, await r.sudo());
        return keep(held, await r.podman({ container, podmanArgs: bed.args, via: sudo }));
      },
      mitogen: 'sudo-podman',
      tool: sudoPodmanExec,
      moreFloors: {
        // The processes the chain needs at least: a Node under sudo, which runs podman exec.
        'floor: sudo node, running podman exec C node -e 0': [
          'sudo',
          process.execPath,
          '-e',
          `require('child_process').execFileSync(${JSON.stringify(podmanExec[0])}, ${JSON.stringify([...podmanExec.slice(1), 'node', '-e', '0'])})`,
        ],
      },
      mitogenTool: ['sudo', wrappers.podman, 'exec', '--interactive', container],
      commandsFloor: 'podman exec C true',
    },
    {
      label: 'podman exec via a held sudo context',
      start: async (r, held) => {
        heldSudo ??= await r.sudo({ name: 'held-sudo' });
        return keep(held, await r.podman({ container, podmanArgs: bed.args, via: heldSudo }));
      },
      mitogen: 'held-sudo-podman',
      tool: podmanExec,
      mitogenTool: [wrappers.podman, 'exec', '--interactive', container],
      commandsFloor: 'podman exec C true',
    },
    {
      label: 'podman run --rm IMAGE',
      start: async (r, held) => keep(held, await r.podman({ image, runArgs: CONTAINER_LIMITS, podmanArgs: bed.args })),
      noMitogen: "Mitogen 0.3.3's podman method takes a container only, no image",
      tool: ['podman', ...bed.args, 'run', '--interactive', '--rm', ...CONTAINER_LIMITS, image],
    },
    {
      label: 'docker exec',
      start: async (r, held) => keep(held, await r.docker({ container, dockerArgs: docker.args })),
      mitogen: 'docker',
      tool: ['docker', ...docker.args, 'exec', '--interactive', container],
      mitogenTool: [wrappers.docker, 'exec', '--interactive', container],
    },
    {
      label: 'docker run --rm IMAGE',
      start: async (r, held) => keep(held, await r.docker({ image, dockerArgs: docker.args })),
      mitogen: 'docker-image',
      tool: ['docker', ...docker.args, 'run', '--interactive', '--rm', image],
      mitogenTool: [wrappers.docker, 'run', '--interactive', '--rm', image],
    },
    {
      label: 'lxc-attach (LXC)',
      start: async (r, held) => keep(held, await r.lxc({ container: beds.lxcContainer, lxcDirectory: lxc.dir })),
      mitogen: 'lxc',
      tool: ['lxc-attach', '--lxcpath', lxc.dir, '--clear-env', '--name', beds.lxcContainer, '--'],
      mitogenTool: [wrappers.lxcAttach, '--clear-env', '--name', beds.lxcContainer, '--'],
    },
    {
      label: 'lxc exec (LXD)',
      start: async (r, held) => keep(held, await r.lxd({ container: beds.lxdContainer, lxdDirectory: lxd.socketDir })),
      mitogen: 'lxd',
      tool: ['lxc', 'exec', '--mode=non-interactive', beds.lxdContainer, '--'],
      toolEnv: lxd.env(),
      // Mitogen's own spelling of the mode (LXD reads it as auto, which with pipes is non-interactive).
      mitogenTool: [wrappers.lxd, 'exec', '--mode=noninteractive', beds.lxdContainer, '--'],
    },
    {
      label: 'incus exec',
      start: async (r, held) =>
        keep(held, await r.incus({ container: beds.incusContainer, incusDirectory: incus.socketDir })),
      noMitogen: 'Mitogen 0.3.3 has no incus method (it came in a later release)',
      tool: ['incus', 'exec', '--mode=non-interactive', beds.incusContainer, '--'],
      toolEnv: incus.env(),
    },
    {
      label: 'setns pid=N (the podman container)',
      start: async (r, held) => keep(held, await r.setns({ pid: leader })),
      noMitogen: "Mitogen's setns finds the leader by a runtime's name only, no pid: see the next row",
      tool: ['nsenter', '-t', String(leader), ...nsenter, '--'],
    },
    {
      label: 'setns podman container (podman inspect, then nsenter)',
      start: async (r, held) => keep(held, await r.setns({ container, runtime: 'podman', runtimeArgs: bed.args })),
      // Mitogen's kind docker with podman as docker_path: podman inspect answers alike.
      mitogen: 'setns-podman',
      tool: inspectThenNsenter,
      mitogenTool: inspectThenNsenter,
    },
    {
      label: 'chroot',
      start: async (r, held) => keep(held, await r.chroot({ path: beds.tree })),
      noMitogen: 'Mitogen 0.3.3 has no chroot method (its jail method is for FreeBSD)',
      tool: ['chroot', beds.tree],
    },
    {
      label: 'kubectl exec (a mock over podman exec)',
      start: async (r, held) =>
        keep(held, await r.kubectl({ pod: container, kubectlPath: beds.kubectl, kubeconfig: beds.kubeconfig })),
      noMitogen: "Mitogen's kubectl runs `exec -it` (a tty, which the mock, like tendril, leaves out of the data path)",
      tool: [beds.kubectl, '--kubeconfig', beds.kubeconfig, 'exec', '-i', container, '--'],
    },
  ];

  await timeToContext(ways, server);
  await sudoAlone();
  await coreSteps(podmanExec);
  await callsAndCommands(
    ways.filter((way) => way.commandsFloor !== undefined),
    server,
    {
      'podman exec C true': [...podmanExec, 'true'],
      'buildah run C true': ['buildah', ...bed.buildahArgs, 'run', work, 'true'],
    },
  );
} finally {
  try {
    // Mitogen's driver may have died already (its error is what the bench reports): no wait for an exit that came.
    await Promise.race([server?.close(), new Promise((resolve) => setTimeout(resolve, 5000).unref())]);
    await router.shutdown();
  } finally {
    await beds.stop();
  }
}

const order: string[] = Object.values(GROUPS);
const summaries = rows.sort((a, b) => order.indexOf(a.group) - order.indexOf(b.group)).map(summarise);
console.log(`\ntendril containers ${SMOKE ? 'smoke run' : 'benchmark'}: ${machine()}`);
printTable(summaries);
printBar(summaries);
printRetried();
if (flags.json) {
  // The beds' directories are named so the suite can check they are gone.
  const results = {
    machine: machine(),
    stores: beds.dirs,
    noMitogen: Object.fromEntries(noMitogen),
    retried,
    summaries,
  };
  writeFileSync(flags.json, `${JSON.stringify(results, null, 2)}\n`);
}

/** The value of --rounds: a whole number of at least 1, else `fallback`; anything else ends the bench (exit 2). */
function rounds(value: string | undefined, fallback: number): number {
  if (value === undefined) return fallback;
  if (/^[1-9]\d{0,3}$/.test(value)) return Number(value);
  console.error(`--rounds takes a whole number from 1 to 9999, not '${value}'`);
  process.exit(2);
}

function keep(held: Context[], context: Context): Context {
  held.push(context);
  return context;
}

/** Appends `value` to the samples under `key`. */
function collect(samples: Record<string, number[]>, key: string, value: number): void {
  samples[key] ??= [];
  samples[key].push(value);
}

/**
 * Time to a context that answered one call, in ms, and the context's age
 * (its process.uptime()) when it answered, in ms; then shuts it (and what
 * it was started through) down. `viaBytes`: what the master sent the first
 * of them in module responses, when it was a via.
 */
async function readyOnce(way: Way): Promise<{ ms: number; age: number; viaBytes?: number }> {
  const held: Context[] = [];
  try {
    const started = performance.now();
    const context = await way.start(router, held);
    const age = await context.call(() => process.uptime() * 1000);
    const ms = performance.now() - started;
    const via = held.length > 1 ? held[0] : undefined;
    const viaBytes = via && router.moduleStats().byContext[via.id]?.bytesSent;
    return { ms, age, ...(viaBytes !== undefined && { viaBytes }) };
  } finally {
    // Also after a failed start: what it started through.
    for (const c of held.reverse()) await c.shutdown();
  }
}

/**
 * `measure()`, tried again when it fails (LXD's exec fails now and then
 * with "Failed to retrieve PID of executing child process", under
 * tendril, Mitogen and the floor alike): a failed try is no sample, and is
 * listed in the output.
 * @throws the last error after TRIES failures.
 */
async function retrying<T>(way: string, what: string, measure: () => Promise<T>): Promise<T> {
  for (let attempt = 1; ; attempt++) {
    try {
      return await measure();
    } catch (error) {
      const line = String((error as Error).message ?? error)
        .split('\n')
        .find((text) => /Error|fail/i.test(text));
      retried.push({ way, what, error: (line ?? String((error as Error).message)).trim().slice(0, 300) });
      if (attempt >= TRIES) throw error;
    }
  }
}

/**
 * A program's wall time, in ms, from its start to the first byte it writes
 * on stdout, and all it wrote; waits for its exit.
 */
function toFirstByte(argv: string[], env: NodeJS.ProcessEnv = process.env): Promise<{ ms: number; stdout: string }> {
  return new Promise((resolve, reject) => {
    const started = performance.now();
    let first: number | undefined;
    let stdout = '';
    const child = spawn(argv[0] as string, argv.slice(1), { env, stdio: ['ignore', 'pipe', 'pipe'] });
    let stderr = '';
    child.stdout.on('data', (chunk: Buffer) => {
      first ??= performance.now() - started;
      stdout += chunk;
    });
    child.stderr.on('data', (chunk: Buffer) => {
      stderr += chunk;
    });
    child.on('error', reject);
    child.on('close', (code) => {
      if (code === 0 && first !== undefined) resolve({ ms: first, stdout });
      else reject(new Error(`${argv.join(' ')} exited with ${code} (output: ${first !== undefined}): ${stderr}`));
    });
  });
}

/** Each way started ROUNDS times by tendril, by Mitogen and as its floors, alternating (round -1 warms all up). */
async function timeToContext(ways: Way[], mitogen: MitogenServer): Promise<void> {
  const samples: Record<string, number[]> = {};
  for (let round = -1; round < ROUNDS; round++) {
    progress(`time to a context: round ${round + 1}/${ROUNDS}${round < 0 ? ' (warm-up)' : ''}`);
    for (const way of ways) {
      const mine = await retrying(way.label, 'tendril', () => readyOnce(way));
      const node = (argv: string[], env?: NodeJS.ProcessEnv) => run(argv[0] as string, argv.slice(1), env);
      const first = await retrying(way.label, "floor: to node's first byte", () =>
        toFirstByte([...way.tool, 'node', '-e', NODE_AGE], way.toolEnv),
      );
      const floor = await retrying(way.label, 'floor: node -e 0', () =>
        node([...way.tool, 'node', '-e', '0'], way.toolEnv),
      );
      const measured: [string, number][] = [
        ['tendril', mine.ms],
        ['age', mine.age],
        ['node', floor.ms],
        ['first-byte', first.ms],
        ['node-age', Number(first.stdout)],
      ];
      if (mine.viaBytes !== undefined) measured.push(['via-bytes', mine.viaBytes]);
      for (const [label, argv] of Object.entries(way.moreFloors ?? {})) {
        measured.push([label, (await retrying(way.label, label, () => node(argv))).ms]);
      }
      const kind = way.mitogen;
      if (kind) {
        const ms = await retrying(way.label, 'Mitogen', () => mitogen.request<number>({ op: 'ready', kind }));
        measured.push(['mitogen', ms]);
      }
      const mitogenTool = way.mitogenTool;
      if (mitogenTool) {
        const python = await retrying(way.label, "Mitogen's floor", () =>
          node([...mitogenTool, 'python3', '-c', '0'], way.toolEnv),
        );
        measured.push(['python', python.ms]);
      }
      if (round < 0) continue;
      for (const [key, ms] of measured) collect(samples, `${way.label}/${key}`, ms);
    }
  }
  for (const way of ways) {
    if (way.noMitogen) noMitogen.set(way.label, way.noMitogen);
    const of = (key: string) => median(samples[`${way.label}/${key}`] ?? []);
    const peers: Record<string, number> = {
      'floor: node -e 0': of('node'),
      "floor: to node's first byte": of('first-byte'),
    };
    for (const label of Object.keys(way.moreFloors ?? {})) peers[label] = of(label);
    if (way.mitogen) peers.Mitogen = of('mitogen');
    if (way.mitogenTool) peers["Mitogen's floor: python3 -c 0"] = of('python');
    rows.push({
      group: GROUPS.ready,
      metric: way.label,
      unit: 'ms',
      tendril: samples[`${way.label}/tendril`] ?? [],
      peers,
    });
    rows.push({
      group: GROUPS.where,
      metric: `${way.label}: the child's age at its first answer`,
      unit: 'ms',
      tendril: samples[`${way.label}/age`] ?? [],
      peers: { "Node's age at its first line (-e)": of('node-age') },
    });
    if (samples[`${way.label}/via-bytes`]) {
      rows.push({
        group: GROUPS.where,
        metric: `${way.label}: module bytes sent to the fresh via`,
        unit: 'bytes',
        tendril: samples[`${way.label}/via-bytes`] ?? [],
        peers: {},
      });
    }
  }
  const sizes = JSON.parse(readFileSync(join(ROOT, 'dist', 'bootstrap', 'sizes.json'), 'utf8'));
  rows.push({
    group: GROUPS.where,
    metric: 'first stage (command line)',
    unit: 'bytes',
    tendril: [sizes.firstStage],
    peers: {},
  });
  rows.push({ group: GROUPS.where, metric: 'core, deflated', unit: 'bytes', tendril: [sizes.coreDeflated], peers: {} });
}

/** The child's steps after -e (coreStepsProgram), ROUNDS times in the container through `exec` (argv before the program), as rows of their own. */
async function coreSteps(exec: string[]): Promise<void> {
  const core = readFileSync(join(ROOT, 'dist', 'bootstrap', 'core.deflate'));
  const key = /core-([0-9a-f]{16})-/.exec(
    readFileSync(join(ROOT, 'dist', 'bootstrap', 'first-stage-cache.js'), 'utf8'),
  )?.[1];
  if (key === undefined)
    throw new Error(
      "dist/bootstrap/first-stage-cache.js names no code cache file: the bench's steps no longer match it",
    );
  const useCache = flags['target-code-cache'] === true;
  const program = coreStepsProgram(key, useCache);
  const steps: number[][] = [[], [], [], [], [], []];
  let cached = 0;
  for (let round = -1; round < ROUNDS; round++) {
    const { stdout } = await run(exec[0] as string, [...exec.slice(1), 'node', '-e', program], process.env, core);
    const measured = JSON.parse(stdout) as number[];
    if (round < 0) continue;
    cached += measured.pop() ?? 0;
    for (const [step, ms] of measured.entries()) steps[step]?.push(ms);
  }
  const names = [
    "the first stage's requires (net, vm)",
    useCache
      ? `reading the core's code cache (fs; V8 took it in ${cached} of ${ROUNDS})`
      : "reading the core's code cache (none: targetCodeCache is off)",
    'inflating the core',
    useCache ? 'compiling the core (vm.Script, with the cache)' : 'compiling the core (vm.Script)',
    "the core's requires (os, url)",
    "running the core's module code",
  ];
  names.forEach((name, step) => {
    rows.push({
      group: GROUPS.where,
      metric: `in the container's Node, after -e: ${name}`,
      unit: 'ms',
      tendril: steps[step] ?? [],
      peers: {},
    });
  });
}

/** The first hop of sudo → podman alone: a local sudo context, beside `sudo node -e 0`. */
async function sudoAlone(): Promise<void> {
  const mine: number[] = [];
  const floor: number[] = [];
  for (let round = -1; round < ROUNDS; round++) {
    const started = performance.now();
    const sudo = await router.sudo();
    await sudo.call(() => process.pid);
    const ms = performance.now() - started;
    await sudo.shutdown();
    const theirs = (await run('sudo', [process.execPath, '-e', '0'])).ms;
    if (round < 0) continue;
    mine.push(ms);
    floor.push(theirs);
  }
  rows.push({
    group: GROUPS.where,
    metric: 'a local sudo context alone (the first hop)',
    unit: 'ms',
    tendril: mine,
    peers: { 'floor: sudo node -e 0': median(floor) },
  });
}

/** Round trips and commands in one held context per way, tendril and Mitogen alternating. */
async function callsAndCommands(
  ways: Way[],
  mitogen: MitogenServer,
  commandFloors: Record<string, string[]>,
): Promise<void> {
  const held: Context[] = [];
  const contexts = new Map<Way, Context>();
  for (const way of ways) contexts.set(way, await way.start(router, held));
  const chunks = SMOKE ? 1 : 5;
  const count = Math.max(1, Math.floor(CALLS / chunks));
  for (const way of ways) {
    progress(`round trips: ${way.label}`);
    const context = contexts.get(way) as Context;
    const mine: number[] = [];
    const theirs: number[] = [];
    for (let chunk = -1; chunk < chunks; chunk++) {
      const a = await roundTrips(context, 0, count);
      const b = await mitogen.request<number[]>({ op: 'rtt', kind: way.mitogen, size: 0, count });
      // Chunk -1 warms both up.
      if (chunk < 0) continue;
      mine.push(...a);
      theirs.push(...b);
    }
    rows.push({ group: GROUPS.rtt, metric: way.label, unit: 'ms', tendril: mine, peers: { Mitogen: median(theirs) } });
  }

  const samples: Record<string, number[]> = {};
  for (let round = -1; round < FEW; round++) {
    progress(`exec('true') x ${COMMANDS}: round ${round + 1}/${FEW}${round < 0 ? ' (warm-up)' : ''}`);
    for (const way of ways) {
      const context = contexts.get(way) as Context;
      const mine = await commands(context, COMMANDS);
      const theirs = await mitogen.request<number>({ op: 'commands', kind: way.mitogen, count: COMMANDS });
      const node = await context.call(nodeExecFile, COMMANDS);
      if (round < 0) continue;
      collect(samples, `${way.label}/tendril`, mine);
      collect(samples, `${way.label}/mitogen`, theirs);
      collect(samples, `${way.label}/node`, node);
    }
    // The tool's own exec takes 150-250 ms each: FLOOR_RUNS of them, scaled to COMMANDS.
    for (const [name, argv] of Object.entries(commandFloors)) {
      const started = performance.now();
      for (let i = 0; i < FLOOR_RUNS; i++) await run(argv[0] as string, argv.slice(1));
      if (round >= 0) collect(samples, name, ((performance.now() - started) * COMMANDS) / FLOOR_RUNS);
    }
  }
  for (const way of ways) {
    const floor = way.commandsFloor as string;
    rows.push({
      group: GROUPS.commands,
      metric: way.label,
      unit: 'ms',
      tendril: samples[`${way.label}/tendril`] ?? [],
      peers: {
        Mitogen: median(samples[`${way.label}/mitogen`] ?? []),
        [`Node's execFile('true') x ${COMMANDS}, in the context`]: median(samples[`${way.label}/node`] ?? []),
        [`${floor} x ${COMMANDS}${FLOOR_RUNS < COMMANDS ? ` (${FLOOR_RUNS} timed, scaled)` : ''}`]: median(
          samples[floor] ?? [],
        ),
      },
    });
  }
}

/** Runs in the context: `count` sequential execFile('true') of Node's own, the wall time in ms. */
async function nodeExecFile(count: number): Promise<number> {
  const { execFile } = require('node:child_process') as typeof import('node:child_process');
  const started = performance.now();
  for (let i = 0; i < count; i++) {
    await new Promise<void>((resolve, reject) => execFile('true', (error) => (error ? reject(error) : resolve())));
  }
  return performance.now() - started;
}

/**
 * The issue's bar for each way, as a table (tendril's time to a context,
 * the tool's own `node -e 0`, their ratio, met or not, Mitogen's time and
 * its ratio to its own floor, or why it has none), then what else each
 * way's figures say.
 */
function printBar(summaries: Summary[]): void {
  const find = (group: string, metric: string) => summaries.find((s) => s.group === group && s.metric === metric);
  const times = (n: number | undefined, of: number | undefined) => ((n ?? Number.NaN) / (of ?? Number.NaN)).toFixed(2);
  const ms = (n: number | undefined) => `${(n ?? Number.NaN).toFixed(0)} ms`;
  const ready = summaries.filter((summary) => summary.group === GROUPS.ready);
  console.log(`\nThe bar: a container context within ${BAR}x of the tool's own exec of node -e 0 (start to exit).`);
  const table = [['method', 'tendril', 'floor', 'ratio', `${BAR}x bar`, 'Mitogen (x its floor, python3 -c 0)']];
  for (const s of ready) {
    const floor = s.peers['floor: node -e 0']?.median;
    const factor = s.median / (floor ?? Number.NaN);
    const mitogen = s.peers.Mitogen
      ? `${ms(s.peers.Mitogen.median)} (${times(s.peers.Mitogen.median, s.peers["Mitogen's floor: python3 -c 0"]?.median)}x)`
      : `none: ${noMitogen.get(s.metric) ?? '?'}`;
    table.push([
      s.metric,
      ms(s.median),
      ms(floor),
      `${factor.toFixed(2)}x`,
      factor <= BAR ? 'met' : 'NOT met',
      mitogen,
    ]);
  }
  const widths = table[0]?.map((_, column) => Math.max(...table.map((line) => line[column]?.length ?? 0))) ?? [];
  for (const line of table) {
    console.log(
      `  ${line.map((cell, column) => (column === line.length - 1 ? cell : cell.padEnd(widths[column] ?? 0))).join('  ')}`,
    );
  }
  console.log('\nWhat else each way says:');
  for (const s of ready) {
    const notes = [`${times(s.median, s.peers["floor: to node's first byte"]?.median)}x to node's first byte`];
    for (const [name, peer] of Object.entries(s.peers)) {
      if (name.startsWith('floor: sudo node')) notes.push(`${times(s.median, peer.median)}x ${name.slice(7)}`);
    }
    const age = find(GROUPS.where, `${s.metric}: the child's age at its first answer`);
    if (age) {
      const node = age.peers["Node's age at its first line (-e)"]?.median ?? Number.NaN;
      notes.push(`the child answers at ${age.median.toFixed(0)} ms of its life, Node runs -e at ${node.toFixed(0)} ms`);
    }
    console.log(`  ${s.metric}: ${notes.join('; ')}`);
  }
  const chain = find(GROUPS.ready, 'sudo → podman exec, both started');
  const sudo = find(GROUPS.where, 'a local sudo context alone (the first hop)');
  const held = find(GROUPS.ready, 'podman exec via a held sudo context');
  if (chain && sudo && held) {
    console.log(
      `  sudo → podman: ${chain.median.toFixed(0)} ms = a sudo context ${sudo.median.toFixed(0)} ms + podman via it ${held.median.toFixed(0)} ms + ${(chain.median - sudo.median - held.median).toFixed(0)} ms (loading the bundles into the new via, and noise)`,
    );
  }
  const steps = summaries.filter((s) => s.metric.startsWith("in the container's Node, after -e: "));
  const podman = find(GROUPS.where, "podman exec: the child's age at its first answer");
  if (steps.length > 0 && podman) {
    const gap = podman.median - (podman.peers["Node's age at its first line (-e)"]?.median ?? Number.NaN);
    const named = steps.map((s) => `${s.metric.slice(35)} ${s.median.toFixed(1)} ms`).join(', ');
    const rest = gap - steps.reduce((sum, s) => sum + s.median, 0);
    console.log(
      `  the child's ${gap.toFixed(0)} ms from -e to its first answer (podman exec): ${named}; the boot handshake and the call ${rest.toFixed(1)} ms`,
    );
  }
  console.log(
    '  kubectl exec: a mock over podman exec (test/fixtures/kubectl-mock.ts: no cluster runs here), its own floor.',
  );
}

/** The measurements that failed and were taken again, counted by way, measurement and error. */
function printRetried(): void {
  if (retried.length === 0) return;
  const counts = new Map<string, number>();
  for (const { way, what, error } of retried) {
    const key = `${way} / ${what}: ${error}`;
    counts.set(key, (counts.get(key) ?? 0) + 1);
  }
  console.log(`\nFailed, and measured again (of ${ROUNDS + 1} starts of each, warm-up included):`);
  for (const [key, count] of counts) console.log(`  ${count}x ${key}`);
}

function machine(): string {
  return `${cpus().length} × ${cpus()[0]?.model ?? 'unknown CPU'}, ${new Date().toISOString().slice(0, 10)}`;
}
