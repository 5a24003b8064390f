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
import { randomBytes } from 'node:crypto';
import { readdirSync, readFileSync, readlinkSync } from 'node:fs';
import { after, afterEach, beforeEach } from 'node:test';
import { MARK_VARIABLE } from './run-mark.js';

/**
 * This test file's mark, in MARK_VARIABLE. tendril passes the environment
 * on to local children; the test bed carries the mark across the account
 * switches that reset the environment: its sshd sets it in every session
 * (sshd_config SetEnv), sudo and sudo-rs keep it (sudoers env_keep), doas
 * too (setenv). Random, so that another run on the same machine
 * (another clone, another file run at the same time) never has the same.
 */
export const RUN_MARK = `${process.pid}.${randomBytes(6).toString('hex')}`;
process.env[MARK_VARIABLE] = RUN_MARK;

/** How long exits and closes that are already under way get to finish, in ms. */
const SETTLE_MS = 1500;

interface ProcessInfo {
  ppid: number;
  /**
   * The mark in its environment: a string when it has one, `''` when its
   * environment has none, undefined when it cannot be read (another user's,
   * or overwritten by a process title, as sshd's are).
   */
  mark: string | undefined;
}

/** Every live, non-zombie process but this one: its parent and its mark. */
function processTable(): Map<number, ProcessInfo> {
  const table = new Map<number, ProcessInfo>();
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry) || Number(entry) === process.pid) continue;
    try {
      const stat = readFileSync(`/proc/${entry}/stat`, 'latin1');
      const [state, ppid] = stat.slice(stat.lastIndexOf(') ') + 2).split(' ');
      if (state === 'Z') continue; // A zombie of someone else's child is not ours to reap.
      table.set(Number(entry), { ppid: Number(ppid), mark: markOf(entry) });
    } catch {
      // The process ended while being read.
    }
  }
  return table;
}

function markOf(pid: string): string | undefined {
  let environ: string;
  try {
    environ = readFileSync(`/proc/${pid}/environ`, 'latin1');
  } catch {
    return undefined;
  }
  // sshd and Node rewrite their process title over the environment: a
  // block without an = sign is such a title, not an environment.
  const variables = environ.split('\0').filter((v) => v !== '');
  if (variables.length > 0 && !variables.every((v) => v.includes('='))) return undefined;
  const found = variables.find((v) => v.startsWith(`${MARK_VARIABLE}=`));
  return found === undefined ? '' : found.slice(MARK_VARIABLE.length + 1);
}

/**
 * True when `pid` is provably this file's: the nearest process, from it up
 * through its ancestors, whose environment carries a mark carries this
 * file's. A process whose own mark is another run's is that run's, whoever
 * started it; one with no mark anywhere up its line (the reparented orphan
 * of an su -l, a process of a test account another run started) is not
 * provably ours, and is neither reported nor killed.
 */
function isOurs(pid: number, table: Map<number, ProcessInfo>): boolean {
  let info = table.get(pid);
  for (let hops = 0; info !== undefined && hops < 64; hops++) {
    if (info.mark) return info.mark === RUN_MARK;
    if (info.ppid === process.pid) return true; // This file's own child.
    info = table.get(info.ppid);
  }
  return false;
}

/** This file's processes, other than itself (see isOurs). */
export function markedProcesses(): { pid: number; cmdline: string }[] {
  const table = processTable();
  const found: { pid: number; cmdline: string }[] = [];
  for (const pid of table.keys()) {
    if (!isOurs(pid, table)) continue;
    try {
      const cmdline = readFileSync(`/proc/${pid}/cmdline`, 'latin1').replaceAll('\0', ' ').trim().slice(0, 160);
      found.push({ pid, cmdline });
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
