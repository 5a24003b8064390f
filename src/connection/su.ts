import { hostname } from 'node:os';
import { spawnTransport } from './local.js';
import type { ConnectionMethod } from './method.js';
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

/**
 * `su`: a child running as another account, authenticated with that
 * account's password. su reads the password from stdin when it has no
 * terminal; its prompt is recognised in the common translations.
 */
export const su: ConnectionMethod<SuOptions> = {
  name: 'su',
  defaultNode: () => undefined,
  start(argv, options, session) {
    const to = targetAccount(options);
    const command = [options.suPath ?? 'su', ...(options.login ? ['-l'] : []), to, '-c', shellCommand(argv)];
    session.describe(`su:${to}@${hostname()}`);
    return spawnTransport(command, {}, `su to ${to}`);
  },
  conversation(options, session) {
    return becomeConversation('su', options, session, PASSWORD_PROMPT, ({ from, to, contextName }) => [
      wrongPassword(contextName, 'su', from, to, /authentication failure|incorrect password|sorry/i),
      {
        pattern: /account is currently not available|user .* does not exist|permission denied/i,
        error: notAllowed(contextName, `${from} cannot become ${to} with su`),
      },
    ]);
  },
};
