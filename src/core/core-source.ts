import { deflateRawSync, inflateRawSync } from 'node:zlib';

/**
 * The core's source, in the two forms a parent sends it to a child in:
 * deflated (raw deflate, about 50 KB) where the stream may cross a network,
 * and as it is (about 145 KB) where it stays on one machine, so the child
 * neither loads zlib nor inflates (together about 3 ms of a child's start
 * on a Node without its startup snapshot). A context holds the form it was
 * started with and makes the other on first use.
 */
export class CoreSource {
  #deflated: Uint8Array | undefined;
  #source: Uint8Array | undefined;
  #text: string | undefined;

  private constructor(deflated: Uint8Array | undefined, text: string | undefined) {
    this.#deflated = deflated;
    this.#text = text;
  }

  /** The core from its deflated bytes. */
  static fromDeflated(bytes: Uint8Array): CoreSource {
    return new CoreSource(bytes, undefined);
  }

  /**
   * The core from its source text: in a child, the very string V8 compiled
   * the core from and keeps for compiling its functions lazily, so holding
   * it costs nothing, where its bytes would cost an idle child their size
   * (about 165 KB). They are made from it when this context first starts a
   * child of its own.
   */
  static fromText(text: string): CoreSource {
    return new CoreSource(undefined, text);
  }

  /** The core, deflated (raw deflate, level 9 where made here). */
  get deflated(): Uint8Array {
    this.#deflated ??= deflateRawSync(this.source, { level: 9 });
    return this.#deflated;
  }

  /** The core's source, UTF-8. */
  get source(): Uint8Array {
    this.#source ??= this.#text === undefined ? inflateRawSync(this.#deflated as Uint8Array) : Buffer.from(this.#text);
    return this.#source;
  }
}
