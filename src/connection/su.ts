import { hostname } from 'node:os';
import { spawnTransport } from './local.js';
import type { ConnectionMethod } from './method.js';
import { COMMON_OPTIONS, checkBecomeOptions, optionNames } from './method-options.js';
import { targetName } from './naming.js';
import {
  type BecomeOptions,
  becomeConversation,
  notAllowed,
  PASSWORD_PROMPT,
  targetAccount,
  wrongPassword,
} from './prompts.js';
import { shellCommand } from './shell.js';

/** Options of the `su` connection method. */
export interface SuOptions extends BecomeOptions {
  /** That account's password, answered to su's prompt on its stdin. */
  password?: string;
  /** Start a login shell (`su -l`). Default false. */
  login?: boolean;
  /** The su command. Default `'su'`. */
  suPath?: string;
}

// Only su's own messages count: lines it starts with `su: ` (util-linux,
// shadow, BusyBox, BSD), and the few lines a refused account's shell prints
// instead. Anything else before the interpreter runs is the target's login
// profile talking (`-bash: cd: /root: Permission denied`), not a refusal.

/** su rejecting the password it was given: util-linux and shadow, BusyBox, BSD. */
const WRONG_PASSWORD = /^su: [^\n]*(?:authentication failure|incorrect password)|^(?:su: )?sorry\.?[ \t]*$/im;
/** su refusing the switch: PAM's account checks, unknown accounts, nologin shells. */
const REFUSED =
  /^su: [^\n]*(?:permission denied|does not exist|unknown user|not allowed)|^this account is currently not available|^no passwd entry for user/im;

/**
 * `su`: a child running as another account, authenticated with that
 * account's password. su reads the password from stdin when it has no
 * terminal; its prompt is recognised in the common translations.
 */
export const su: ConnectionMethod<SuOptions> = {
  name: 'su',
  checkOptions: checkBecomeOptions,
  optionNames: optionNames<SuOptions>({ ...COMMON_OPTIONS, username: true, password: true, login: true, suPath: true }),
  localStream: () => true,
  defaultNode: () => undefined,
  start(argv, options, session) {
    const to = targetAccount(options);
    const command = [options.suPath ?? 'su', ...(options.login ? ['-l'] : []), to, '-c', shellCommand(argv)];
    session.describe(`${targetName('su', options)}@${hostname()}`);
    return spawnTransport(command, {}, `su to ${to}`);
  },
  conversation(options, session) {
    return becomeConversation('su', options, session, PASSWORD_PROMPT, ({ from, to, contextName }) => [
      wrongPassword(contextName, 'su', from, to, WRONG_PASSWORD),
      { pattern: REFUSED, error: notAllowed(contextName, `${from} cannot become ${to} with su`) },
    ]);
  },
};
