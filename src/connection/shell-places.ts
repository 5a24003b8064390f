/**
 * The shell's checks of the places it runs Node from and keeps runtimes
 * in, before any Node runs: the same rule as core/private-directory.ts
 * (every entry on the way root's or the account's, no directory writable
 * by group or others unless sticky, links followed one at a time), in
 * POSIX sh. The environment the shell got may be another account's (`su`
 * without `-l` keeps the caller's PATH, NVM_BIN and TMP), so nothing it
 * names is run or kept in unless it passes. The tools the checks use are
 * found with `command -p` (the system's standard PATH), never through
 * PATH.
 *
 * Like the rest of the start command, these fragments contain no `!` and
 * no newline, and end as a command must for the next to follow on the
 * same line. Their names start with `_` so they clash with none of the
 * ship stage's single letters; `PLACES_PRELUDE` must run first. They
 * cost one `ls` per place checked (and a `readlink` per link on the way),
 * about as much as a start's other forks (biome.json turns off its rule
 * against `${` in strings for the connection's shell scripts.)
 */

/**
 * Sets what the functions need: `u`, this account's uid, found (with
 * `id -u`) only when an entry owned by someone other than root is met, so
 * it starts empty here (a `u` in the environment must never count).
 */
export const PLACES_PRELUDE = 'u=;';

/** A mode string as `ls -l` starts an entry's line with. */
const MODE = '[-dlcbps][-r][-w][-xsS][-r][-w][-xsS][-r][-w][-xtT]*';

/**
 * The functions (see the module's comment):
 *
 * - `_c PATH...`: every entry listed (one `ls -ldn`, not following links)
 *   is root's or this account's, and none but a link or a sticky
 *   directory may be written by group or others. The listing is split
 *   into words, and each word shaped like a mode is judged with the word
 *   two after it as its owner: each entry's own line starts with its real
 *   mode, link count and owner, so words a name adds (a space, a newline)
 *   can only add judgements, never take one away.
 * - `_s PATH`: resolves the absolute PATH as the kernel would, one
 *   component and one link (at most 40) at a time, into `_d` (its physical
 *   path), and checks every entry on the way, links included, with `_c`.
 */
export const PLACES_FUNCTIONS = [
  '_u() { test -n "$u" || u=$(command -p id -u); };',
  `_c() { _z=$(command -p ls -ldn "$@" 2>/dev/null) || return 1; set -f; set -- $_z; set +f; _r=0; while test $# -gt 2; do case $1 in ${MODE})`,
  'test "$3" = 0 || { _u; test "$3" = "$u"; } || _r=1; case $1 in l*|d????????[tT]*) ;; ?????w*|????????w*) _r=1;; esac;; esac; shift; done; return $_r; };',
  '_s() { _f=$1; _d=; _i=0; case $_f in /*) ;; *) return 1;; esac; set -- /;',
  'while :; do while :; do case $_f in /*) _f=${_f#/};; *) break;; esac; done; test -n "$_f" || break; _j=${_f%%/*}; case $_f in */*) _f=${_f#*/};; *) _f=;; esac;',
  'case $_j in .) continue;; ..) _d=${_d%/*}; continue;; esac; set -- "$@" "$_d/$_j";',
  'if test -h "$_d/$_j"; then _i=$((_i+1)); test $_i -le 40 || return 1; _t=$(command -p readlink "$_d/$_j") || return 1; case $_t in /*) _d=;; esac; _f=$_t/$_f; else _d=$_d/$_j; fi; done;',
  '_d=${_d:-/}; _c "$@"; };',
].join(' ');

/** `_o DIR`: DIR (physical) is a directory of this account's own that group and others may not write (for the ship stage). */
export const OWN_FUNCTION =
  '_o() { test -h "$1" && return 1; test -d "$1" || return 1; _z=$(command -p ls -ldn "$1" 2>/dev/null) || return 1; set -f; set -- $_z; set +f; _u; test "$3" = "$u" || return 1; case $1 in ?????w*|????????w*) return 1;; esac; };';

/**
 * Functions that find a Node to run: `_y NAME` sets `_g` to the first
 * executable NAME names (a path, or a bare name looked up in each absolute
 * PATH entry in turn) that passes `_s`; each one that does not is added
 * to `_v`, for the message. Needs `PLACES_FUNCTIONS`.
 */
export const FIND_FUNCTIONS = [
  '_k() { test -f "$1" && test -x "$1" || return 1; if _s "$1" && test -f "$_d"; then _g=$1; return 0; fi; _v="$_v $1"; return 1; };',
  '_y() { _m=$1; case $_m in */*) _k "$_m"; return;; esac; set -f; IFS=:; set -- $PATH; unset IFS; set +f;',
  'for _e do case $_e in /*) _k "$_e/$_m" && return 0;; esac; done; return 1; };',
].join(' ');

/** Where the start command's own tools (uname, sed, dd, tar...) are found: the system's, never PATH's. */
export const TOOLS_PATH = '/usr/bin:/bin:/usr/sbin:/sbin';

/** The words a message adds for the candidates `_y` turned down (empty when none). */
export const REFUSED_CANDIDATES = '${_v:+; not used, as an account other than root and this one could change them:$_v}';
