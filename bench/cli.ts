// The command line of every bench script: node:util parseArgs, strict, plus
// --help (usage, options, arguments, environment knobs; exit 0) and, for an
// unknown option or a wrong argument, one line saying what is wrong and the
// usage on stderr, exit 2: never a stack trace.
import { basename } from 'node:path';
import { parseArgs } from 'node:util';

/** One option of a bench script. */
export interface BenchOption {
  type: 'boolean' | 'string';
  short?: string;
  /** What it does, for --help. */
  description: string;
  /** A string option's value as --help names it, e.g. `FILE`. */
  value?: string;
}

/** One positional argument of a bench script. */
export interface BenchArgument {
  name: string;
  /** What it is, for --help. */
  description: string;
  /** The values it may take; any when absent. */
  choices?: readonly string[];
  /** A whole number of at least 1. */
  count?: boolean;
  /** Must be given. Default false. */
  required?: boolean;
  /** May be given several times (then it is the last argument). Default false. */
  repeated?: boolean;
}

/** What a bench script's --help says and its parser accepts. */
export interface BenchCommand<O extends Record<string, BenchOption>> {
  /** The script, as run: `node build/bench/index.js`. */
  script: string;
  /** What it measures and what it needs, a few lines. */
  description: string;
  options?: O;
  arguments?: readonly BenchArgument[];
  /** Environment variables it reads, by name: what each sets and its default. */
  environment?: Record<string, string>;
}

/** The parsed command line: each option's value (undefined when not given), and the positional arguments. */
export interface Parsed<O extends Record<string, BenchOption>> {
  values: { [K in keyof O]?: O[K]['type'] extends 'boolean' ? boolean : string };
  positionals: string[];
}

/**
 * Parses process.argv for `command`. On --help prints the help and exits 0;
 * on an unknown option, a missing value, or an argument it does not take,
 * prints what is wrong and the usage to stderr and exits 2.
 */
export function commandLine<O extends Record<string, BenchOption>>(command: BenchCommand<O>): Parsed<O> {
  const options = Object.fromEntries(
    Object.entries(command.options ?? {}).map(([name, option]) => [
      name,
      option.short === undefined ? { type: option.type } : { type: option.type, short: option.short },
    ]),
  );
  let parsed: { values: Record<string, unknown>; positionals: string[] };
  try {
    parsed = parseArgs({
      options: { ...options, help: { type: 'boolean', short: 'h' } },
      allowPositionals: (command.arguments?.length ?? 0) > 0,
      strict: true,
    });
  } catch (error) {
    return refuse(command, (error as Error).message);
  }
  if (parsed.values.help === true) {
    console.log(help(command));
    process.exit(0);
  }
  const problem = checkArguments(command.arguments ?? [], parsed.positionals);
  if (problem !== undefined) return refuse(command, problem);
  delete parsed.values.help;
  return parsed as Parsed<O>;
}

function checkArguments(expected: readonly BenchArgument[], given: string[]): string | undefined {
  const last = expected[expected.length - 1];
  if (given.length > expected.length && !last?.repeated) {
    return `unexpected argument '${given[expected.length]}'`;
  }
  for (const [index, value] of given.entries()) {
    const argument = (expected[index] ?? last) as BenchArgument;
    if (argument.choices && !argument.choices.includes(value)) {
      return `${argument.name} '${value}' is none of ${argument.choices.join(', ')}`;
    }
    if (argument.count && !(Number.isInteger(Number(value)) && Number(value) >= 1)) {
      return `${argument.name} '${value}' is not a whole number of at least 1`;
    }
  }
  const missing = expected.filter((argument, index) => argument.required && index >= given.length);
  if (missing.length > 0) return `missing ${missing.map((argument) => argument.name).join(', ')}`;
  return undefined;
}

function refuse(command: BenchCommand<Record<string, BenchOption>>, problem: string): never {
  console.error(`${basename(command.script.split(' ').pop() as string)}: ${problem}\n\n${usage(command)}`);
  console.error(`Run it with --help for more.`);
  process.exit(2);
}

function usage(command: BenchCommand<Record<string, BenchOption>>): string {
  const options = Object.entries(command.options ?? {}).map(
    ([name, option]) => `[--${name}${option.type === 'string' ? ` ${option.value ?? 'VALUE'}` : ''}]`,
  );
  const args = (command.arguments ?? []).map((argument) => {
    const text = `${argument.name}${argument.repeated ? '...' : ''}`;
    return argument.required ? text : `[${text}]`;
  });
  return `Usage: ${[command.script, '[--help]', ...options, ...args].join(' ')}`;
}

function help(command: BenchCommand<Record<string, BenchOption>>): string {
  const lines = [usage(command), '', command.description.trim(), ''];
  const table = (rows: [string, string][]) => {
    const width = Math.max(...rows.map(([name]) => name.length));
    for (const [name, text] of rows) lines.push(`  ${name.padEnd(width)}  ${text}`);
    lines.push('');
  };
  const args = command.arguments ?? [];
  if (args.length > 0) {
    lines.push('Arguments:');
    table(args.map((a) => [a.name, a.choices ? `${a.description} (${a.choices.join(', ')})` : a.description] as const));
  }
  lines.push('Options:');
  table([
    ...Object.entries(command.options ?? {}).map(
      ([name, option]) =>
        [
          `${option.short ? `-${option.short}, ` : ''}--${name}${option.type === 'string' ? ` ${option.value ?? 'VALUE'}` : ''}`,
          option.description,
        ] as [string, string],
    ),
    ['-h, --help', 'print this help and exit'],
  ]);
  const environment = Object.entries(command.environment ?? {});
  if (environment.length > 0) {
    lines.push('Environment:');
    table(environment);
  }
  return lines.join('\n').trimEnd();
}
