import type { ConnectionMethod, LocalOptions } from 'tendril';
import { localMethod } from '#dist/internal.js';
import { supportFile } from './procs.js';

/**
 * A connection method that starts the child behind test/support/relay.py,
 * which gives it real pipes with the properties named by `flags`
 * (`--chunk 1`, `--pipe-size 4096`, `--nonblock`, `--close-after N`, `--swallow`).
 * With `discover`, the shell looks for Node as on a remote target
 * (`nodeCandidates`), and may ask for a shipped one, instead of being
 * given this Node.
 */
export function relay(flags: string[], discover = false): ConnectionMethod<LocalOptions> {
  return {
    name: 'relay',
    defaultNode: () => (discover ? undefined : [process.execPath]),
    start: (argv, options, session) =>
      localMethod.start(['python3', supportFile('relay.py'), ...flags, '--', ...argv], options, session),
  };
}

/** The harshest channel: 4 KiB non-blocking pipes fed one byte at a time. */
export const NARROW = ['--pipe-size', '4096', '--nonblock', '--chunk', '1'];
