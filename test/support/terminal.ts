/**
 * What a hostile context writes to reach the operator's terminal, and the
 * check of what did reach it, for test/terminal-escapes.test.ts and its
 * fixture. The check is written apart from src/core/terminal-text.ts, so
 * it tests that function rather than repeating it.
 */

/**
 * Sets the window title (OSC ... BEL), clears the screen and homes the
 * cursor (CSI), a C1 CSI (U+009B), a carriage return that overwrites the
 * line, DEL, a bidi override and an isolate (Trojan Source), a zero-width
 * space, a lone surrogate and an invisible tag character.
 */
export const HOSTILE =
  'OSC \x1b]0;pwned\x07 CSI \x1b[2J\x1b[1;1H C1 \u009b31m red\rover DEL\x7f bidi \u202eevil\u202c iso\u2066x\u2069 zw\u200b lone \ud800 tag \u{e0041}';

/** How the title change reads once escaped: the proof that the text arrived, inert. */
export const ESCAPED_TITLE = '\\x1b]0;pwned\\x07';

/**
 * The characters of `text` that could drive a terminal or disguise text,
 * as `U+XXXX`: C0 controls but tab and newline, DEL, C1 controls, bidi
 * controls and marks, zero-width and invisible format characters, the
 * line and paragraph separators, tag characters, lone surrogates.
 */
export function unsafeCharacters(text: string): string[] {
  const found: string[] = [];
  for (let i = 0; i < text.length; i++) {
    const unit = text.charCodeAt(i);
    let code = unit;
    if (unit >= 0xd800 && unit <= 0xdbff) {
      const next = text.charCodeAt(i + 1);
      if (next >= 0xdc00 && next <= 0xdfff) {
        code = (unit - 0xd800) * 0x400 + (next - 0xdc00) + 0x10000;
        i++;
      }
    }
    const lone = code >= 0xd800 && code <= 0xdfff;
    if (
      (code < 0x20 && code !== 0x09 && code !== 0x0a) ||
      (code >= 0x7f && code <= 0x9f) ||
      code === 0x061c ||
      code === 0x00ad ||
      code === 0x200b ||
      code === 0x200e ||
      code === 0x200f ||
      (code >= 0x2028 && code <= 0x202e) ||
      (code >= 0x2060 && code <= 0x2069) ||
      code === 0xfeff ||
      (code >= 0xe0000 && code <= 0xe007f) ||
      lone
    ) {
      found.push(`U+${code.toString(16).toUpperCase().padStart(4, '0')}`);
    }
  }
  return found;
}
