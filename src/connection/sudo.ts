import { hostname } from 'node:os';
import { spawnTransport } from './local.js';
import type { ConnectionMethod } from './method.js';
import { COMMON_OPTIONS, checkBecomeOptions, optionNames } from './method-options.js';
import { targetName } from './naming.js';
import { type BecomeOptions, becomeConversation, notAllowed, targetAccount, wrongPassword } from './prompts.js';

/** Options of the `sudo` connection method. */
export interface SudoOptions extends BecomeOptions {
  /** Password of the starting account, answered to sudo's prompt (sent on stdin, never on a command line). */
  password?: string;
  /** Keep the environment (`-E`), or only the named variables (`--preserve-env=A,B`). Default: sudo's own reset. */
  preserveEnv?: boolean | string[];
  /** Run through the target's login shell (`-i`), with its profile. Default false (`-H`: only HOME is set). */
  login?: boolean;
  /** Further sudo arguments, inserted before `--`. */
  sudoArgs?: string[];
  /** The sudo command. Default `'sudo'`. */
  sudoPath?: string;
}

/**
 * `sudo`: a child running as another account on the host of the context
 * that starts it. The prompt is replaced by a marker unique to each
 * attempt (`-p`), so translations, `pwfeedback` and other prompt variants
 * do not matter; the password goes to sudo's stdin (`-S`). Works with the
 * original sudo and with sudo-rs (`sudoPath`), whose prompts and refusals
 * differ.
 */
export const sudo: ConnectionMethod<SudoOptions> = {
  name: 'sudo',
  checkOptions: checkBecomeOptions,
  optionNames: optionNames<SudoOptions>({
    ...COMMON_OPTIONS,
    username: true,
    password: true,
    preserveEnv: true,
    login: true,
    sudoArgs: true,
    sudoPath: true,
  }),
  localStream: () => true,
  defaultNode: () => undefined,
  start(argv, options, session) {
    const env = options.preserveEnv;
    const command = [
      options.sudoPath ?? 'sudo',
      '-S',
      '-p',
      marker(session.token),
      '-u',
      targetAccount(options),
      options.login ? '-i' : '-H',
      ...(env === true ? ['-E'] : Array.isArray(env) && env.length > 0 ? [`--preserve-env=${env.join(',')}`] : []),
      ...(options.sudoArgs ?? []),
      '--',
      ...argv,
    ];
    const to = targetAccount(options);
    session.describe(`${targetName('sudo', options)}@${hostname()}`);
    return spawnTransport(command, {}, `sudo to ${to}`);
  },
  conversation(options, session) {
    // sudo prints the marker as is; sudo-rs wraps it with PAM's own prompt: `[sudo: <marker>] Password: `.
    // The rest of the line may not hold the marker again: a target that learnt it (it is on sudo's
    // command line) and repeats it cannot make matching quadratic.
    const mark = escapeRegExp(marker(session.token));
    const prompt = new RegExp(`${mark}(?:\\](?:(?!${mark})[^\\n])*)?\\s*$`);
    return becomeConversation('sudo', options, session, prompt, ({ from, to, contextName }) => [
      {
        pattern: /must have a tty to run sudo/i,
        error: notAllowed(
          contextName,
          `sudo requires a terminal for ${from} (requiretty in sudoers) and tendril runs without one; add "Defaults:${from} !requiretty" to sudoers`,
        ),
      },
      {
        // sudo's, then sudo-rs's own ("I'm sorry <user>. I'm afraid I can't do that" when not in sudoers).
        pattern:
          /is not in the sudoers file|is not allowed to (?:execute|run|authenticate)|user \S+ may not run|not allowed to run sudo|I'm afraid I can't do that/i,
        error: notAllowed(contextName, `${from} may not run commands as ${to} with sudo; add a sudoers rule for it`),
      },
      // sudo's "3 incorrect password attempts", PAM's "Authentication failure"; sudo-rs's
      // "Authentication failed, try again." and "Maximum 3 incorrect authentication attempts".
      wrongPassword(
        contextName,
        'sudo',
        from,
        to,
        /incorrect (?:password|authentication) attempt|authentication failure|authentication failed/i,
      ),
    ]);
  },
};

/** sudo's prompt for one attempt: unique, so no other output can be mistaken for it. */
function marker(token: string): string {
  return `[tendril:${token}] password:`;
}

function escapeRegExp(text: string): string {
  return text.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
}
