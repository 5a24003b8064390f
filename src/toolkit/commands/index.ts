/**
 * Commands: `context.exec()` and `` context.$`...` `` run programs in a
 * context (no shell unless asked), stream their output under flow control,
 * and never leave a process behind. The remote half is ./remote.ts.
 */
import { Context } from '../../core/context.js';
import { InvalidOptionError } from '../../core/errors.js';
import { Command } from './command.js';
import { checkOptions, type ExecOptions } from './options.js';
import { type TemplateValue, templateArgv } from './template.js';

export type { LinesFrom } from './command.js';
export { Command } from './command.js';
export { CommandError } from './errors.js';
export type { CommandInput, ExecOptions, OutputLine, OutputStream } from './options.js';
export type { CommandResult } from './result.js';
export type { TemplateValue } from './template.js';

/** The tag `context.$(options)` returns: `` tag`ls -la ${dir}` ``. */
export type CommandTag<T extends string | Buffer> = (
  strings: TemplateStringsArray,
  ...values: TemplateValue[]
) => Command<T>;

declare module '../../core/context.js' {
  interface Context {
    /**
     * Runs `file` in this context with `args` as its argument vector (no
     * shell, so nothing needs quoting; `shell: true` opts in), in a process
     * group of its own that is killed on `timeout`, `signal`, `kill()`, and
     * when the context shuts down or loses the master.
     *
     * ```ts
     * const { stdout } = await context.exec('uname', ['-r']);
     * ```
     *
     * @returns a `Command`: await it for its `CommandResult`, or read
     *   `command.lines()`, `stdout` and `stderr` while it runs.
     * @throws InvalidOptionError (synchronously) for a bad file, argument or option.
     * @throws CommandError (as its rejection) when it fails and `reject` is not false:
     *   a non-zero exit, a signal, a timeout, an abort, over `maxBuffer`, or not started.
     * @throws ContextDisconnectedError / ChannelError (as its rejection) when the context goes away.
     */
    exec(file: string, args?: readonly string[], options?: ExecOptions & { encoding?: 'utf8' }): Command<string>;
    /** `exec` with `encoding: 'buffer'`: stdout and stderr are Buffers. */
    exec(
      file: string,
      args: readonly string[] | undefined,
      options: ExecOptions & { encoding: 'buffer' },
    ): Command<Buffer>;
    /** `exec` without arguments. */
    exec(file: string, options: ExecOptions & { encoding?: 'utf8' }): Command<string>;
    /** `exec` without arguments, with `encoding: 'buffer'`. */
    exec(file: string, options: ExecOptions & { encoding: 'buffer' }): Command<Buffer>;

    /**
     * Runs a command written as a template: the text is split on
     * whitespace and each `${value}` is one argument (an array is several),
     * never interpreted by a shell, so a value with spaces or quotes stays
     * one argument as it is.
     *
     * ```ts
     * const { stdout } = await context.$`ls -la ${dir}`;
     * ```
     * @throws TypeError (synchronously) for a value that is not a string, number or array of them.
     */
    $(strings: TemplateStringsArray, ...values: TemplateValue[]): Command<string>;
    /** A tag with options: `` context.$({ cwd: '/srv' })`ls` ``. */
    $(options: ExecOptions & { encoding: 'buffer' }): CommandTag<Buffer>;
    /** A tag with options: `` context.$({ cwd: '/srv' })`ls` ``. */
    $(options: ExecOptions & { encoding?: 'utf8' }): CommandTag<string>;
  }
}

const MAX_ARGS = 65_536;

function execImpl(
  this: Context,
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
  if (typeof file !== 'string' || file === '' || file.includes('\0')) {
    throw new InvalidOptionError('file', where, 'a non-empty string without NUL', file);
  }
  if (args.length > MAX_ARGS) {
    throw new InvalidOptionError('args', where, `at most ${MAX_ARGS} arguments`, `${args.length} arguments`);
  }
  args.forEach((arg, i) => {
    if (typeof arg !== 'string' || arg.includes('\0')) {
      throw new InvalidOptionError(`args[${i}]`, where, 'a string without NUL', arg);
    }
  });
  return new Command(this, file, args, checkOptions(options, where));
}

function tagImpl(this: Context, first: TemplateStringsArray | ExecOptions, ...values: TemplateValue[]): unknown {
  if (Array.isArray(first) && 'raw' in first) {
    const [file, args] = templateArgv(first as TemplateStringsArray, values);
    return execImpl.call(this, file, args);
  }
  const options = first as ExecOptions;
  checkOptions(options, 'context.$()');
  return (strings: TemplateStringsArray, ...later: TemplateValue[]) => {
    const [file, args] = templateArgv(strings, later);
    return execImpl.call(this, file, args, options);
  };
}

Context.prototype.exec = execImpl as Context['exec'];
Context.prototype.$ = tagImpl as Context['$'];
