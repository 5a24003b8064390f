/**
 * The shell's part of a start on a target without a usable Node: it keeps
 * Node runtimes the parent sends in a cache directory of the account's
 * own, and starts the first stage with one of them.
 *
 * It runs where the discovery in shell.ts found no Node (or was told to
 * skip it, `shipNode: 'always'`), with the stream on fds 3 and 4. The
 * exchange (see runtime-shipping.ts for the parent's side):
 *
 * 1. It drops the `discard` bytes the parent sent before it could know
 *    (the core, sent at once when no prompt is expected).
 * 2. It writes one line on fd 4: `tendril:ship1 <uname -m>;<libc>;<cached>;<platform>`,
 *    where libc is `glibc-2.36`, `musl` or `unknown`, and cached lists the
 *    runtimes it already has (directory names, space-separated).
 * 3. It reads one line from fd 3: `use <entry>` (one it has), or
 *    `get <entry> <bytes> <sha512 in hex>` followed by exactly that many
 *    bytes of the runtime's package (the registry's tarball, gzip-compressed),
 *    which it checks against the hash, unpacks (`package/bin/node` only)
 *    and puts in place by rename.
 * 4. It execs that entry's `node` with the first stage; the parent sends
 *    the core again.
 *
 * Like the first stage it assumes nothing about how the stream delivers
 * bytes: a pipe (even a non-blocking one, shared with a parent that set
 * O_NONBLOCK) is reopened through /proc, which gives this process a
 * blocking description of its own, and exact counts are read with
 * `dd iflag=fullblock` in whole 64 KiB blocks and one remainder block, so
 * nothing past them is consumed (`head -c` of busybox reads ahead through
 * stdio). A non-blocking socket, which cannot be reopened, is refused with
 * a message. The script contains no `!` and no newline, so it survives any
 * login shell's quoting, like the rest of the command. (biome.json turns
 * off its rule against `${` in strings here: they are the shell's.)
 */

import { OWN_FUNCTION } from './shell-places.js';

/** The cache directories tried when the options name none, as the message lists them. */
export const RUNTIME_DIRECTORIES = [
  '$XDG_CACHE_HOME/tendril/node',
  '$HOME/.cache/tendril/node',
  '${TMPDIR:-/tmp}/tendril-<uid>/node',
  '/tmp/tendril-<uid>/node',
  '/var/tmp/tendril-<uid>/node',
  '/dev/shm/tendril-<uid>/node',
];

/** Prefix of the line the shell writes to ask for a runtime. */
export const SHIP_REQUEST = 'tendril:ship1 ';

/** How the shell part is set up for one start. */
export interface ShipStageOptions {
  /** Bytes the parent sent before it could know a runtime is needed (the core and its 4-byte prefix), to drop. */
  discard: number;
  /** The option `runtimeDirectory`: the only place to keep runtimes when given (a shell word). */
  directory?: string | undefined;
}

// Each fragment ends as a shell command must for the next to follow on the
// same line; they are joined with spaces. Variables: u uid (set, with the
// place checks `_s` and `_o`, by shell-places.ts), q C library, b the
// cache directory, w the directories tried, e the runtimes it has, h the
// parent's answer (l and p are the platform probe's, P the PATH kept for
// the Node run at the end, shell.ts: not to be reused). No other account
// may change any place on the way to b (shell-places.ts), so what is
// checked there is what runs: nobody can swap the directory between the
// check and the exec.
const FUNCTIONS = [
  OWN_FUNCTION,
  // k DIR SUB...: DIR is a trusted place (_s), and each SUB below it is made (0700) and ours alone; b is the last, physical.
  'k() { _s "$1" && test -d "$_d" || return 1; b=$_d; shift; for s do b=${b%/}/$s; mkdir -m 700 "$b" 2>/dev/null; _o "$b" || return 1; done; };',
  // a DIR: DIR (absolute) is made (0700) if missing, with what is missing above it; it must be a trusted place and ours alone; b is it, physical.
  'a() { case $1 in /*) ;; *) return 1;; esac; mkdir -p -m 700 "$1" 2>/dev/null; _s "$1" && _o "$_d" || return 1; b=$_d; };',
  // x: a program can run from $b (not a noexec mount); found out once, with a copy of the shell (named
  // sh, as busybox wants to be called).
  'x() { test -f "$b/.exec" && return 0; m=$(mktemp -d "$b/.x-XXXXXX") || return 1; cp /bin/sh "$m/sh" 2>/dev/null && "$m/sh" -c : 2>/dev/null && : >"$b/.exec"; rm -rf "$m"; test -f "$b/.exec"; };',
  // t PATH CHECK...: b is a usable cache directory, else PATH joins the ones tried (a noexec one is said).
  't() { y=$1; shift; "$@" && { x && return 0; echo "tendril: $y is on a mount that does not allow running programs; trying the next place" >&2; }; w="$w $y"; b=; return 1; };',
  // r N: exactly N bytes from the stream to stdout.
  'r() { dd bs=65536 count=$(($1 / 65536)) iflag=fullblock 2>/dev/null <&3 || return 1; test $(($1 % 65536)) = 0 || dd bs=$(($1 % 65536)) count=1 iflag=fullblock 2>/dev/null <&3; };',
  // g ENTRY BYTES HASH: receives a runtime into $b/ENTRY (an entry there holding only the package, as a
  // context that runs its own Node keeps one, gets the binary added).
  'g() { z=$(mktemp -d "$b/.new-XXXXXX") || return 1;',
  'echo "tendril: receiving Node runtime $1 ($2 bytes) into $b" >&2;',
  'r "$2" >"$z/node.tgz" && test $(($(wc -c <"$z/node.tgz"))) = "$2" || { echo "tendril: receiving the Node runtime into $b failed (the stream ended, or the disk is full)" >&2; rm -rf "$z"; return 1; };',
  's=$(sha512sum <"$z/node.tgz");',
  'test "${s%% *}" = "$3" || { echo "tendril: the Node runtime received does not match its hash; it was not used" >&2; rm -rf "$z"; return 1; };',
  'tar -xzf "$z/node.tgz" -C "$z" package/bin/node && mv "$z/package/bin/node" "$z/node" && rm -rf "$z/package" || { echo "tendril: cannot unpack the Node runtime in $b" >&2; rm -rf "$z"; return 1; };',
  'if test -d "$b/$1"; then test -x "$b/$1/node" || mv "$z/node" "$b/$1/node"; else mv "$z" "$b/$1"; fi; rm -rf "$z"; };',
];

