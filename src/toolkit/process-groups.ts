/**
 * Process groups and trees: what commands and jobs do to stop everything
 * a program started in its group (`killGroup`, from the core, where
 * `this.exec()` uses it too); and a process tree, for an isolated call's
 * interpreter.
 */
import * as fs from 'node:fs';

export { killGroup } from '../core/process-group.js';

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
 * Kills `pid`, a child of this process (an isolated call's interpreter),
 * and every process descended from it, with SIGKILL. Each process found is
 * stopped first (SIGSTOP), so none forks or leaves the tree while the rest
 * are looked for; the search repeats until it finds nothing new, then all
 * are killed. Descendants that left the tree before (a daemon that
 * double-forked) are beyond reach. Where there is no /proc, only `pid` is
 * killed.
 * @returns how many processes were signalled; 0 when `pid` is not a child of this process.
 */
export function killTree(pid: number): number {
  if (!Number.isInteger(pid) || pid <= 1) return 0;
  const parents = parentPids();
  // Never a process that is not ours: a PID reused since is left alone.
  if (parents.size > 0 && parents.get(pid) !== process.pid) return 0;
  const tree = new Set([pid]);
  const stop = (target: number) => {
    try {
      process.kill(target, 'SIGSTOP');
    } catch {
      // Gone meanwhile.
    }
  };
  stop(pid);
  for (let round = 0; round < 100; round++) {
    let grew = false;
    for (const [child, parent] of parentPids()) {
      if (tree.has(parent) && !tree.has(child)) {
        stop(child);
        tree.add(child);
        grew = true;
      }
    }
    if (!grew) break;
  }
  for (const target of tree) {
    try {
      process.kill(target, 'SIGKILL');
    } catch {
      // Already gone.
    }
  }
  return tree.size;
}
