/**
 * How a command is shown in results and messages: quoted as a POSIX shell
 * would need it, so a reader can paste it (it is never run through one).
 */
/** `arg` as a POSIX shell would need it written. */
function quote(arg: string): string {
  return /^[\w@%+=:,./-]+$/.test(arg) ? arg : `'${arg.replace(/'/g, `'\\''`)}'`;
}

/** The command line, for results and messages. */
export function commandLine(file: string, args: readonly string[]): string {
  return [file, ...args].map(quote).join(' ');
}
