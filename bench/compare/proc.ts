// What the scale row reads from /proc about a master and the processes
// under it: its own RSS and open fds, and its descendants' memory.
import { readdirSync, readFileSync, readlinkSync } from 'node:fs';

/** A `kB` field of /proc/self/status (VmRSS, VmHWM), in bytes; NaN when absent. */
export function statusBytes(field: string): number {
  const match = new RegExp(`^${field}:\\s+(\\d+) kB$`, 'm').exec(readFileSync('/proc/self/status', 'utf8'));
  return match ? Number(match[1]) * 1024 : Number.NaN;
}

/** File descriptors open in this process (readdir's own is closed again before it returns). */
export function openFds(): number {
  return readdirSync('/proc/self/fd').length;
}

/** What each open fd of this process points to (`pipe:[…]`, `socket:[…]`, a path). */
export function fdTargets(): string[] {
  const targets: string[] = [];
  for (const fd of readdirSync('/proc/self/fd')) {
    try {
      targets.push(readlinkSync(`/proc/self/fd/${fd}`));
    } catch {
      // readdir's own fd, closed by now.
    }
  }
  return targets;
}

/** The memory of every process under `root`: count, summed RSS, and summed PSS (shared pages split). */
export interface TreeMemory {
  count: number;
  rss: number;
  pss: number;
}

/** Every live descendant of `root` (children, theirs, ...), from each process's parent in /proc. */
export function descendantsMemory(root: number): TreeMemory {
  const children = new Map<number, number[]>();
  for (const name of readdirSync('/proc')) {
    if (!/^\d+$/.test(name)) continue;
    let stat: string;
    try {
      stat = readFileSync(`/proc/${name}/stat`, 'utf8');
    } catch {
      continue; // Gone meanwhile.
    }
    // The command may hold spaces and parentheses: the fields after its last ')' are fixed.
    const ppid = Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]);
    const list = children.get(ppid) ?? [];
    list.push(Number(name));
    children.set(ppid, list);
  }
  const total: TreeMemory = { count: 0, rss: 0, pss: 0 };
  const queue = [...(children.get(root) ?? [])];
  for (let pid = queue.shift(); pid !== undefined; pid = queue.shift()) {
    queue.push(...(children.get(pid) ?? []));
    try {
      const rollup = readFileSync(`/proc/${pid}/smaps_rollup`, 'utf8');
      total.rss += Number(/^Rss:\s+(\d+) kB$/m.exec(rollup)?.[1] ?? 0) * 1024;
      total.pss += Number(/^Pss:\s+(\d+) kB$/m.exec(rollup)?.[1] ?? 0) * 1024;
      total.count++;
    } catch {
      // Gone meanwhile.
    }
  }
  return total;
}
