/**
 * `Match` lines, evaluated as OpenSSH's match_cfg_line does: against the
 * state the lines above reached (so a HostName set earlier is the `host`
 * matched), criteria joined by AND, each negatable with `!`.
 */
import { spawnSync } from 'node:child_process';
import { connectionTokens, expandTokens } from './expand.js';
import { matchPatternList } from './patterns.js';
import type { Local, Settings } from './settings.js';
import { splitMatchWords } from './words.js';

/** What a Match line is evaluated against. */
export interface MatchState {
  /** The local facts. */
  local: Local;
  /** The settings of the lines read so far. */
  settings: Settings;
  /** The host name as given (`originalhost`, `%n`). */
  hostArg: string;
}

/**
 * Evaluates the condition of a Match line (match_cfg_line).
 * @param final this is the second pass that `Match final` asked for.
 * @param wantFinal called when the line names `final` in the first pass: a second pass is then due.
 * @throws Error naming `where` for an unknown attribute, a missing argument or `all` combined with others.
 */
export function evaluateMatch(
  condition: string,
  where: string,
  final: boolean,
  state: MatchState,
  wantFinal: () => void,
): boolean {
  const s = state.settings;
  const host =
    final && s.hostname !== undefined
      ? s.hostname
      : s.hostname !== undefined
        ? expandTokens(s.hostname, { h: state.hostArg }, undefined, `${where}: HostName`)
        : state.hostArg;
  const user = s.user ?? state.local.user;
  const words = splitMatchWords(condition, where);
  let result = true;
  let attributes = 0;
  for (let i = 0; i < words.length; i++) {
    const word = words[i] as string;
    if (word.startsWith('#')) break;
    const negate = word.startsWith('!');
    const attribute = (negate ? word.slice(1) : word).toLowerCase();
    if (attribute === 'all') {
      const next = words[i + 1];
      if (attributes > 1 || (next !== undefined && !next.startsWith('#'))) {
        throw new Error(`${where}: Match '${word}' cannot be combined with other criteria`);
      }
      return result ? !negate : false;
    }
    attributes++;
    if (attribute === 'canonical' || attribute === 'final') {
      if (attribute === 'final' && !final) wantFinal();
      // Names are never canonicalised, so `canonical` holds only in the final pass, as with `final`.
      if (final === negate) result = false;
      continue;
    }
    const argument = words[++i];
    if (argument === undefined || argument === '' || argument.startsWith('#')) {
      throw new Error(`${where}: missing Match criteria for ${attribute}`);
    }
    let matched: boolean;
    switch (attribute) {
      case 'host':
        matched = matchPatternList(host.toLowerCase(), argument, true) === 1;
        break;
      case 'originalhost':
        matched = matchPatternList(state.hostArg.toLowerCase(), argument, true) === 1;
        break;
      case 'user':
        matched = matchPatternList(user, argument, false) === 1;
        break;
      case 'localuser':
        matched = matchPatternList(state.local.user, argument, false) === 1;
        break;
      case 'exec':
        // Unless asked, the ssh method runs no local commands on a config's say: a failed command.
        matched = state.local.matchExec && runExec(argument, host, user, where, state);
        break;
      default:
        throw new Error(`${where}: unsupported Match attribute ${attribute}`);
    }
    if (matched === negate) result = false;
  }
  if (attributes === 0) throw new Error(`${where}: one or more attributes required for Match`);
  return result;
}

/** Runs a `Match exec` command with the tokens of the state so far; true when it exits 0. */
function runExec(command: string, host: string, user: string, where: string, state: MatchState): boolean {
  const tokens = connectionTokens({
    host: state.hostArg,
    hostname: host,
    port: state.settings.port ?? 22,
    user,
    home: state.local.home,
    localUser: state.local.user,
  });
  const expanded = expandTokens(command, tokens, undefined, `${where}: Match exec`);
  return spawnSync('/bin/sh', ['-c', expanded], { stdio: 'ignore', env: state.local.env }).status === 0;
}
