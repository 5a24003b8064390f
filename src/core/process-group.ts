/**
 * Signalling a process group by its leader's PID: what stops everything a
 * command started in its group, for `this.exec()` in a call here and for
 * the toolkit's commands and jobs (src/toolkit/process-groups.ts).
 */

/** Sends `signal` to the process group `pid` leads; false when the group is gone. */
export function killGroup(pid: number, signal: string): boolean {
  try {
    process.kill(-pid, signal);
    return true;
  } catch {
    return false;
  }
}
