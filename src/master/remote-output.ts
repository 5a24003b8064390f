import { Console } from 'node:console';
import { escapeTerminalText } from '../core/terminal-text.js';

/**
 * Printing what remote code writes on the master's terminal. The text comes
 * from contexts the master does not trust (any program a context ran), so
 * it is shown, never obeyed: a line that could move the cursor, set the
 * window title, answer a terminal query or forge another context's line
 * must reach the screen as inert text.
 */

/**
 * `text` on one line with every character that could drive a terminal or
 * disguise text written as an escape (`\x1b`, `\r`, `\n`, `\u202e`):
 * `escapeTerminalText`, the one escaping of remote text for logs and errors alike.
 */
export function neutralise(text: string): string {
  return escapeTerminalText(text);
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
