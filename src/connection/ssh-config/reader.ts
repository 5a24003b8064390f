/**
 * Reading config files line by line into the settings, as readconf.c
 * does: first value wins, `Host` and `Match` switch the lines below them
 * on or off, and `Include` is read where it appears, inside the block it
 * is in. Only the directives the ssh method uses are kept; the others
 * are passed over unchecked, so a config valid for OpenSSH never fails here
 * on a directive tendril has no use for.
 */
import { closeSync } from 'node:fs';
import { homedir } from 'node:os';
import { isAbsolute, join } from 'node:path';
import { checkPlace, describeProblem } from '../../core/private-directory.js';
import { openRegularFile, RegularFileError, readRange } from '../../core/regular-file.js';
import { expandTilde, expandTokens } from './expand.js';
import { glob } from './glob.js';
import { evaluateMatch, type MatchState } from './match.js';
import { matchPattern } from './patterns.js';
import { parseJumpSetting } from './proxy-jump.js';
import type { Local, Settings, StrictHostKeyChecking } from './settings.js';
import { parsePort, parseTime, splitArguments } from './words.js';

/** The user's config file: `~/.ssh/config`. */
export function defaultConfigFile(home = homedir()): string {
  return join(home, '.ssh', 'config');
}

/** The system-wide config file, read after the user's when no file is given. */
export const SYSTEM_CONFIG_FILE = '/etc/ssh/ssh_config';

/** OpenSSH refuses deeper Include nesting (READCONF_MAX_DEPTH). */
const MAX_INCLUDE_DEPTH = 16;

interface ReadFlags {
  /** A user config: relative Includes are under ~/.ssh and may use `~`. */
  user: boolean;
  /** OpenSSH refuses files others can write (SSHCONF_CHECKPERM). */
  checkPerm: boolean;
  /** An Include from an inactive block: parse only, apply nothing. */
  neverMatch: boolean;
  /** The second pass `Match final` asked for. */
  final: boolean;
}

/** Reads config files into `settings`, line by line, as readconf.c does. */
export class ConfigReader {
  /** Files read, in order. */
  readonly files: string[] = [];
  /** A `Match final` was seen: a second pass is due. */
  wantFinal = false;

  private readonly matchState: MatchState;

  /**
   * @param settings filled in place, first value wins: the caller's own values (`ssh -l`, `-p`, `-J`) are set before reading.
   * @param hostArg the host name as given (`originalhost`, `%n`).
   */
  constructor(
    private readonly local: Local,
    private readonly settings: Settings,
    private readonly hostArg: string,
  ) {
    this.matchState = { local, settings, hostArg };
  }

  /**
   * Reads the configured files for one pass. `host` is what `Host` lines
   * match: the name as given in the first pass, the resolved name in the final one.
   */
  readAll(configFile: string | false | undefined, final: boolean, host = this.hostArg): void {
    const flags = { user: true, checkPerm: false, neverMatch: false, final };
    if (configFile === false) return;
    if (configFile !== undefined) {
      // As `ssh -F`: the file must exist.
      this.read(configFile, flags, { active: true }, 0, host, true);
      return;
    }
    this.read(defaultConfigFile(this.local.home), { ...flags, checkPerm: true }, { active: true }, 0, host, false);
    this.read(SYSTEM_CONFIG_FILE, { ...flags, user: false }, { active: true }, 0, host, false);
  }

