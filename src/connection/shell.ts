/**
 * The commands that start a child, as argv or as one string for a remote
 * login shell. A POSIX shell moves the stream from fds 0/1 (all that
 * survives ssh, sudo and friends: sudo closes fds >= 3) to fds 3/4, points
 * fd 0 at /dev/null and fd 1 at fd 2, then execs Node with the first
 * stage. From then on nothing user code writes to stdout or stderr can
 * reach the stream.
 */

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

/** Shell script that execs the first Node found among `candidates` with "$@", or says what it tried. */
function discover(candidates: readonly string[]): string {
  const tried = describeCandidates(candidates);
  return `${MOVE_STREAM}; for n in ${candidates.join(' ')}; do if command -v "$n" >/dev/null 2>&1; then exec "$n" "$@"; fi; done; echo "tendril: no Node.js interpreter found on $(hostname) for user $(id -un) with PATH=$PATH; tried ${tried}" >&2; exit 127`;
}

/** Shell script that execs "$@" (an explicit interpreter command) with the stream moved. */
const EXPLICIT = `${MOVE_STREAM}; exec "$@"`;

/**
 * The argv that starts a child.
 * @param node the interpreter command (e.g. `['/usr/bin/node']`, `['nice', 'node']`), or
 *   undefined to discover one on the target among `candidates`.
 * @param stage the first stage.
 * @param candidates shell words naming where to look (globs and `$HOME` allowed). Default `NODE_CANDIDATES`.
 */
export function bootstrapArgv(
  node: readonly string[] | undefined,
  stage: string,
  candidates: readonly string[] = NODE_CANDIDATES,
): string[] {
  return node === undefined
    ? ['sh', '-c', discover(candidates), 'tendril', '-e', stage]
    : ['sh', '-c', EXPLICIT, 'tendril', ...node, '-e', stage];
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
