/**
 * The argument checks of `context.exec()` and `` context.$`...` ``, and
 * the `Command` each makes: what the public `Context` delegates to.
 */
import type { Context } from '../../core/context.js';
import { InvalidOptionError } from '../../core/errors.js';
import { Command } from './command.js';
import { checkOptions, type ExecOptions } from './options.js';
import { type TemplateValue, templateArgv } from './template.js';

/** The tag `context.$(options)` returns: `` tag`ls -la ${dir}` ``. */
export type CommandTag<T extends string | Buffer> = (
  strings: TemplateStringsArray,
  ...values: TemplateValue[]
) => Command<T>;

/**
 * `context.exec(file, args?, options?)`: checks every argument before anything is sent.
 * @throws InvalidOptionError for a bad file, argument or option.
 */
export function exec(
  context: Context,
  file: unknown,
  argsOrOptions?: readonly string[] | ExecOptions,
  maybeOptions?: ExecOptions,
): Command<string | Buffer> {
  const where = 'context.exec()';
  let args: readonly string[] = [];
  let options: ExecOptions | undefined = maybeOptions;
  if (Array.isArray(argsOrOptions)) args = argsOrOptions;
  else if (argsOrOptions !== undefined) {
    if (maybeOptions !== undefined) throw new InvalidOptionError('args', where, 'an array of strings', argsOrOptions);
    options = argsOrOptions as ExecOptions;
  }
  checkArgv(file, args, where);
  return new Command(context, file as string, args, checkOptions(options, where));
}

/** Most arguments a command takes. */
const MAX_ARGS = 65_536;

/**
 * Checks a command's program and arguments.
 * @throws InvalidOptionError naming the bad one.
 */
export function checkArgv(file: unknown, args: readonly unknown[], where: string): asserts file is string {
  if (typeof file !== 'string' || file === '' || file.includes('\0')) {
    throw new InvalidOptionError('file', where, 'a non-empty string without NUL', file);
  }
  if (!Array.isArray(args)) throw new InvalidOptionError('args', where, 'an array of strings', args);
  if (args.length > MAX_ARGS) {
    throw new InvalidOptionError('args', where, `at most ${MAX_ARGS} arguments`, `${args.length} arguments`);
  }
  args.forEach((arg, i) => {
    if (typeof arg !== 'string' || arg.includes('\0')) {
      throw new InvalidOptionError(`args[${i}]`, where, 'a string without NUL', arg);
    }
  });
}

/**
 * `` context.$`...` `` (a command) and `context.$(options)` (a tag with options).
 * @throws TypeError for a template value that is not a string, number or array of them.
 */
export function tag(
  context: Context,
  first: TemplateStringsArray | ExecOptions,
  values: TemplateValue[],
): Command<string | Buffer> | CommandTag<string | Buffer> {
  if (Array.isArray(first) && 'raw' in first) {
    const [file, args] = templateArgv(first as TemplateStringsArray, values);
    return exec(context, file, args);
  }
  const options = first as ExecOptions;
  checkOptions(options, 'context.$()');
  return (strings: TemplateStringsArray, ...later: TemplateValue[]) => {
    const [file, args] = templateArgv(strings, later);
    return exec(context, file, args, options);
  };
}
