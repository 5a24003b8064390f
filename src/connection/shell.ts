/**
 * The commands that start a child, as argv or as one string for a remote
 * login shell. A POSIX shell moves the stream from fds 0/1 (all that
 * survives ssh, sudo and friends: sudo closes fds >= 3) to fds 3/4, points
 * fd 0 at /dev/null and fd 1 at fd 2, then execs Node with the first
 * stage. From then on nothing user code writes to stdout or stderr can
 * reach the stream.
 *
 * The environment that shell runs in may be another account's (`su`
 * without `-l` keeps the caller's PATH, NVM_BIN and TMP), so it is
 * `/bin/sh` by its path (a PATH lookup, or an exported bash function
 * named `sh`, would be the caller's choice; a container's method, whose
 * target has its own environment, names `sh`), and the Node it runs must
 * pass the shell's place checks (shell-places.ts): a Node that another
 * account could replace (found through a PATH entry, NVM_BIN or HOME of
 * that account's) is passed over, and named in the message if no other
 * is found. Its own tools (uname, sed...) come from the system's
 * directories, never from PATH.
 */

import { FIND_FUNCTIONS, PLACES_FUNCTIONS, PLACES_PRELUDE, REFUSED_CANDIDATES, TOOLS_PATH } from './shell-places.js';
import { type ShipStageOptions, shipStage } from './ship-stage.js';

/** The shell a start command runs in unless its method says otherwise (`ConnectionMethod.shell`): by its path. */
export const SHELL = '/bin/sh';

/** How the shell goes on to a shipped runtime (see ship-stage.ts). */
export interface ShipOptions extends ShipStageOptions {
  /** Skip looking for a Node on the target (`shipNode: 'always'`). */
  always: boolean;
}

/** Moves the stream off fds 0 and 1; runs first in every wrapper. */
const MOVE_STREAM = 'exec 3<&0 4>&1 </dev/null >&2';

/**
 * Where to look for Node when the options do not say: PATH first, then the
 * places version managers and packages put it (non-interactive SSH sessions
 * do not read the shell profile that would put nvm's node on PATH).
 */
export const NODE_CANDIDATES = [
  'node',
  'nodejs',
  '"$NVM_BIN"/node',
  '"$HOME"/.nvm/versions/node/*/bin/node',
  '"$HOME"/.volta/bin/node',
  '"$HOME"/.local/share/fnm/aliases/default/bin/node',
  '"$HOME"/.local/bin/node',
  '/usr/local/bin/node',
  '/opt/homebrew/bin/node',
  '/usr/bin/node',
  '/opt/node*/bin/node',
  '/snap/bin/node',
];

/** `candidates` as a message lists them: `node, nodejs, $NVM_BIN/node, ...`. */
export function describeCandidates(candidates: readonly string[] = NODE_CANDIDATES): string {
  return candidates.join(', ').replace(/"/g, '');
}

/**
 * What the target is, for the message when it has no Node: kernel and
 * machine (`uname -s -m`), the distribution's PRETTY_NAME, and the C
 * library (glibc and its version, or musl, whose loader is
 * /lib/ld-musl-<arch>.so.1), e.g. `Linux x86_64, Debian GNU/Linux 12
 * (bookworm), glibc 2.36`. Run only when no Node was found.
 */
const PLATFORM =
  'l=$(getconf GNU_LIBC_VERSION 2>/dev/null) || l=; for f in /lib/ld-musl-*.so.1; do [ -z "$l" ] && [ -e "$f" ] && l=musl; done; ' +
  `o=$(sed -n 's/^PRETTY_NAME=//p' /etc/os-release 2>/dev/null | tr -d '"'); ` +
  // biome-ignore lint/suspicious/noTemplateCurlyInString: the shell's parameter expansion, not a template
  'p="$(uname -s) $(uname -m)${o:+, $o}, ${l:-an unknown C library}"';

/**
 * Shell script that execs the first Node found among `candidates` that
 * passes the place checks, with "$@". When none is found (or
 * `ship.always` skips looking), with `ship` it goes on to the runtime the
 * parent sends (ship-stage.ts); without, it says what it tried, what it
 * turned down and what the target is. PATH is kept in `P` for the Node
 * run at the end; the tools in between come from `TOOLS_PATH`.
 */
function discover(candidates: readonly string[], ship: ShipOptions | undefined): string {
  const tried = describeCandidates(candidates);
  const look = `_v=; for n in ${candidates.join(' ')}; do if _y "$n"; then exec "$_g" "$@"; fi; done; `;
  const found = ship?.always ? '' : look;
  const otherwise = ship
    ? shipStage(ship)
    : `echo "tendril: no Node.js interpreter found on $(hostname) for user $(id -un) with PATH=$P; tried ${tried}${REFUSED_CANDIDATES}; the target: $p" >&2; exit 127`;
  return `${MOVE_STREAM}; ${PLACES_PRELUDE} ${PLACES_FUNCTIONS} ${FIND_FUNCTIONS} ${found}P=$PATH; PATH=${TOOLS_PATH}; ${PLATFORM}; ${otherwise}`;
}

/** Shell script that execs "$@" (an explicit interpreter command given by its path) with the stream moved. */
const EXPLICIT = `${MOVE_STREAM}; exec "$@"`;

/**
 * Shell script that execs "$@" where "$1" is a bare name: looked up in
 * PATH as `_y` does, so that a PATH entry another account could change is
 * passed over.
 */
const EXPLICIT_LOOKUP = `${MOVE_STREAM}; ${PLACES_PRELUDE} ${PLACES_FUNCTIONS} ${FIND_FUNCTIONS} _v=; if _y "$1"; then shift; exec "$_g" "$@"; fi; echo "tendril: nodePath names $1, which is in no directory of PATH that only root and $(command -p id -un) can change${REFUSED_CANDIDATES}; give nodePath as an absolute path" >&2; exit 127`;

/**
 * The argv that starts a child.
 * @param node the interpreter command (e.g. `['/usr/bin/node']`, `['nice', 'node']`), or
 *   undefined to discover one on the target among `candidates`. A first word without a `/`
 *   is looked up only in PATH entries no account but root and the target's can change.
 * @param stage the first stage.
 * @param candidates shell words naming where to look (globs and `$HOME` allowed). Default `NODE_CANDIDATES`.
 * @param ship when a runtime may be shipped: how (undefined: `shipNode: 'never'`).
 * @param shell the shell to run the script in (`ConnectionMethod.shell`). Default `SHELL`.
 */
export function bootstrapArgv(
  node: readonly string[] | undefined,
  stage: string,
  candidates: readonly string[] = NODE_CANDIDATES,
  ship?: ShipOptions,
  shell = SHELL,
): string[] {
  if (node === undefined) return [shell, '-c', discover(candidates, ship), 'tendril', '-e', stage];
  const script = node[0]?.includes('/') === false ? EXPLICIT_LOOKUP : EXPLICIT;
  return [shell, '-c', script, 'tendril', ...node, '-e', stage];
}

/** Quotes one word for a POSIX shell (and for fish and csh-family shells, given no `!` or newline). */
export function shellQuote(word: string): string {
  if (/^[\w@%+=:,./-]+$/.test(word)) return word;
  return `'${word.replace(/'/g, `'\\''`)}'`;
}

/** An argv as one command string for a remote login shell (ssh's command). */
export function shellCommand(argv: readonly string[]): string {
  return argv.map(shellQuote).join(' ');
}
