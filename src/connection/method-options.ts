/**
 * The options of a connection method, checked before anything starts: a
 * misspelt option (`prot` for `port`) would else be ignored for its
 * default, and a missing `hostname` found only by the target's failure.
 */
import { InvalidOptionError } from '../core/errors.js';
import { DEFAULT_HEARTBEAT, heartbeatSettings } from '../core/heartbeat.js';
import { boolean, closestName, knownOptions, milliseconds, optionsObject, text } from '../core/options.js';
import type { CommonOptions } from './bootstrap.js';
import type { ConnectionMethod } from './method.js';
import type { BecomeOptions } from './prompts.js';

/** The names of a method's options: every key of `O`, so the compiler finds one left out. */
export function optionNames<O>(names: Record<keyof Required<O>, true>): ReadonlySet<string> {
  return new Set(Object.keys(names));
}

/** The options every method takes (`CommonOptions`). */
export const COMMON_OPTIONS: Record<keyof Required<CommonOptions>, true> = {
  name: true,
  connectTimeout: true,
  nodePath: true,
  preferTargetModules: true,
  nodeCandidates: true,
  shipNode: true,
  runtimeDirectory: true,
  heartbeatInterval: true,
  heartbeatTimeout: true,
};

/**
 * Checks `options` for `method` (as `where`, e.g. `'router.ssh()'`): the
 * values of its own options, the common ones' types, then that every name
 * is one it takes or one of `extra` (`via`, in the master).
 * @throws InvalidOptionError naming the first bad or unknown option, with
 *   the option it most likely misspells.
 */
export function checkMethodOptions<O extends CommonOptions>(
  method: ConnectionMethod<O>,
  options: O | undefined,
  where: string,
  extra: readonly string[] = [],
): void {
  const given = optionsObject(options, where);
  method.checkOptions?.(given, where);
  checkCommonOptions(given, where);
  if (method.optionNames) knownOptions(given, new Set([...method.optionNames, ...extra]), where);
}

function checkCommonOptions(options: CommonOptions, where: string): void {
  const { nodePath, preferTargetModules, nodeCandidates } = options;
  text(options.name, 'name', where, undefined);
  milliseconds(options.connectTimeout, 'connectTimeout', where, undefined, 1);
  if (
    nodePath !== undefined &&
    !(typeof nodePath === 'string' && nodePath !== '') &&
    !(Array.isArray(nodePath) && nodePath.length > 0 && nodePath.every((word) => typeof word === 'string'))
  ) {
    throw new InvalidOptionError('nodePath', where, 'a path, a command name or a non-empty array of strings', nodePath);
  }
  boolean(preferTargetModules, 'preferTargetModules', where);
  strings(nodeCandidates, 'nodeCandidates', where);
  const { shipNode, runtimeDirectory } = options;
  if (shipNode !== undefined && shipNode !== 'auto' && shipNode !== 'always' && shipNode !== 'never') {
    throw new InvalidOptionError('shipNode', where, "'auto', 'always' or 'never'", shipNode);
  }
  text(runtimeDirectory, 'runtimeDirectory', where, undefined);
  // The values alone: whether they fit with what the context inherits is checked where it starts.
  heartbeatSettings(options, DEFAULT_HEARTBEAT, where);
  // It goes into the shell command in double quotes: variables expand there, commands must not run,
  // and a ! or a newline would break a csh-family login shell's quoting.
  if (runtimeDirectory !== undefined && /[!\n`]|\$\(/.test(runtimeDirectory)) {
    throw new InvalidOptionError(
      'runtimeDirectory',
      where,
      'a path without !, a newline, ` or $( (variables such as $HOME may be used)',
      runtimeDirectory,
    );
  }
}

/** An array of strings, or undefined. */
export function strings(value: unknown, option: string, where: string): void {
  if (value !== undefined && !(Array.isArray(value) && value.every((item) => typeof item === 'string'))) {
    throw new InvalidOptionError(option, where, 'an array of strings', value);
  }
}

/** A string (any, even empty: a password), or undefined. */
export function secret(value: unknown, option: string, where: string): void {
  if (value !== undefined && typeof value !== 'string') {
    throw new InvalidOptionError(option, where, 'a string', value);
  }
}

/**
 * Refuses a missing `hostname`; when the caller gave it under a name that
 * is not one of the `known` options (`host`, `hostName`), says so.
 * @throws InvalidOptionError naming `hostname`.
 */
export function requireHostname(options: { hostname?: unknown }, known: ReadonlySet<string>, where: string): void {
  const { hostname } = options;
  if (typeof hostname === 'string' && hostname !== '') return;
  const misnamed =
    hostname === undefined
      ? Object.keys(options).find((key) => !known.has(key) && closestName(key, ['hostname']) === 'hostname')
      : undefined;
  throw new InvalidOptionError(
    'hostname',
    where,
    `a non-empty string (a host name, an address or a Host alias of the ssh config; it is required${misnamed === undefined ? '' : `: did you mean hostname instead of ${misnamed}?`})`,
    hostname,
  );
}

/**
 * Checks what sudo, su and doas share: the account to become and the password.
 * @throws InvalidOptionError naming the bad option.
 */
export function checkBecomeOptions(options: BecomeOptions, where: string): void {
  text(options.username, 'username', where, undefined);
  secret(options.password, 'password', where);
}