/**
 * The shell script run when no Node was found: see the module's comment.
 * It ends by exec'ing the runtime with "$@" (the first stage's arguments),
 * or exits with a message on stderr. It runs after shell.ts's discovery,
 * which sets `u`, the place checks, `P` (the PATH to give Node) and PATH
 * (the system's tools).
 */
export function shipStage(options: ShipStageOptions): string {
  const discard = Math.max(0, Math.floor(options.discard));
  const places =
    options.directory === undefined
      ? [
          '{ test -n "$XDG_CACHE_HOME" && t "$XDG_CACHE_HOME/tendril/node" k "$XDG_CACHE_HOME" tendril node; } ||',
          '{ test -n "$HOME" && t "$HOME/.cache/tendril/node" k "$HOME" .cache tendril node; } ||',
          'for d in "${TMPDIR:-/tmp}" /tmp /var/tmp /dev/shm; do mkdir -m 700 "$d/tendril-$u" 2>/dev/null; t "$d/tendril-$u/node" k "$d/tendril-$u" node && break; done;',
        ]
      : [`t ${quoted(options.directory)} a ${quoted(options.directory)};`];
  return [
    'w=; b=; _u;',
    // q: the C library as one word (l is set by the platform probe of shell.ts).
    'case $l in glibc*) q=glibc-${l#glibc };; musl) q=musl;; *) q=unknown;; esac;',
    ...FUNCTIONS,
    // The stream as descriptors of this process's own, blocking: a pipe reopened through /proc.
    'test -p /proc/self/fd/3 && exec 3</proc/self/fd/3;',
    'test -p /proc/self/fd/4 && exec 4>>/proc/self/fd/4;',
    `case $(sed -n 's/^flags:[[:space:]]*//p' /proc/self/fdinfo/3 2>/dev/null) in *[4567]???) echo "tendril: the stream is a non-blocking socket, which a shell cannot read exactly; install Node on the target or set nodePath" >&2; exit 1;; esac;`,
    ...places,
    `test -n "$b" || { echo "tendril: no directory to keep a Node runtime in on $(hostname) for user $(id -un): tried$w (each must be the account's own, writable by no one else, reached only through directories no account but root and this one can change, on a mount that allows running programs); set the option runtimeDirectory" >&2; exit 1; };`,
    `test ${discard} = 0 || r ${discard} >/dev/null;`,
    'e=; for d in "$b"/*-*; do test -x "$d/node" && e="$e ${d##*/}"; done;',
    `printf '${SHIP_REQUEST}%s;%s;%s;%s\\n' "$(uname -m)" "$q" "$e" "$p" >&4;`,
    'read -r h <&3 || { echo "tendril: the stream ended before the parent said which Node runtime to use" >&2; exit 1; };',
    'case $h in "use "*) n=${h#use };; "get "*) set -- $h "$@"; n=$2; g "$2" "$3" "$4" || exit 1; shift 4;; *) echo "tendril: unexpected answer from the parent: $h" >&2; exit 1;; esac;',
    'PATH=$P; exec "$b/$n/node" "$@"',
  ].join(' ');
}

/** `word` in double quotes, so `$HOME` in it expands and nothing else does. */
function quoted(word: string): string {
  return `"${word.replace(/["\\`]/g, '\\$&')}"`;
}
