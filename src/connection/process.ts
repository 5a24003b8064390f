import type { ChildProcess } from 'node:child_process';
import type { ChildProcessHandle, ExitStatus } from '../core/broker.js';

/**
 * Adapts a Node `ChildProcess` to the broker's view of a process. `exited`
 * resolves when Node has reaped it ('exit'), or at once with the error if
 * it could not be spawned.
 */
export function processHandle(child: ChildProcess): ChildProcessHandle {
  const exited = new Promise<ExitStatus>((resolve) => {
    child.once('exit', (code, signal) => resolve({ code, signal }));
    child.once('error', (error) => {
      // 'error' without a pid means the spawn itself failed and no 'exit' will follow.
      if (child.pid === undefined) resolve({ code: null, signal: null, error });
    });
  });
  return {
    pid: child.pid,
    kill(signal) {
      if (child.exitCode === null && child.signalCode === null) child.kill(signal);
    },
    exited,
    ref: () => child.ref(),
    unref: () => child.unref(),
  };
}
