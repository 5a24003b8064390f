// A master holds one SSH connection and 8 worker processes (child_process.fork)
// use it through the master's UNIX listener: 20 calls each, one connection.
// Run after `npm run build`: node build/examples/listener-workers.js [host]
// (host: an ssh config Host, default web1; the suite maps it to its own sshd).
import { fork } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { joinListener, Router } from 'tendril';

const WORKERS = 8;
const CALLS = 20;

interface Report {
  worker: string;
  calls: number;
  pids: number[];
  ms: number;
}

if (process.argv[2] === 'worker') {
  const [, , , socket, host] = process.argv as string[];
  // A worker: join the master, take its connection to the host, call it, leave.
  const worker = await joinListener(socket as string);
  const lease = await worker.acquire({ method: 'ssh', hostname: host as string });
  const pids = new Set<number>();
  const started = performance.now();
  for (let i = 0; i < CALLS; i++) pids.add(await lease.context.call(() => process.pid));
  const report: Report = { worker: worker.name, calls: CALLS, pids: [...pids], ms: performance.now() - started };
  process.send?.(report);
  lease.release();
  await worker.close();
} else {
  const host = process.argv[2] ?? 'web1';
  const scratch = mkdtempSync(join(tmpdir(), 'tendril-workers-'));
  const router = new Router();
  try {
    const listener = await router.listen(join(scratch, 'run', 'tendril.sock'));
    // The master opens the connection; the workers' acquires find it in its pool.
    const lease = await router.pool.acquire({ method: 'ssh', hostname: host });
    const { pid, hostname } = lease.context.info;
    console.log(`master: ${lease.label} is context ${lease.context.id}, pid ${pid} on ${hostname}`);
    const reports = await Promise.all(
      Array.from(
        { length: WORKERS },
        () =>
          new Promise<Report>((resolve, reject) => {
            const child = fork(fileURLToPath(import.meta.url), ['worker', listener.path, host]);
            child.on('message', (report) => resolve(report as Report));
            child.on('exit', (code) => code !== 0 && reject(new Error(`a worker exited with status ${code}`)));
          }),
      ),
    );
    for (const report of reports) {
      console.log(
        `${report.worker}: ${report.calls} calls in ${report.ms.toFixed(0)} ms, answered by pid ${report.pids.join(', ')}`,
      );
    }
    const pids = new Set(reports.flatMap((report) => report.pids));
    console.log(`${WORKERS * CALLS} calls from ${WORKERS} workers, all answered by pid ${[...pids].join(', ')}`);
    const stats = router.pool.stats();
    console.log(`pool: ${stats.contexts} context, ${stats.misses} connection opened, ${stats.hits} reused`);
    lease.release();
  } finally {
    await router.shutdown();
    rmSync(scratch, { recursive: true, force: true });
  }
}
