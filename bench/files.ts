// The measurements issue 10 asks of file transfer (`npm run bench:files`),
// every figure from this run, ratios between figures of the same run:
//   throughput  a 256 MiB file copied to a local child and to an ssh context
//               (the suite's loopback sshd), beside `cat file | cat > /dev/null`
//               and `cat file | ssh host 'cat > /dev/null'` (plain OpenSSH, the
//               same key and port, Compression no), in alternating rounds; and
//               fetched back the other way. Targets: locally at least 50% of
//               cat | cat, over ssh at least 90% of cat | ssh cat.
//   memory      a 1 GiB file copied master -> child -> grandchild, and fetched
//               back, with the RSS of all three processes sampled from /proc
//               every 100 ms. Target: every process grows by less than 64 MiB.
//   fanout      one file copied to N grandchildren under one intermediate with
//               router.copy(): bytes written on the master's stream to the
//               intermediate, against the file's size and against N separate
//               copies. Target: the first hop carries the file once.
// Parts can be picked by name: node build/bench/files.js [throughput] [memory] [fanout]
// Knobs (environment): FILES_MIB (throughput, default 256), FILES_ROUNDS
// (default 5), FILES_MEMORY_MIB (default 1024), FILES_FANOUT (grandchildren,
// default 4), FILES_FANOUT_MIB (default 64).
import { randomFillSync } from 'node:crypto';
import { chmodSync, closeSync, existsSync, mkdtempSync, openSync, rmSync, statSync, writeSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { type Context, Router } from 'tendril';
import { switchOf } from '../test/support/internals.js';
import { openSshArgs, sshLogin, startTestbed, type Testbed } from '../test/support/testbed.js';
import { commandLine } from './cli.js';
import {
  atAbort,
  type Contender,
  MIB,
  mbps,
  median,
  mib,
  partArgument,
  percent,
  progress,
  rssOf,
  runParts,
  runRounds,
  shellQuote,
  type Table,
  timeShell,
} from './flow-shared.js';

const THROUGHPUT_MIB = Number(process.env.FILES_MIB ?? 256);
const ROUNDS = Number(process.env.FILES_ROUNDS ?? 5);
const MEMORY_MIB = Number(process.env.FILES_MEMORY_MIB ?? 1024);
const FANOUT = Number(process.env.FILES_FANOUT ?? 4);
const FANOUT_MIB = Number(process.env.FILES_FANOUT_MIB ?? 64);
const BAR = 64 * MIB;

/**
 * A scratch directory every test account may write in (ssh contexts log in
 * as the sudoer account). Copies are written to one in /dev/shm: on a disk,
 * this machine's writeback throttling makes writing 256 MiB take anywhere
 * from 0.1 to 0.9 s, which would measure the disk, not the transfer.
 */
function scratch(under = tmpdir()): string {
  const dir = mkdtempSync(join(under, 'tendril-files-'));
  chmodSync(dir, 0o1777);
  return dir;
}

/** Where copies are written: tmpfs when there is one. */
const OUT_ROOT = existsSync('/dev/shm') ? '/dev/shm' : tmpdir();

/** Writes `mebibytes` MiB of random data (nothing on any path gains from compressible data). */
function randomFile(path: string, mebibytes: number): void {
  const chunk = Buffer.alloc(MIB);
  const fd = openSync(path, 'w');
  try {
    for (let i = 0; i < mebibytes; i++) writeSync(fd, randomFillSync(chunk));
  } finally {
    closeSync(fd);
  }
}

/** An ssh context into the test bed, as the sudoer account. */
function sshContext(router: Router, bed: Testbed, name: string): Promise<Context> {
  return router.ssh({ name, ...sshLogin(bed) });
}

async function benchThroughput(table: Table): Promise<void> {
  const dir = scratch();
  const out = scratch(OUT_ROOT);
  const file = join(dir, 'data');
  const bytes = THROUGHPUT_MIB * MIB;
  randomFile(file, THROUGHPUT_MIB);
  const root = process.getuid?.() === 0;
  const bed = root ? await startTestbed() : undefined;
  const router = new Router();
  const cleanUp = async () => {
    await router.shutdown();
    await bed?.stop();
    rmSync(dir, { recursive: true, force: true });
    rmSync(out, { recursive: true, force: true });
  };
  const forget = atAbort(cleanUp);
  try {
    const contenders: Contender[] = [];
    const add = (label: string, run: () => Promise<number>) => contenders.push({ label, run, rates: [] });
    const rate = (ms: number) => bytes / 1e6 / (ms / 1000);
    const timed = async (run: () => Promise<unknown>) => {
      const started = performance.now();
      await run();
      return rate(performance.now() - started);
    };
    const copied = join(out, 'copied');
    const fetched = join(out, 'fetched');
    const fresh = (path: string) => rmSync(path, { force: true });

    add('cat file | cat > /dev/null', async () => rate(await timeShell(`cat ${shellQuote(file)} | cat > /dev/null`)));
    // A verified copy hashes every byte on both sides: one side's share of that work, alone, with the
    // OpenSSL Node hashes with (coreutils' sha256sum is 5x slower here: no SHA extensions).
    add('openssl dgst -sha256 file', async () =>
      rate(await timeShell(`openssl dgst -sha256 ${shellQuote(file)} > /dev/null`)),
    );
    const child = await router.local({ name: 'files-child' });
    add('tendril copy to a local child', () => timed(() => child.copy(file, copied)).finally(() => fresh(copied)));
    add('tendril fetch from a local child', () =>
      timed(() => child.fetch(file, fetched)).finally(() => fresh(fetched)),
    );
    let setups: number[] = [];
    if (bed) {
      const args = openSshArgs(bed, ['Compression=no']).map(shellQuote).join(' ');
      add("cat file | ssh host 'cat > /dev/null'", async () => {
        // The connection's setup is timed beside it, to say how much of the command it is.
        setups.push(await timeShell(`ssh ${args} true`));
        return rate(await timeShell(`cat ${shellQuote(file)} | ssh ${args} 'cat > /dev/null'`));
      });
      const ssh = await sshContext(router, bed, 'files-ssh');
      add('tendril copy to an ssh context', () => timed(() => ssh.copy(file, copied)).finally(() => fresh(copied)));
      add('tendril fetch from an ssh context', () =>
        timed(() => ssh.fetch(file, fetched)).finally(() => fresh(fetched)),
      );
    }

    await runRounds(contenders, ROUNDS, 'files throughput', () => {
      // Setups timed while warming up are not part of the figures.
      setups = [];
    });

    table.heading(
      `throughput, a ${THROUGHPUT_MIB} MiB file, written to ${OUT_ROOT}; median of ${ROUNDS} alternating rounds`,
    );
    const rateOf = (label: string) => median(contenders.find((c) => c.label === label)?.rates ?? []);
    const pipe = rateOf('cat file | cat > /dev/null');
    const sshPipe = rateOf("cat file | ssh host 'cat > /dev/null'");
    const hashing = rateOf('openssl dgst -sha256 file');
    const setup = median(setups);
    for (const contender of contenders) {
      const value = median(contender.rates);
      let note = `runs: ${contender.rates.map((r) => r.toFixed(0)).join(', ') || 'none'}`;
      if (contender.label.includes('ssh context')) {
        const net = bytes / 1e6 / (bytes / 1e6 / sshPipe - setup / 1000);
        const target = contender.label.startsWith('tendril copy') ? ' (target >= 90%)' : '';
        note += `; ${percent(value / sshPipe)} of cat | ssh cat${target}, ${percent(value / net)} of it without its setup`;
      } else if (contender.label.startsWith('tendril')) {
        const target = contender.label.startsWith('tendril copy') ? ' (target >= 50%)' : '';
        note += `; ${percent(value / pipe)} of cat | cat${target}, ${percent(value / hashing)} of openssl dgst`;
      } else if (contender.label.startsWith('cat file | ssh')) {
        note += `; includes ssh's setup (ssh host true: ${setup.toFixed(0)} ms)`;
      }
      if (contender.failed) note += `; FAILED: ${contender.failed}`;
      table.add(contender.label, contender.rates.length ? mbps(value) : 'failed', note);
    }
    if (!bed) table.add('over ssh', 'not measured', 'the loopback sshd test bed needs root');
  } finally {
    await cleanUp();
    forget();
  }
}

/** Samples the RSS of some processes every 100 ms while `work` runs; start, peak and end per process. */
async function sampleRss(
  watched: { name: string; rss: () => number }[],
  work: () => Promise<unknown>,
): Promise<{ name: string; start: number; peak: number; end: number }[]> {
  const start = watched.map((w) => w.rss());
  const peak = [...start];
  const sample = () =>
    watched.forEach((w, i) => {
      peak[i] = Math.max(peak[i] as number, w.rss());
    });
  const timer = setInterval(sample, 100);
  try {
    await work();
  } finally {
    clearInterval(timer);
  }
  sample();
  return watched.map((w, i) => ({ name: w.name, start: start[i] as number, peak: peak[i] as number, end: w.rss() }));
}

async function benchMemory(table: Table): Promise<void> {
  const dir = scratch();
  const file = join(dir, 'data');
  randomFile(file, MEMORY_MIB);
  const router = new Router();
  const forget = atAbort(async () => {
    await router.shutdown();
    rmSync(dir, { recursive: true, force: true });
  });
  try {
    const child = await router.local({ name: 'files-child' });
    const grandchild = await router.local({ name: 'files-grandchild', via: child });
    const watched = [
      { name: 'master', rss: () => process.memoryUsage.rss() },
      { name: 'child (forwarding)', rss: () => rssOf(child.info.pid) },
      { name: 'grandchild', rss: () => rssOf(grandchild.info.pid) },
    ];
    // A small transfer first, so loading the services is not part of the curve.
    const small = join(dir, 'small');
    randomFile(small, 1);
    await grandchild.copy(small, join(dir, 'small-copied'));
    await grandchild.fetch(small, join(dir, 'small-fetched'));

    table.heading(
      `memory, a ${mib(MEMORY_MIB * MIB)} file through master -> child -> grandchild (target: each grows < 64 MiB)`,
    );
    const runs: [string, () => Promise<unknown>][] = [
      ['copy', () => grandchild.copy(file, join(dir, 'copied'))],
      ['fetch', () => grandchild.fetch(file, join(dir, 'fetched'))],
    ];
    for (const [what, work] of runs) {
      progress(`files memory: ${what} ${mib(MEMORY_MIB * MIB)} through a child`);
      const started = performance.now();
      const figures = await sampleRss(watched, work);
      const seconds = (performance.now() - started) / 1000;
      const size = statSync(join(dir, what === 'copy' ? 'copied' : 'fetched')).size;
      if (size !== MEMORY_MIB * MIB) throw new Error(`${what}: the file arrived with ${size} bytes`);
      for (const { name, start, peak, end } of figures) {
        const growth = peak - start;
        table.add(
          `${what}: ${name}`,
          mib(growth),
          `${mib(start)} -> peak ${mib(peak)} -> ${mib(end)}; ${growth < BAR ? 'under' : 'OVER'} 64 MiB; ${mbps((MEMORY_MIB * MIB) / 1e6 / seconds)}`,
        );
      }
      rmSync(join(dir, what === 'copy' ? 'copied' : 'fetched'), { force: true });
    }
  } finally {
    await router.shutdown();
    rmSync(dir, { recursive: true, force: true });
    forget();
  }
}

async function benchFanout(table: Table): Promise<void> {
  const dir = scratch();
  const file = join(dir, 'data');
  const bytes = FANOUT_MIB * MIB;
  randomFile(file, FANOUT_MIB);
  const router = new Router();
  const forget = atAbort(async () => {
    await router.shutdown();
    rmSync(dir, { recursive: true, force: true });
  });
  try {
    const intermediate = await router.local({ name: 'files-intermediate' });
    const grandchildren: Context[] = [];
    for (let i = 0; i < FANOUT; i++) {
      grandchildren.push(await router.local({ name: `files-grandchild-${i}`, via: intermediate }));
    }
    const firstHop = switchOf(router).routeOf(intermediate.id);
    if (!firstHop) throw new Error('no stream to the intermediate');
    const targets = (round: string) => grandchildren.map((_, i) => join(dir, `${round}-${i}`));
    // Services loaded everywhere first, so only the file is counted.
    const warm = join(dir, 'warm');
    randomFile(warm, 1);
    await router.copy(warm, join(dir, 'warm-out'), grandchildren);
    await Promise.all(grandchildren.map((g, i) => g.copy(warm, join(dir, `warm-out-${i}`))));

    const measure = async (work: () => Promise<unknown>) => {
      const before = firstHop.stats.bytesOut;
      const started = performance.now();
      await work();
      return { bytes: firstHop.stats.bytesOut - before, seconds: (performance.now() - started) / 1000 };
    };
    progress(`files fanout: router.copy to ${FANOUT} grandchildren`);
    const fanned = await measure(async () => {
      const results = await router.copy(file, join(dir, 'fanned'), grandchildren);
      const failed = results.filter((r) => r.status === 'rejected');
      if (failed.length > 0) throw new Error(`router.copy failed for ${failed.length} targets`);
    });
    progress(`files fanout: ${FANOUT} separate copies`);
    const separate = await measure(() =>
      Promise.all(grandchildren.map((g, i) => g.copy(file, join(dir, `separate-${i}`)))),
    );
    for (const path of targets('separate')) {
      if (statSync(path).size !== bytes) throw new Error(`${path} arrived with the wrong size`);
    }

    table.heading(`fan-out, a ${mib(bytes)} file to ${FANOUT} grandchildren under one intermediate`);
    table.add(
      'router.copy: bytes on the first hop',
      mib(fanned.bytes),
      `${(fanned.bytes / bytes).toFixed(3)}x the file (target ~1x); ${fanned.bytes} bytes for ${bytes}; ${mbps((FANOUT * bytes) / 1e6 / fanned.seconds)} delivered`,
    );
    table.add(
      `${FANOUT} separate copies: first hop`,
      mib(separate.bytes),
      `${(separate.bytes / bytes).toFixed(3)}x the file; ${mbps((FANOUT * bytes) / 1e6 / separate.seconds)} delivered`,
    );
  } finally {
    await router.shutdown();
    rmSync(dir, { recursive: true, force: true });
    forget();
  }
}

const PARTS: Record<string, (table: Table) => Promise<void>> = {
  throughput: benchThroughput,
  memory: benchMemory,
  fanout: benchFanout,
};

const { positionals: picked } = commandLine({
  script: 'node build/bench/files.js',
  description: `File transfer (npm run bench:files): throughput to a local child and to an ssh context
beside cat | cat and cat | ssh cat, the memory of a 1 GiB copy through an
intermediate, and router.copy()'s fan-out. Needs root (the suite's loopback sshd).`,
  environment: {
    FILES_MIB: 'MiB per throughput run (default 256)',
    FILES_ROUNDS: 'rounds (default 5)',
    FILES_MEMORY_MIB: 'MiB of the memory part (default 1024)',
    FILES_FANOUT: 'grandchildren of the fan-out part (default 4)',
    FILES_FANOUT_MIB: 'MiB of the fan-out part (default 64)',
  },
  arguments: [partArgument(PARTS)],
});
await runParts('file-transfer', PARTS, picked);
