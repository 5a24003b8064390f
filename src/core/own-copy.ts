/**
 * Bounds that keep only what they keep. V8 makes a slice of a long string
 * (`slice`, `substring`, a regular expression's match) a view of the
 * original, and `subarray` of a Buffer shares its memory: 64 KiB cut from
 * a 32 MiB name a context sent keeps the 32 MiB alive as long as the cut
 * is kept. What is cut from untrusted input and kept (in a status, an
 * error, a record, a tail) is copied with these, so that what a peer can
 * make this context hold is what the bound says.
 *
 * Runs in every context (the core ships it): only what Node 12 has.
 */

/**
 * A copy of `text` that refers to no other string: the same characters
 * (lone surrogates included), in memory of its own.
 */
export function ownString(text: string): string {
  // A round trip through bytes makes a new string; UTF-16LE keeps every code unit as it was.
  return Buffer.from(text, 'utf16le').toString('utf16le');
}

/**
 * The first `max` characters of `text`, as a string of its own when cut
 * (`text` itself when it is no longer).
 */
export function ownHead(text: string, max: number): string {
  return text.length <= max ? text : ownString(text.slice(0, max));
}

/**
 * The last `max` characters of `text`, as a string of its own when cut
 * (`text` itself when it is no longer).
 */
export function ownTail(text: string, max: number): string {
  return text.length <= max ? text : ownString(text.slice(text.length - max));
}

/**
 * A copy of `bytes` in memory of its own (a Buffer), for bytes cut from a
 * larger read that are kept: a `subarray` would keep all of it.
 */
export function ownBytes(bytes: Uint8Array): Buffer {
  return Buffer.from(bytes);
}