  private read(
    file: string,
    flags: ReadFlags,
    state: { active: boolean },
    depth: number,
    host: string,
    mustExist: boolean,
  ): void {
    if (depth > MAX_INCLUDE_DEPTH) {
      throw new Error(`${file}: Include nested more than ${MAX_INCLUDE_DEPTH} deep (does an Include include itself?)`);
    }
    let text: string;
    try {
      text = readChecked(file, flags.checkPerm);
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code === 'ENOENT' && !mustExist) return;
      // An Include's pattern may match a directory: skipped, as OpenSSH skips it.
      if (error instanceof RegularFileError && error.kind === 'directory') return;
      throw error instanceof Error && (error as NodeJS.ErrnoException).code === undefined
        ? error
        : new Error(`cannot read the ssh config ${file}: ${(error as Error).message}`);
    }
    if (!flags.final) this.files.push(file);
    const lines = text.split('\n');
    for (let i = 0; i < lines.length; i++) {
      this.line(lines[i] as string, file, i + 1, flags, state, depth, host);
    }
  }

  private line(
    raw: string,
    file: string,
    lineNumber: number,
    flags: ReadFlags,
    state: { active: boolean },
    depth: number,
    host: string,
  ): void {
    const where = `${file} line ${lineNumber}`;
    // The lookbehind starts one attempt per run of whitespace, not one per character of it (quadratic).
    const line = raw.replace(/(?<![ \t\r\n\f])[ \t\r\n\f]+$/, '');
    // The keyword ends at whitespace, a quote or one '=' (strdelim).
    const head = /^[ \t\r\n]*([^ \t\r\n"=]*)/.exec(line) as RegExpExecArray;
    const keywordText = head[1] as string;
    if (!keywordText || keywordText.startsWith('#')) return;
    const keyword = keywordText.toLowerCase();
    const rest = line.slice(head[0].length).replace(/^[ \t\r\n]*=?[ \t\r\n]*/, '');
    if (!rest) throw new Error(`${where}: no argument after keyword "${keywordText}"`);
    const args = splitArguments(rest, where);
    const apply = state.active;
    const s = this.settings;
    const one = (): string => {
      if (args.length === 0 || args[0] === '') throw new Error(`${where}: missing argument for ${keywordText}`);
      if (args.length > 1) throw new Error(`${where}: ${keywordText} has extra arguments at the end of the line`);
      return args[0] as string;
    };

    switch (keyword) {
      case 'host': {
        state.active = false;
        if (flags.neverMatch) return;
        for (const arg of args) {
          if (!arg) throw new Error(`${where}: empty Host pattern`);
          const negated = arg.startsWith('!');
          // Host patterns are matched as written, case included (match_pattern, not match_hostname).
          if (matchPattern(host, negated ? arg.slice(1) : arg)) {
            if (negated) {
              state.active = false;
              return;
            }
            state.active = true;
          }
        }
        return;
      }
      case 'match': {
        const result = evaluateMatch(rest, where, flags.final, this.matchState, () => {
          this.wantFinal = true;
        });
        state.active = flags.neverMatch ? false : result;
        return;
      }
      case 'include': {
        for (const arg of args) {
          if (!arg) throw new Error(`${where}: empty Include path`);
          if (arg.startsWith('~') && !flags.user)
            throw new Error(`${where}: bad include path ${arg} (no ~ in /etc/ssh)`);
          const anchored =
            isAbsolute(arg) || arg.startsWith('~') ? arg : `${flags.user ? '~/.ssh' : '/etc/ssh'}/${arg}`;
          const outer = state.active;
          for (const path of glob(expandTilde(anchored, this.local.home))) {
            this.read(
              path,
              { ...flags, checkPerm: true, neverMatch: flags.neverMatch || !outer },
              state,
              depth + 1,
              host,
              false,
            );
            // A Host or Match inside the included file ends with it.
            state.active = outer;
          }
        }
        return;
      }
      case 'hostname':
        if (apply && s.hostname === undefined) s.hostname = one();
        else one();
        return;
      case 'user':
        if (apply && s.user === undefined) s.user = one();
        else one();
        return;
      case 'port': {
        const port = parsePort(one());
        if (port === undefined) throw new Error(`${where}: bad port '${args[0]}'`);
        if (apply && s.port === undefined) s.port = port;
        return;
      }
      case 'identityfile': {
        const path = one();
        if (apply && !s.identityFiles.some((entry) => entry.path === path && entry.userProvided === flags.user)) {
          s.identityFiles.push({ path, userProvided: flags.user });
        }
        return;
      }
      case 'userknownhostsfile':
      case 'globalknownhostsfile': {
        const key = keyword === 'userknownhostsfile' ? 'userKnownHostsFiles' : 'globalKnownHostsFiles';
        args.forEach((arg, i) => {
          if (!arg) throw new Error(`${where}: empty argument for ${keywordText}`);
          if (arg.toLowerCase() === 'none' && (i > 0 || args.length > 1)) {
            throw new Error(`${where}: ${keywordText} "none" must appear alone`);
          }
        });
        if (apply && s[key] === undefined) s[key] = args;
        return;
      }
      case 'stricthostkeychecking': {
        const value = STRICT[one().toLowerCase()];
        if (value === undefined) throw new Error(`${where}: StrictHostKeyChecking must be yes, no, ask or accept-new`);
        if (apply && s.strictHostKeyChecking === undefined) s.strictHostKeyChecking = value;
        return;
      }
      case 'identitiesonly':
      case 'hashknownhosts': {
        const value = FLAG[one().toLowerCase()];
        if (value === undefined) throw new Error(`${where}: ${keywordText} must be yes or no`);
        const key = keyword === 'identitiesonly' ? 'identitiesOnly' : 'hashKnownHosts';
        if (apply && s[key] === undefined) s[key] = value;
        return;
      }
      case 'identityagent': {
        const value = one();
        // OpenSSH checks the variables at once, even in blocks that do not apply.
        expandTokens(value, undefined, this.local.env, `${where}: IdentityAgent`);
        if (value.startsWith('$') && !value.startsWith('${') && !/^\$[A-Za-z_][A-Za-z0-9_]*$/.test(value)) {
          throw new Error(`${where}: invalid environment variable name ${value}`);
        }
        if (apply && s.identityAgent === undefined) s.identityAgent = value;
        return;
      }
      case 'proxyjump': {
        const value = parseJumpSetting(rest.replace(/^[ \t\r\n=]*/, ''), where);
        if (apply && s.proxy === undefined) s.proxy = value;
        return;
      }
      case 'proxycommand':
        if (apply && s.proxy === undefined) s.proxy = { command: rest.replace(/^[ \t\r\n=]*/, '') };
        return;
      case 'connecttimeout':
      case 'serveraliveinterval': {
        const text = one();
        const seconds = text === 'none' ? undefined : parseTime(text);
        if (seconds === null) throw new Error(`${where}: invalid time value '${text}' for ${keywordText}`);
        const key = keyword === 'connecttimeout' ? 'connectTimeout' : 'serverAliveInterval';
        // `none` leaves the setting unset, so a later line may still set it (as in readconf.c).
        if (apply && s[key] === undefined && seconds !== undefined) s[key] = seconds;
        return;
      }
      case 'serveralivecountmax': {
        const text = one();
        if (!/^-?\d+$/.test(text)) throw new Error(`${where}: ServerAliveCountMax must be an integer`);
        if (apply && s.serverAliveCountMax === undefined) s.serverAliveCountMax = Number(text);
        return;
      }
      case 'hostkeyalias':
        if (apply && s.hostKeyAlias === undefined) s.hostKeyAlias = one();
        else one();
        return;
      default:
        // Directives the ssh method has no use for; OpenSSH's own checks of them do not apply.
        return;
    }
  }
}

const STRICT: Record<string, StrictHostKeyChecking> = {
  yes: 'yes',
  true: 'yes',
  no: 'no',
  false: 'no',
  off: 'no',
  ask: 'ask',
  'accept-new': 'accept-new',
};
const FLAG: Record<string, boolean> = { yes: true, true: true, no: false, false: false };

/**
 * A config file's text; with `checkPerm`, refused as OpenSSH refuses it
 * when others could have written it, and when another account could
 * change a directory on the way to it or a link it is reached through
 * (core/private-directory.ts): such a file could name the hosts, users,
 * keys and jump hosts of its choosing. Opened without blocking, and read
 * only if it is a regular file (a FIFO in its place is refused, not
 * waited on).
 */
function readChecked(file: string, checkPerm: boolean): string {
  // `ssh -F /dev/null`'s way of asking for no config.
  if (file === '/dev/null') return '';
  let path = file;
  if (checkPerm) {
    const check = checkPlace(file);
    if ('real' in check) path = check.real;
    else if (check.problem.reason !== 'missing') {
      throw new Error(
        `bad owner or permissions on the ssh config ${file}: ${describeProblem(check.problem)}; it, and each directory and link on the way to it, must belong to you or root and not be writable by group or others (OpenSSH refuses a config others may write too)`,
      );
    }
  }
  // A regular file (a link to one is followed, as OpenSSH follows it); a FIFO there is refused, not waited on.
  const { fd, stats: stat } = openRegularFile(path, { follow: true });
  try {
    if (checkPerm) {
      const uid = process.getuid?.();
      if (uid !== undefined && ((stat.uid !== 0 && stat.uid !== uid) || (stat.mode & 0o022) !== 0)) {
        throw new Error(
          `bad owner or permissions on the ssh config ${file}: it must belong to you or root and not be writable by group or others (OpenSSH refuses it too; chmod go-w ${file})`,
        );
      }
    }
    return readRange(fd, 0, stat.size).toString('utf8');
  } finally {
    closeSync(fd);
  }
}
