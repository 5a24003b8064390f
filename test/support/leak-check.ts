/**
 * Loaded before every test file (see test/run.mjs). It checks that tests
 * leave nothing behind: no process started during the run still alive, no
 * file descriptor (pipe, socket) still open, no timer or handle keeping the
 * event loop alive.
 *
 * After each test, what the test added is noted. A suite may own resources
 * across its tests (a router started in `before` and shut down in `after`),
 * so the verdict comes when the file ends: anything still there then, compared
 * with the start of the file, fails the run, naming the test that first
 * left it. Leftover processes are then killed.
 */
import { spawn } from 'node:child_process';
import { readdirSync, readFileSync, readlinkSync } from 'node:fs';
import { after, afterEach, beforeEach } from 'node:test';

/** Every process started by a test inherits this variable (tendril passes the environment on). */
export const RUN_MARK = `${process.pid}.${Date.now()}`;
process.env.TENDRIL_TEST_RUN = RUN_MARK;
const needle = `TENDRIL_TEST_RUN=${RUN_MARK}`;

/** How long exits and closes that are already under way get to finish, in ms. */
const SETTLE_MS = 1500;

/** UIDs of the test bed's accounts (test/support/testbed.ts): their processes are the suite's too. */
function testAccountUids(): Set<number> {
  const uids = new Set<number>();
  try {
    for (const line of readFileSync('/etc/passwd', 'latin1').split('\n')) {
      const [name, , uid] = line.split(':');
      if (name?.startsWith('tendril-')) uids.add(Number(uid));
    }
  } catch {
    // No passwd file: no test accounts either.
  }
  return uids;
}

/** Processes carrying this run's mark or running as a test account, other than this one. */
export function markedProcesses(): { pid: number; cmdline: string }[] {
  const found: { pid: number; cmdline: string }[] = [];
  const accounts = testAccountUids();
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry) || Number(entry) === process.pid) continue;
    try {
      const status = readFileSync(`/proc/${entry}/status`, 'latin1');
      const uid = Number(/^Uid:\s+(\d+)/m.exec(status)?.[1]);
      const environ = accounts.has(uid) ? '' : readFileSync(`/proc/${entry}/environ`, 'latin1');
      if (!accounts.has(uid) && !environ.split('\0').includes(needle)) continue;
      const state = readFileSync(`/proc/${entry}/stat`, 'latin1').split(') ')[1]?.[0];
      if (state === 'Z') continue; // A zombie of someone else's child is not ours to reap.
      const cmdline = readFileSync(`/proc/${entry}/cmdline`, 'latin1').replaceAll('\0', ' ').trim().slice(0, 160);
      found.push({ pid: Number(entry), cmdline });
    } catch {
      // The process ended while being read.
    }
  }
  return found;
}

function openFds(): Map<string, string> {
  const fds = new Map<string, string>();
  for (const fd of readdirSync('/proc/self/fd')) {
    try {
      fds.set(fd, readlinkSync(`/proc/self/fd/${fd}`));
    } catch {
      // The directory's own descriptor, closed by now.
    }
  }
  return fds;
}

function activeResources(): Map<string, number> {
  const counts = new Map<string, number>();
  for (const type of process.getActiveResourcesInfo()) counts.set(type, (counts.get(type) ?? 0) + 1);
  return counts;
}

interface Snapshot {
  pids: Set<number>;
  fds: Map<string, string>;
  resources: Map<string, number>;
}

function snapshot(): Snapshot {
  return { pids: new Set(markedProcesses().map((p) => p.pid)), fds: openFds(), resources: activeResources() };
}

function leaks(before: Snapshot): string[] {
  const problems: string[] = [];
  const processes = markedProcesses().filter((p) => !before.pids.has(p.pid));
  if (processes.length > 0) {
    problems.push(`processes still running: ${processes.map((p) => `${p.pid} (${p.cmdline})`).join('; ')}`);
  }
  const fds = openFds();
  const extra = [...fds].filter(([fd, target]) => before.fds.get(fd) !== target && /^(pipe|socket):/.test(target));
  if (extra.length > 0) problems.push(`descriptors still open: ${extra.map(([fd, t]) => `${fd} -> ${t}`).join(', ')}`);
  for (const [type, count] of activeResources()) {
    const had = before.resources.get(type) ?? 0;
    if (count > had && type !== 'CloseReq' && type !== 'FSReqCallback') {
      problems.push(`${count - had} more active ${type} than before the test`);
    }
  }
  return problems;
}

// libuv opens its SIGCHLD pipe on the first spawn and keeps it; open it now
// so it is part of every baseline rather than a leak of the first test.
await new Promise<void>((resolve) => spawn('true').on('exit', () => resolve()));

let before: Snapshot;

beforeEach(() => {
  before = snapshot();
});

/** What each test left behind when it ended, by test name. */
const leftBehind: string[] = [];

afterEach(async (context) => {
  const problems = await settledLeaks(before, 300);
  if (problems.length > 0) leftBehind.push(`after "${context.name}": ${problems.join('; ')}`);
});

const atStart = snapshot();
after(async () => {
  const problems = await settledLeaks(atStart, SETTLE_MS);
  if (problems.length === 0) return;
  for (const { pid } of markedProcesses().filter((p) => !atStart.pids.has(p.pid))) {
    try {
      process.kill(pid, 'SIGKILL');
    } catch {
      // Already gone.
    }
  }
  throw new Error(
    `tests leaked resources:\n  ${problems.join('\n  ')}\nfirst seen:\n  ${leftBehind.join('\n  ') || '(in a suite hook)'}`,
  );
});

/** Leaks relative to `before`, once exits and closes already under way have had time to finish. */
async function settledLeaks(before: Snapshot, settleMs: number): Promise<string[]> {
  const deadline = Date.now() + settleMs;
  let problems = leaks(before);
  while (problems.length > 0 && Date.now() < deadline) {
    await new Promise((resolve) => setTimeout(resolve, 25));
    problems = leaks(before);
  }
  return problems;
}
