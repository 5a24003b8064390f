import { type SpawnOptions, spawn } from 'node:child_process';
import { hostname } from 'node:os';
import { becomeEnvironment } from './become-environment.js';
import type { CommonOptions } from './bootstrap.js';
import type { ConnectionMethod, Transport } from './method.js';
import { COMMON_OPTIONS, optionNames } from './method-options.js';
import { processHandle } from './process.js';

/** Options of the `local` connection method. */
export interface LocalOptions extends CommonOptions {
  /** Environment of the child. Default: the starting context's environment. */
  env?: Record<string, string | undefined>;
  /** Working directory of the child. Default: the starting context's. */
  cwd?: string;
}

/**
 * Runs `argv` on this machine with stdin, stdout and stderr as pipes: the
 * transport of `local` and of the methods that wrap a local command
 * (sudo, su, doas, and the container tools).
 * @param options `env`: the command's environment. Default: this
 *   context's, without what would make another account's shell or Node
 *   run code of its choosing (`becomeEnvironment()`), as sudo, su and
 *   doas start the child as another account; `local` and the container
 *   tools pass theirs. `cwd`: its working directory (default this context's).
 */
export function spawnTransport(
  argv: readonly string[],
  options: Pick<SpawnOptions, 'env' | 'cwd'>,
  where: string,
): Transport {
  const child = spawn(argv[0] as string, argv.slice(1), {
    stdio: ['pipe', 'pipe', 'pipe'],
    env: options.env ?? becomeEnvironment(),
    ...(options.cwd !== undefined && { cwd: options.cwd }),
  });
  const { stdin, stdout, stderr } = child;
  // With stdio 'pipe' all three exist; the check satisfies the types.
  if (!stdin || !stdout || !stderr) throw new Error('spawn returned no stdio pipes');
  return { stdin, stdout, stderr, process: processHandle(child), where };
}

/**
 * `local`: a child process on the same machine as the context that starts
 * it, running the same Node binary unless `nodePath` says otherwise.
 */
export const local: ConnectionMethod<LocalOptions> = {
  name: 'local',
  optionNames: optionNames<LocalOptions>({ ...COMMON_OPTIONS, env: true, cwd: true }),
  sameMachine: true,
  localStream: () => true,
  defaultNode: () => [process.execPath],
  start(argv, options, session) {
    // The starting context's own environment, unless the options give one: the child runs as the same account.
    const transport = spawnTransport(
      argv,
      { env: options.env ?? process.env, ...(options.cwd !== undefined && { cwd: options.cwd }) },
      'local',
    );
    if (transport.process.pid !== undefined) session.describe(`local.${transport.process.pid}@${hostname()}`);
    return transport;
  },
};
