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

  private constructor(deflated: Uint8Array | undefined, source: Uint8Array | undefined) {
    this.#deflated = deflated;
    this.#source = source;
  }

  /** The core from its deflated bytes. */
  static fromDeflated(bytes: Uint8Array): CoreSource {
    return new CoreSource(bytes, undefined);
  }

  /** The core from its source's UTF-8 bytes. */
  static fromSource(bytes: Uint8Array): CoreSource {
    return new CoreSource(undefined, bytes);
  }

  /** The core, deflated (raw deflate, level 9 where made here). */
  get deflated(): Uint8Array {
    this.#deflated ??= deflateRawSync(this.source, { level: 9 });
    return this.#deflated;
  }

  /** The core's source, UTF-8. */
  get source(): Uint8Array {
    this.#source ??= inflateRawSync(this.#deflated as Uint8Array);
    return this.#source;
  }
}
