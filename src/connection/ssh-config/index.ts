/**
 * The OpenSSH client configuration, read the way OpenSSH 9 reads it
 * (ssh_config(5); readconf.c and ssh.c are the reference): the same
 * tokenising, first value wins, `Host` and `Match` evaluated line by line
 * against the state reached so far, `Include` processed where it appears
 * (globs, `~`, paths relative to ~/.ssh or /etc/ssh, nested, inside
 * blocks), a `Match final` pass, `%` tokens and `${VAR}` where OpenSSH
 * expands them, and ProxyJump chains resolved hop by hop.
 *
 * This is written here rather than taken from the `ssh-config` package:
 * that package has no `Include`, evaluates whole blocks rather than lines
 * in order, cannot negate Match criteria, and does not load on Node 12,
 * which a child reached with `via` may run. Everything here uses APIs
 * Node 12 has.
 *
 * One deliberate difference: `~` and `%d` are the home directory Node
 * reports (`os.homedir()`: `$HOME`, else the passwd entry), everywhere.
 * OpenSSH takes the passwd entry for most of them and `$HOME` only in
 * Include globs; the two agree unless `$HOME` was changed.
 *
 * One module per part, each importing only those after it in this list:
 * resolve.ts (resolveHost, resolveChain and their types), reader.ts (files
 * and lines), match.ts (Match lines), settings.ts (what the lines set),
 * proxy-jump.ts, expand.ts (`%`, `${VAR}`, `~`), glob.ts (Include
 * patterns), patterns.ts (Host and Match patterns), words.ts (splitting
 * lines, ports, times).
 */

export { formatJumpHost, type JumpHost, parseProxyJump } from './proxy-jump.js';
export { defaultConfigFile, SYSTEM_CONFIG_FILE } from './reader.js';
export {
  MAX_JUMP_HOPS,
  type ResolvedHop,
  type ResolvedHost,
  resolveChain,
  resolveHost,
  type SshConfigOptions,
} from './resolve.js';
export type { StrictHostKeyChecking } from './settings.js';
