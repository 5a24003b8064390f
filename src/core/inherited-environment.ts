/**
 * What a child takes on trust from the environment it was started with.
 * That environment may be another account's: `su` without `-l` keeps the
 * caller's PATH, TMP, TEMP, XDG_* and working directory (glibc drops
 * TMPDIR for set-user-ID programs, not the others), and so do `sudo -E`
 * and doas's keepenv. A child started that way as root, from an account
 * that owns the directories those name, would otherwise run that
 * account's programs, keep its files where that account can swap them,
 * and resolve modules from its directory.
 *
 * So, as the core starts (before any call, and before the state calls
 * are restored to is taken), each variable that names a place is kept
 * only where it names a trusted place (private-directory.ts), the rest is
 * taken out, and the child says so on its stderr (a log record in the
 * master). Lists (PATH, NODE_PATH, XDG_*_DIRS, KUBECONFIG) lose the
 * entries that are not trusted, relative ones and empty ones (the working
 * directory) included. The container tools' daemons (DOCKER_HOST,
 * CONTAINER_HOST as `unix://` sockets) and DOCKER_CONFIG are judged too.
 * SSH_AUTH_SOCK is kept: passing an agent on is deliberate (`sudo
 * --preserve-env=SSH_AUTH_SOCK`), and an agent holds only the keys its
 * owner offers; it never receives a secret of this account's. A working directory that is not trusted is left for the home,
 * else `/`.
 */
import { describeProblem, type PlaceOptions, placeProblem } from './private-directory.js';

/** Variables naming one directory (a missing one passes where only root and this account could make it). */
export const DIRECTORY_VARIABLES: readonly string[] = [
  'HOME',
  'TMPDIR',
  'TMP',
  'TEMP',
  'XDG_CACHE_HOME',
  'XDG_CONFIG_HOME',
  'XDG_DATA_HOME',
  'XDG_STATE_HOME',
  'XDG_RUNTIME_DIR',
];

/** Most entries of one list said, and characters of one value or path. */
const MAX_SAID = 16;
/** Most entries of one list judged (each costs a few lstat calls); the rest are left out. */
const MAX_ENTRIES = 256;
const MAX_SAID_LENGTH = 256;

/**
 * `text` cut to `MAX_SAID_LENGTH` characters, as a copy (a slice would keep
 * the whole value alive): the environment is its caller's to fill.
 */
function brief(text: string): string {
  return text.length <= MAX_SAID_LENGTH ? text : `${text.slice(0, MAX_SAID_LENGTH).split('').join('')}...`;
}

/** The PATH a context is left with when none of its own entries may be trusted. */
const SYSTEM_PATH = ['/usr/bin', '/bin'];

/** Variables naming directories, colon-separated; KUBECONFIG names files, which are judged alike. */
export const LIST_VARIABLES: readonly string[] = [
  'PATH',
  'NODE_PATH',
  'XDG_CONFIG_DIRS',
  'XDG_DATA_DIRS',
  'KUBECONFIG',
];

/**
 * Variables naming the daemon a container tool talks to (`unix://` and a
 * socket's path; any other address is kept), and the tools' own
 * configuration directories: one another account could change would
 * choose what the context's containers are.
 */
export const SOCKET_VARIABLES: readonly string[] = ['DOCKER_HOST', 'CONTAINER_HOST'];
/** The container tools' configuration directories, judged as the directory variables are. */
export const CONFIG_VARIABLES: readonly string[] = ['DOCKER_CONFIG'];

/**
 * Takes out of `env` what names a place another account could change
 * (see the module's comment).
 * @param env the environment to change in place. Default `process.env`.
 * @param options the account (default this process's effective user).
 * @returns what was taken out: each variable changed, and in words what went, e.g.
 *   `TMP=/home/bob/tmp (/home/bob/tmp is owned by another account (uid 1001))`;
 *   empty words when all that went were list entries that do not exist.
 */
export function distrustInheritedPlaces(
  env: NodeJS.ProcessEnv = process.env,
  options: PlaceOptions = {},
): { variable: string; text: string }[] {
  const dropped: { variable: string; text: string }[] = [];
  const check = { ...options, allowMissing: true };
  for (const name of SOCKET_VARIABLES) {
    const value = env[name];
    if (value === undefined || !value.startsWith('unix://')) continue;
    const socket = value.slice('unix://'.length);
    const problem = placeProblem(socket, { ...options, allowMissing: true, anyModeAtEnd: true });
    if (problem) {
      delete env[name];
      dropped.push({ variable: name, text: `${name}=${brief(value)} (${brief(describeProblem(problem))})` });
    }
  }
  for (const name of [...DIRECTORY_VARIABLES, ...CONFIG_VARIABLES]) {
    const value = env[name];
    if (value === undefined) continue;
    const problem = placeProblem(value, check);
    if (problem) {
      delete env[name];
      dropped.push({ variable: name, text: `${name}=${brief(value)} (${brief(describeProblem(problem))})` });
    }
  }
  for (const name of LIST_VARIABLES) {
    const value = env[name];
    if (value === undefined) continue;
    const entries = value.split(':');
    const kept: string[] = [];
    const left: string[] = [];
    let unsaid = 0;
    const leave = (text: () => string) => {
      if (left.length < MAX_SAID) left.push(text());
      else unsaid++;
    };
    entries.forEach((entry, i) => {
      if (entry === '') leave(() => 'an empty entry (the working directory)');
      else if (i >= MAX_ENTRIES) leave(() => `${brief(entry)} (past the first ${MAX_ENTRIES} entries)`);
      else {
        const problem = placeProblem(entry, check);
        if (problem === undefined) kept.push(entry);
        // One that does not exist named nothing the program had, and goes without a word: npm puts
        // node_modules/.bin of every directory above a package on PATH, /tmp's among them.
        else if (problem.reason !== 'missing') leave(() => `${brief(entry)} (${brief(describeProblem(problem))})`);
      }
    });
    if (kept.length === entries.length) continue;
    // An empty PATH would name the working directory; an empty list of anything else, nothing.
    if (name === 'PATH' && kept.length === 0) kept.push(...SYSTEM_PATH.filter((entry) => !placeProblem(entry, check)));
    if (kept.length > 0) env[name] = kept.join(':');
    else delete env[name];
    if (unsaid > 0) left.push(`and ${unsaid} more`);
    dropped.push({ variable: name, text: left.length > 0 ? `from ${name}: ${left.join(', ')}` : '' });
  }
  return dropped;
}

/**
 * Leaves a working directory that is not a trusted place for the home
 * (when that is one), else `/`.
 * @returns what was done, in words, or undefined when the directory was kept.
 */
export function leaveUntrustedDirectory(options: PlaceOptions = {}): string | undefined {
  let cwd: string;
  try {
    cwd = process.cwd();
  } catch {
    // Removed under it: nowhere to judge, and nothing relative can resolve there anyway.
    cwd = '';
  }
  const problem = cwd === '' ? undefined : placeProblem(cwd, options);
  if (cwd !== '' && !problem) return undefined;
  const home = process.env.HOME;
  for (const place of home && !placeProblem(home, options) ? [home, '/'] : ['/']) {
    try {
      process.chdir(place);
      return `working directory ${cwd || '(removed)'} left for ${place}${problem ? ` (${describeProblem(problem)})` : ''}`;
    } catch {
      // Not enterable: the next.
    }
  }
  return undefined;
}
