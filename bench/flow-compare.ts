// Part 3, latency regression: the empty-call round trip and the call with a
// 1 MiB argument, of this tree's build against the build of an earlier
// commit (`BASE`, default HEAD~1), both imported into this process by
// absolute path and timed in alternating rounds. The earlier commit is
// exported (git archive) into /tmp and built there once (kept for later
// runs). Issue 9's target: within 5% of the earlier commit.
import { execFileSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { existsSync, mkdtempSync, realpathSync, renameSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { atAbort, MIB, median, micros, percent, progress, type Table } from './flow-shared.js';

type Tendril = typeof import('tendril');

const ROUNDS = Number(process.env.FLOW_LATENCY_ROUNDS ?? 10);
const EMPTY_CALLS = 5000;
const MIB_CALLS = 50;

/** This build's package root (build/bench/ is two levels down). */
const here = realpathSync(fileURLToPath(new URL('../..', import.meta.url)));

/**
 * Exports and builds `base` in /tmp unless already done; returns the
 * directory and commit. One cache per commit and per checkout (it links
 * this checkout's node_modules). It is built in a directory of its own and
 * renamed into place complete, so two runs building the same base at once
 * never build in, or read, a half-built tree: the later one uses the first.
 */
function buildBase(base: string): { dir: string; commit: string } {
  const git = (...args: string[]) => execFileSync('git', ['-C', here, ...args], { encoding: 'utf8' }).trim();
  const commit = git('rev-parse', '--verify', `${base}^{commit}`);
  const checkout = createHash('sha256').update(here).digest('hex').slice(0, 8);
  const dir = join(tmpdir(), `tendril-base-${commit.slice(0, 12)}-${checkout}`);
  if (existsSync(join(dir, BUILT))) return { dir, commit };
  const work = mkdtempSync(`${dir}.building-`);
  try {
    execFileSync('sh', ['-c', 'git -C "$1" archive "$2" | tar -x -C "$3"', 'sh', here, commit, work]);
    symlinkSync(realpathSync(join(here, 'node_modules')), join(work, 'node_modules'));
    progress(`latency: building ${base} (${commit.slice(0, 12)}) in ${work}`);
    execFileSync('npm', ['run', 'build'], { cwd: work, stdio: ['ignore', process.stderr, process.stderr] });
    writeFileSync(join(work, BUILT), `${commit}\n`);
    try {
      renameSync(work, dir);
    } catch (error) {
      // Another run put its build there first: that one is used.
      if (!existsSync(join(dir, BUILT))) throw error;
    }
  } finally {
    rmSync(work, { recursive: true, force: true });
  }
  return { dir, commit };
}

/** Written into a base's build directory once it is complete. */
const BUILT = '.bench-built';

interface Side {
  label: string;
  tendril: Tendril;
  router?: InstanceType<Tendril['Router']>;
  context?: Awaited<ReturnType<InstanceType<Tendril['Router']>['local']>>;
  empty: number[];
  big: number[];
  /** Per-round medians, to show the noise between rounds. */
  roundEmpty: number[];
  roundBig: number[];
  /** Per-block medians, in the order run: block i of old ran next to block i of new. */
  blockEmpty: number[];
  blockBig: number[];
}

const arg = Buffer.alloc(MIB, 1);
/** Each round is cut in blocks that alternate old and new, so both see the same load on this machine. */
const BLOCKS = 10;

interface Times {
  empty: number[];
  big: number[];
}

/** `empty` empty calls, then `big` calls with a 1 MiB argument: each one's round trip in ms. */
async function block(side: Side, empty: number, big: number, into: Times): Promise<void> {
  const context = side.context as NonNullable<Side['context']>;
  for (let i = 0; i < empty; i++) {
    const started = performance.now();
    await context.call(() => null);
    into.empty.push(performance.now() - started);
  }
  for (let i = 0; i < big; i++) {
    const started = performance.now();
    await context.call((b: Buffer) => b.length, arg);
    into.big.push(performance.now() - started);
  }
}

export async function benchLatency(table: Table): Promise<void> {
  const base = process.env.BASE ?? 'HEAD~1';
  const { dir, commit } = buildBase(base);
  const head = execFileSync('git', ['-C', here, 'rev-parse', '--short=12', 'HEAD'], { encoding: 'utf8' }).trim();
  const load = async (root: string): Promise<Tendril> =>
    (await import(pathToFileURL(join(root, 'dist', 'index.js')).href)) as Tendril;
  const side = (label: string, tendril: Tendril): Side => ({
    label,
    tendril,
    empty: [],
    big: [],
    roundEmpty: [],
    roundBig: [],
    blockEmpty: [],
    blockBig: [],
  });
  const sides: Side[] = [side(`old ${commit.slice(0, 12)}`, await load(dir)), side(`new ${head}`, await load(here))];
  if (sides[0]?.tendril.Router === sides[1]?.tendril.Router) throw new Error('both builds loaded as one module');
  const forget = atAbort(() => Promise.all(sides.map((side) => side.router?.shutdown())));
  try {
    for (const side of sides) {
      side.router = new side.tendril.Router();
      side.context = await side.router.local({ name: `flow-${side.label.slice(0, 3)}` });
      // Warm: JIT, the function cache on both ends, buffers.
      await block(side, 2000, 5, { empty: [], big: [] });
    }
    for (let r = 0; r < ROUNDS; r++) {
      progress(`latency round ${r + 1}/${ROUNDS}`);
      const times = new Map<Side, Times>(sides.map((side) => [side, { empty: [], big: [] }]));
      for (let k = 0; k < BLOCKS; k++) {
        // old, new, then new, old: neither always goes first.
        for (const side of (r * BLOCKS + k) % 2 === 0 ? sides : [...sides].reverse()) {
          const one: Times = { empty: [], big: [] };
          await block(side, EMPTY_CALLS / BLOCKS, MIB_CALLS / BLOCKS, one);
          side.blockEmpty.push(median(one.empty));
          side.blockBig.push(median(one.big));
          const all = times.get(side) as Times;
          all.empty.push(...one.empty);
          all.big.push(...one.big);
        }
      }
      for (const [side, { empty, big }] of times) {
        side.empty.push(...empty);
        side.big.push(...big);
        side.roundEmpty.push(median(empty));
        side.roundBig.push(median(big));
      }
    }
  } finally {
    for (const side of sides) await side.router?.shutdown();
    forget();
  }

  const [old, now] = sides as [Side, Side];
  const ratios = (a: number[], b: number[]) => a.map((x, i) => x / (b[i] as number));
  const spread = (a: number[], b: number[]) => {
    const r = ratios(a, b);
    return `${Math.min(...r).toFixed(3)}-${Math.max(...r).toFixed(3)}`;
  };
  // Blocks ran side by side, so a block's ratio is taken under one load; their median resists load that drifts.
  const paired = (a: number[], b: number[]) => median(ratios(a, b)).toFixed(3);
  table.heading(
    `latency, this tree (new, HEAD ${head}) against ${base} (old), side by side in one process; ${ROUNDS} rounds of ${EMPTY_CALLS} empty and ${MIB_CALLS} x 1 MiB calls each, in ${BLOCKS} alternating blocks`,
  );
  for (const side of sides) {
    table.add(`empty call, ${side.label}`, micros(median(side.empty)), 'median of all rounds');
  }
  const emptyRatio = median(now.empty) / median(old.empty);
  table.add(
    'empty call new/old',
    emptyRatio.toFixed(3),
    `${percent(Math.abs(emptyRatio - 1))} ${emptyRatio >= 1 ? 'slower' : 'faster'} (target within 5%); median of per-block ratios ${paired(now.blockEmpty, old.blockEmpty)}; per-round ratios ${spread(now.roundEmpty, old.roundEmpty)}`,
  );
  for (const side of sides) {
    table.add(`1 MiB call, ${side.label}`, `${median(side.big).toFixed(3)} ms`, 'median of all rounds');
  }
  const bigRatio = median(now.big) / median(old.big);
  table.add(
    '1 MiB call new/old',
    bigRatio.toFixed(3),
    `${percent(Math.abs(bigRatio - 1))} ${bigRatio >= 1 ? 'slower' : 'faster'} (target within 5%); median of per-block ratios ${paired(now.blockBig, old.blockBig)}; per-round ratios ${spread(now.roundBig, old.roundBig)}`,
  );
}
