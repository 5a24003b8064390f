/**
 * `command`: the general form of a tool-based method. Any program that
 * runs a command somewhere and passes its stdin and stdout through
 * (`gcloud compute ssh`, `aws ssm start-session`, `vagrant ssh -c`,
 * `fly ssh console -C`, an in-house wrapper) reaches a target without a
 * method of its own: tendril appends its start to the program's argv.
 */
import { basename } from 'node:path';
import { InvalidOptionError } from '../core/errors.js';
import { boolean } from '../core/options.js';
import type { CommonOptions } from './bootstrap.js';
import type { ConnectionMethod } from './method.js';
import { COMMON_OPTIONS, optionNames } from './method-options.js';
import { shellQuote } from './shell.js';
import { toolMethod } from './tool-method.js';

/** Options of the `command` method. */
export interface CommandOptions extends CommonOptions {
  /** The program and its arguments, e.g. `['gcloud', 'compute', 'ssh', 'web1', '--command']`; the start is appended. */
  argv: string[];
  /**
   * True when the program hands what follows to a shell on the target
   * as one string (ssh-like tools: `gcloud compute ssh --command`, `vagrant
   * ssh -c`, `fly ssh console -C`): the start is appended as one
   * shell-quoted argument. Default false: appended as separate arguments,
   * run as they are (exec-like tools: `kubectl exec`, `nsenter`, `firejail`).
   */
  remoteShell?: boolean;
}

/** `command`: runs `[...argv, ...start]`, or `[...argv, 'start as one quoted string']` with `remoteShell`. */
export const command: ConnectionMethod<CommandOptions> = toolMethod<CommandOptions>({
  name: 'command',
  optionNames: optionNames<CommandOptions>({ ...COMMON_OPTIONS, argv: true, remoteShell: true }),
  checkOptions(options, where) {
    const { argv } = options;
    if (
      !Array.isArray(argv) ||
      argv.length === 0 ||
      argv.length > 1024 ||
      !argv.every((word) => typeof word === 'string') ||
      argv[0] === ''
    ) {
      throw new InvalidOptionError('argv', where, 'the program and its arguments: a non-empty array of strings', argv);
    }
    boolean(options.remoteShell, 'remoteShell', where);
  },
  tool: (options) => options.argv[0] as string,
  toolOption: 'argv',
  install: 'the program',
  command: (options, argv) =>
    options.remoteShell === true
      ? [...options.argv.slice(1), argv.map(shellQuote).join(' ')]
      : [...options.argv.slice(1), ...argv],
  step: (options, machine) => `running ${basename(options.argv[0] ?? '')} on ${machine}`,
  program: (options) => basename(options.argv[0] ?? ''),
  failures: () => [],
});
