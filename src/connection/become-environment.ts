/**
 * The environment a context gives the command that starts a child as
 * another account (sudo, su, doas). `su` without `-l` passes all of it on
 * to the target account's shell and to Node (glibc drops only a few
 * variables, TMPDIR and LD_* among them, for set-user-ID programs), so
 * whoever can set this context's environment (its account's login
 * profile) could otherwise make the new account run code before
 * tendril's: bash sources `$BASH_ENV` and runs `$PS4` under
 * `SHELLOPTS=xtrace`, exported functions stand in for commands, and
 * Node loads what `NODE_OPTIONS` (`--require`) and `NODE_PATH` name.
 *
 * Those variables are left out: the ones sudo's `env_delete` removes by
 * default (bash, zsh, Perl, Python, Ruby, Java, the dynamic loader,
 * terminfo and the resolver), exported shell functions (any value
 * starting `()`), and Node's own (`NODE_*` but `NODE_ENV`). What names a
 * place (PATH, TMP, XDG_*, the working directory) stays: the new context
 * judges those itself, for its own account (see core/inherited-environment.ts
 * and the shell's checks in shell.ts).
 */

/** Variables left out by name. */
const LEFT_OUT = new Set([
  // Shells: code or files read before any command runs, and how words are split.
  'BASH_ENV',
  'ENV',
  'SHELLOPTS',
  'BASHOPTS',
  'PS4',
  'GLOBIGNORE',
  'CDPATH',
  'IFS',
  'ZDOTDIR',
  'FPATH',
  'TMPPREFIX',
  'READNULLCMD',
  'NULLCMD',
  // Other interpreters a context's commands may run.
  'PERL5DB',
  'PERL5OPT',
  'PERL5LIB',
  'PERLLIB',
  'PERLIO_DEBUG',
  'PYTHONPATH',
  'PYTHONHOME',
  'PYTHONSTARTUP',
  'PYTHONINSPECT',
  'PYTHONUSERBASE',
  'RUBYOPT',
  'RUBYLIB',
  'JAVA_TOOL_OPTIONS',
  // Terminal descriptions, locale and resolver files.
  'TERMCAP',
  'TERMPATH',
  'TERMINFO',
  'TERMINFO_DIRS',
  'PATH_LOCALE',
  'NLSPATH',
  'HOSTALIASES',
  'RES_OPTIONS',
  'LOCALDOMAIN',
]);

/** Prefixes of variables left out: the dynamic loader's, bash's exported functions, Node's. */
const LEFT_OUT_PREFIXES = ['LD_', '_RLD', 'DYLD_', 'BASH_FUNC_', 'NODE_'];

/** Variables kept despite a prefix above. */
const KEPT = new Set(['NODE_ENV']);

/**
 * `env` without the variables that would make another account's shell or
 * Node run code of this context's environment's choosing (see the
 * module's comment).
 * @param env the environment to start from. Default `process.env`.
 * @returns a new object; `env` is not changed.
 */
export function becomeEnvironment(env: NodeJS.ProcessEnv = process.env): NodeJS.ProcessEnv {
  const result: NodeJS.ProcessEnv = {};
  for (const name of Object.keys(env)) {
    const value = env[name];
    if (value === undefined || LEFT_OUT.has(name) || value.startsWith('()')) continue;
    if (!KEPT.has(name) && LEFT_OUT_PREFIXES.some((prefix) => name.startsWith(prefix))) continue;
    result[name] = value;
  }
  return result;
}
