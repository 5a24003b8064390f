import { Console } from 'node:console';

/**
 * Printing what remote code writes on the master's terminal. The text comes
 * from contexts the master does not trust (any program a context ran), so
 * it is shown, never obeyed: a line that could move the cursor, set the
 * window title, answer a terminal query or forge another context's line
 * must reach the screen as inert text.
 */

/**
 * C0 controls but tab, DEL and the C1 controls (U+0080 to U+009F: some
 * terminals read U+009B as CSI). Written as escapes, not as themselves.
 */
// biome-ignore lint/suspicious/noControlCharactersInRegex: these are the characters it neutralises.
const CONTROL = /[\u0000-\u0008\u000a-\u001f\u007f-\u009f]/g;

/** `text` with every control character but tab written as an escape: `\r`, `\n`, else `\xHH` (ESC is `\x1b`). */
export function neutralise(text: string): string {
  return text.replace(CONTROL, escaped);
}

function escaped(char: string): string {
  if (char === '\r') return '\\r';
  if (char === '\n') return '\\n';
  return `\\x${char.charCodeAt(0).toString(16).padStart(2, '0')}`;
}

/**
 * Made on the first line printed: a console of its own, so a program that
 * replaced `console.error` does not get remote lines through it, and one
 * that ignores errors of the stream as `console` does (a closed stderr, EPIPE,
 * must not kill the master over a remote line).
 */
let printer: Console | undefined;

/**
 * Prints a line a context wrote on the master's stderr as `[name] text`,
 * both neutralised (the name may come from a context too: `via` names what
 * it starts). One write per line, so lines of several contexts never mix
 * mid-line.
 */
export function printRemoteLine(contextName: string, text: string): void {
  printer ??= new Console({ stdout: process.stderr, stderr: process.stderr, colorMode: false });
  printer.log(`[${neutralise(contextName)}] ${neutralise(text)}`);
}
