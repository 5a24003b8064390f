/**
 * Text from other contexts made inert for a terminal. Whatever a context,
 * an intermediate or a program on a target wrote (an error's message and
 * stack, a command's stderr quoted in its error, a login banner, a name it
 * chose, a line it printed) may be shown on the operator's terminal: it is
 * shown, never obeyed. One function does it for every printer (log lines,
 * errors, warnings, `debug` output, reports), so they all escape alike.
 *
 * Escaped, each as a visible escape sequence, in JavaScript's notation:
 * - C0 controls (ESC, BEL, `\r`, backspace, ...) and DEL: `\x1b`, `\x07`,
 *   `\r`; without ESC no escape sequence (OSC title, CSI cursor move, a
 *   query the terminal answers) can start;
 * - C1 controls U+0080 to U+009F: some terminals read U+009B as CSI and
 *   U+009D as OSC;
 * - the newline, unless kept: a line of text keeps to one line, so it
 *   cannot pass for a line of another context;
 * - Unicode format characters (general category Cf): the bidirectional
 *   embeddings, overrides and isolates (U+202A to U+202E, U+2066 to
 *   U+2069), the marks U+200E, U+200F and U+061C, zero-width and invisible
 *   characters (U+200B, U+2060 to U+2064, U+FEFF, U+00AD, the tags U+E0000
 *   to U+E007F...), which can make text read otherwise than it is (the
 *   "Trojan Source" attack); and the separators U+2028 and U+2029;
 * - lone surrogates (half of a UTF-16 pair), which a terminal cannot show.
 *
 * Kept: tab (it only moves to the next tab stop, rewriting nothing), and
 * the zero-width joiner and non-joiner (U+200D, U+200C), without which
 * emoji sequences and scripts such as Persian and Devanagari do not render;
 * they reorder nothing and hide no more than a look-alike letter does.
 * Backslashes are kept as they are: the escaping makes text inert, not
 * reversible (the raw text stays where a program can read it, see the
 * fields each error documents).
 */

import { ownString } from './own-copy.js';

/** Options of `escapeTerminalText`. */
export interface TerminalTextOptions {
  /**
   * Keep newlines (`\n`) as they are, for text of several lines: a
   * message, a stack trace, a command's quoted output. Default false: a
   * newline is written `\n`, so the text stays on one line.
   */
  keepNewlines?: boolean;
  /**
   * Escape every default-ignorable character too, the joiners and
   * variation selectors kept otherwise among them (`\u200d`, `\ufe00`):
   * for a name, which must not print like another with an invisible
   * character added. Default false. Implies one line.
   */
  name?: boolean;
}

// biome-ignore lint/suspicious/noControlCharactersInRegex: these are the characters it escapes.
const UNSAFE_LINE = /[\u0000-\u0008\u000a-\u001f\u007f-\u009f\u2028\u2029\ud800-\udfff]|(?![\u200c\u200d])\p{Cf}/gu;
// biome-ignore lint/suspicious/noControlCharactersInRegex: the same, without the newline.
const UNSAFE_TEXT = /[\u0000-\u0008\u000b-\u001f\u007f-\u009f\u2028\u2029\ud800-\udfff]|(?![\u200c\u200d])\p{Cf}/gu;
// biome-ignore lint/suspicious/noControlCharactersInRegex: those of a line, and every default-ignorable character.
const UNSAFE_NAME = /[\u0000-\u001f\u007f-\u009f\u2028\u2029\ud800-\udfff]|\p{Cf}|\p{Default_Ignorable_Code_Point}/gu;

/**
 * `text` with every character that could drive a terminal or disguise
 * text written as a visible escape (see this module's comment): `\r`,
 * `\n`, `\xHH` up to U+00FF (ESC is `\x1b`), else `\uHHHH` (`\u202e`), and
 * `\u{HHHHH}` past U+FFFF. Text without such characters is returned as it
 * is (no copy). Idempotent: escaped text has nothing left to escape. Linear
 * in the length of the text.
 * @param text the text, as another context sent it.
 * @param options `keepNewlines`: keep `\n` (default false).
 */
export function escapeTerminalText(text: string, options?: TerminalTextOptions): string {
  const unsafe = options?.name ? UNSAFE_NAME : options?.keepNewlines ? UNSAFE_TEXT : UNSAFE_LINE;
  // search() ignores and keeps lastIndex, so the shared global patterns carry no state.
  if (text.search(unsafe) === -1) return text;
  if (text.length <= ESCAPE_SLICE) return text.replace(unsafe, escaped);
  // V8 gathers every match of a replace() with a function before it calls it: past 2^27 of
  // them that is a fatal error, not an exception. So a long text is escaped a slice at a time.
  const parts: string[] = [];
  for (let start = 0; start < text.length; ) {
    let end = Math.min(text.length, start + ESCAPE_SLICE);
    // A surrogate pair stays whole: cut before a high surrogate that ends the slice.
    const last = text.charCodeAt(end - 1);
    if (end < text.length && last >= 0xd800 && last <= 0xdbff) end--;
    parts.push(text.slice(start, end).replace(unsafe, escaped));
    start = end;
  }
  return parts.join('');
}

/** Characters escaped by one replace(): its matches stay far below V8's limit on them. */
const ESCAPE_SLICE = 1 << 20;

/** Most characters of a remote message or stack kept (`shownRemoteText`): 64 Ki. */
export const MAX_REMOTE_TEXT = 64 * 1024;
/** Most characters of a remote name, code or short reason kept: 4 Ki. */
export const MAX_REMOTE_WORD = 4 * 1024;

/**
 * Text another context sent (an error's message or stack, why a message
 * could not be delivered), as this context keeps and shows it: at most
 * `max` characters of it, copied out of what it came in (so the rest is
 * not kept alive), with a note of how much was left out, then escaped
 * (`escapeTerminalText`). What a peer sends may be as long as a message
 * allows; what is kept and shown is not.
 * @param max most characters kept; default `MAX_REMOTE_TEXT`.
 */
export function shownRemoteText(text: string, max = MAX_REMOTE_TEXT, options?: TerminalTextOptions): string {
  if (text.length <= max) return escapeTerminalText(text, options);
  // A surrogate pair stays whole.
  const end = text.charCodeAt(max - 1) >= 0xd800 && text.charCodeAt(max - 1) <= 0xdbff ? max - 1 : max;
  const kept = ownString(text.slice(0, end));
  return `${escapeTerminalText(kept, options)}… (${text.length - end} more characters left out)`;
}

/** Options that keep newlines, for the many callers escaping text of several lines. */
export const KEEP_NEWLINES: Readonly<TerminalTextOptions> = Object.freeze({ keepNewlines: true });

/**
 * Escapes made so far, by character: a text of megabytes of one hostile
 * character costs a lookup per character, not a string built per
 * character (4 MiB of U+202E: 0.5 s instead of 1.6 s). Bounded: only
 * distinct characters are kept, at most `MAX_CACHED`.
 */
const cache = new Map<string, string>();
const MAX_CACHED = 512;

function escaped(char: string): string {
  const known = cache.get(char);
  if (known !== undefined) return known;
  const written = escapeOf(char);
  if (cache.size < MAX_CACHED) cache.set(char, written);
  return written;
}

function escapeOf(char: string): string {
  if (char === '\r') return '\\r';
  if (char === '\n') return '\\n';
  const code = char.codePointAt(0) as number;
  if (code <= 0xff) return `\\x${code.toString(16).padStart(2, '0')}`;
  if (code <= 0xffff) return `\\u${code.toString(16).padStart(4, '0')}`;
  return `\\u{${code.toString(16)}}`;
}
