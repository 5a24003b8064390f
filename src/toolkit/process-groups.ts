/**
 * Signalling a process group by its leader's PID: what commands and jobs
 * do to stop everything a program started in its group; and a process
 * tree, for an isolated call's interpreter.
 */
import * as fs from 'node:fs';

/** Sends `signal` to the process group `pid` leads; false when the group is gone. */
export function killGroup(pid: number, signal: string): boolean {
  try {
    process.kill(-pid, signal);
    return true;
  } catch {
    return false;
  }
}

/** False once no process is left in the group `pid` leads. */
export function groupAlive(pid: number): boolean {
  try {
    process.kill(-pid, 0);
    return true;
  } catch (error) {
    // EPERM: members are there, only not ours to signal.
    return (error as NodeJS.ErrnoException).code !== 'ESRCH';
  }
}

/** The parent PID of every process /proc shows. */
function parentPids(): Map<number, number> {
  const parents = new Map<number, number>();
  let names: string[];
  try {
    names = fs.readdirSync('/proc');
  } catch {
    return parents;
  }
  for (const name of names) {
    if (!/^\d+$/.test(name)) continue;
    try {
      const stat = fs.readFileSync(`/proc/${name}/stat`, 'latin1');
      parents.set(Number(name), Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]));
    } catch {
      // Gone meanwhile.
    }
  }
  return parents;
}

/**
 * Kills `pid` and every process descended from it (an isolated call's
 * interpreter and what its code started), with SIGKILL: stopped first, so
 * it forks nothing while its descendants are found, and killed last, so
 * they are still its descendants when looked for. Descendants that left
 * the tree (a daemon that double-forked) are beyond reach. Where there is
 * no /proc, only `pid` is killed.
 * @returns how many processes were signalled.
 */
export function killTree(pid: number): number {
  if (!Number.isInteger(pid) || pid <= 1 || pid === process.pid) return 0;
  try {
    process.kill(pid, 'SIGSTOP');
  } catch {
    return 0;
  }
  const killed = new Set<number>();
  // Again until no new descendant shows: one killed mid-fork may have left a child.
  for (let round = 0; round < 5; round++) {
    const parents = parentPids();
    const found: number[] = [];
    const tree = new Set([pid]);
    let grew = true;
    while (grew) {
      grew = false;
      for (const [child, parent] of parents) {
        if (tree.has(parent) && !tree.has(child)) {
          tree.add(child);
          found.push(child);
          grew = true;
        }
      }
    }
    const fresh = found.filter((child) => !killed.has(child));
    if (fresh.length === 0) break;
    for (const child of fresh) {
      try {
        process.kill(child, 'SIGKILL');
      } catch {
        // Already gone.
      }
      killed.add(child);
    }
  }
  try {
    process.kill(pid, 'SIGKILL');
  } catch {
    // Already gone.
  }
  return killed.size + 1;
}
