// Copies a file to a local context with a progress bar (cli-progress).
// Run after `npm run build`: node build/examples/copy-progress.js [file]
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import cliProgress from 'cli-progress';
import { Router } from 'tendril';

const scratch = mkdtempSync(join(tmpdir(), 'tendril-copy-progress-'));
const source = process.argv[2] ?? join(scratch, 'example.bin');
if (process.argv[2] === undefined) writeFileSync(source, randomBytes(64 * 1024 * 1024));

const router = new Router();
const bar = new cliProgress.SingleBar(
  {
    format: 'copying [{bar}] {percentage}% | {value}/{total} MiB | {speed} MiB/s',
    noTTYOutput: true,
    notTTYSchedule: 250,
  },
  cliProgress.Presets.shades_classic,
);
try {
  const worker = await router.local({ name: 'worker' });
  const MiB = 1024 * 1024;
  let started = false;
  const result = await worker.copy(source, join(scratch, 'copied.bin'), {
    onProgress: ({ bytes, total, rate }) => {
      if (!started) bar.start(Math.round(total / MiB), 0, { speed: '0' });
      started = true;
      bar.update(Math.round(bytes / MiB), { speed: (rate / MiB).toFixed(0) });
    },
  });
  bar.stop();
  console.log(`copied ${result.bytes} bytes in ${result.durationMs} ms, sha256 ${result.sha256}`);
} finally {
  bar.stop();
  await router.shutdown();
  rmSync(scratch, { recursive: true, force: true });
}
