import { spawn } from 'node:child_process';
import { hostname } from 'node:os';
import type { Readable, Writable } from 'node:stream';
import { becomeEnvironment } from './become-environment.js';
import { PasswordError } from './errors.js';
import { spawnTransport } from './local.js';
import type { ConnectionMethod, Transport } from './method.js';
import { COMMON_OPTIONS, checkBecomeOptions, optionNames } from './method-options.js';
import { targetName } from './naming.js';
import { processHandle } from './process.js';
import {
  type BecomeOptions,
  becomeConversation,
  notAllowed,
  PASSWORD_PROMPT,
  targetAccount,
  wrongPassword,
} from './prompts.js';
import { shellCommand } from './shell.js';

/** Options of the `doas` connection method. */
export interface DoasOptions extends BecomeOptions {
  /**
   * Password of the starting account. doas reads it only from a terminal,
   * so tendril runs doas under `script` (util-linux) with a terminal for
   * the prompt alone; the stream stays on pipes.
   */
  password?: string;
  /** The doas command. Default `'doas'`. */
  doasPath?: string;
}

/** `doas`: a child running as another account, as permitted by doas.conf. */
export const doas: ConnectionMethod<DoasOptions> = {
  name: 'doas',
  checkOptions: checkBecomeOptions,
  optionNames: optionNames<DoasOptions>({ ...COMMON_OPTIONS, username: true, password: true, doasPath: true }),
  localStream: () => true,
  defaultNode: () => undefined,
  start(argv, options, session): Transport {
    const to = targetAccount(options);
    const where = `doas to ${to}`;
    session.describe(`${targetName('doas', options)}@${hostname()}`);
    if (options.password === undefined) {
      // -n: fail rather than wait for a password nobody will type.
      return spawnTransport([options.doasPath ?? 'doas', '-n', '-u', to, '--', ...argv], {}, where);
    }
    // The terminal script provides carries only the prompt (doas's stderr);
    // doas's stdin and stdout, and so the stream, stay on fds 3 and 4's pipes.
    const inner = `${shellCommand([options.doasPath ?? 'doas', '-u', to, '--', ...argv])} <&3 >&4 3<&- 4>&-`;
    const child = spawn('script', ['-q', '-e', '-f', '-c', inner, '/dev/null'], {
      stdio: ['pipe', 'pipe', 'ignore', 'pipe', 'pipe'],
      env: { ...becomeEnvironment(), SHELL: '/bin/sh' },
    });
    const [terminalIn, terminalOut, , streamIn, streamOut] = child.stdio;
    return {
      stdin: streamIn as Writable,
      stdout: streamOut as Readable,
      stderr: terminalOut as Readable,
      promptInput: terminalIn as Writable,
      process: processHandle(child),
      where,
    };
  },
  conversation(options, session) {
    return becomeConversation('doas', options, session, PASSWORD_PROMPT, ({ from, to, contextName }) => [
      wrongPassword(contextName, 'doas', from, to, /authentication failed/i),
      {
        pattern: /authori[sz]ation required|authentication required/i,
        error: () =>
          new PasswordError(
            contextName,
            `doas from ${from} to ${to} needs a password and none was given (option password)`,
          ),
      },
      {
        pattern: /operation not permitted|not permitted/i,
        error: notAllowed(contextName, `doas.conf does not permit ${from} to run commands as ${to}`),
      },
    ]);
  },
};
