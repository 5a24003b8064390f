/** What the container methods share: checking the name of what they enter, and the failure of a container without `sh`. */
import { InvalidOptionError } from '../../core/errors.js';
import { text } from '../../core/options.js';
import { InterpreterError } from '../errors.js';
import { failure, type ToolFailure } from '../tool-method.js';

/**
 * A required container, pod or path name that the tool cannot mistake
 * for one of its options.
 * @param what what it names, for the error, e.g. `'a running container'`.
 * @throws InvalidOptionError when missing, not a string, or starting with `-`.
 */
export function plainName(value: unknown, option: string, where: string, what: string): string {
  const name = text(value, option, where, undefined, 4096);
  if (name === undefined) throw new InvalidOptionError(option, where, `the name of ${what}`, undefined);
  if (name.startsWith('-')) throw new InvalidOptionError(option, where, `a name that does not start with -`, name);
  return name;
}

/**
 * What an OCI runtime (runc, crun) or a tool's exec says when `sh` is not
 * in the container: lxc-attach 'Failed to exec "sh"'; LXD's and Incus's
 * clients "Error: Command not found" (sh is the only command they run).
 */
export function noShell(subject: string, machine: string): ToolFailure {
  return failure(
    /"sh": executable file not found|exec: "sh"|failed to run command .sh.: No such file|sh: No such file or directory|Failed to exec "sh"|^Error: Command not found$/m,
    InterpreterError,
    `${subject} on ${machine} has no POSIX shell (sh), which tendril's start needs`,
  );
}
