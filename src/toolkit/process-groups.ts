/**
 * Signalling a process group by its leader's PID: what commands and jobs
 * do to stop everything a program started in its group.
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
