import { DecodeError } from '../errors.js';
import { BIGINT_EXTENSION, ERROR_EXTENSION, MAP_EXTENSION, SENDER_EXTENSION } from './extension-types.js';
import { MAX_BIGINT_BYTES, MAX_DEPTH, MAX_OBJECTS } from './limits.js';

/** Extension types the decoder accepts; anything else is refused before decoding. */
const ALLOWED_EXTENSIONS = new Set([
  0x00, // undefined
  BIGINT_EXTENSION,
  ERROR_EXTENSION,
  0x73, // Set
  0x74, // typed array, ArrayBuffer, DataView
  0x78, // RegExp
  0xff, // timestamp (Date)
  MAP_EXTENSION,
  SENDER_EXTENSION,
]);
/**
 * Extensions that are tags: a fixext 1 whose one data byte is filler,
 * followed by the array they wrap as a regular token.
 */
const TAG_EXTENSIONS = new Set([ERROR_EXTENSION, 0x73, 0x78, MAP_EXTENSION, SENDER_EXTENSION]);

/** The state of one `checkPayload` walk. A class, not closures: the walk runs for every message. */
class PayloadCheck {
  private readonly view: DataView;
  private readonly end: number;
  private pos = 0;
  /** Offset of the token being read, for errors. */
  private at = 0;
  // Open levels, innermost at `top`: values still to read in each, and
  // whether it is a map (whose keys come when an even number remain).
  // Level 0 holds the payload's one value.
  private readonly remaining: number[] = [1];
  private readonly isMap: boolean[] = [false];
  private top = 0;
  /** The token being read is the array a tag wraps. */
  private tagged = false;
  /** Values read that become heap objects (see `MAX_OBJECTS`). */
  private objects = 0;

  constructor(private readonly bytes: Uint8Array) {
    this.view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
    this.end = bytes.length;
  }

  private fail(why: string): never {
    throw new DecodeError(`malformed payload at byte ${this.at}: ${why}`);
  }

  private need(n: number): void {
    if (this.pos + n > this.end) this.fail('truncated');
  }

  private skip(n: number): void {
    this.need(n);
    this.pos += n;
  }

  private open(count: number, map: boolean, wrapped: boolean): void {
    if (count > this.end - this.pos)
      this.fail(`container of ${count} elements in ${this.end - this.pos} remaining bytes`);
    // The array a tag wraps takes over the tag's level, which has nothing left to read.
    if (!wrapped && ++this.top > MAX_DEPTH) this.fail(`value nested deeper than ${MAX_DEPTH} levels`);
    this.remaining[this.top] = count;
    this.isMap[this.top] = map;
  }

  private extension(length: number, fixext1: boolean): void {
    this.need(1);
    const type = this.bytes[this.pos] as number;
    if (!ALLOWED_EXTENSIONS.has(type)) this.fail(`extension type ${type} is not accepted`);
    this.pos += 1;
    if (TAG_EXTENSIONS.has(type)) {
      if (!fixext1) this.fail(`tag extension ${type} must be a fixext 1`);
      this.skip(1);
      this.open(1, false, false);
      this.tagged = true;
      return;
    }
    if (type === BIGINT_EXTENSION && (length === 0 || length > MAX_BIGINT_BYTES)) {
      this.fail(`bigint of ${length} bytes: the limit is ${MAX_BIGINT_BYTES}`);
    }
    this.skip(length);
  }

  run(): void {
    while (this.top >= 0) {
      const left = this.remaining[this.top] as number;
      if (left === 0) {
        this.top--;
        continue;
      }
      this.remaining[this.top] = left - 1;
      const isKey = this.isMap[this.top] === true && left % 2 === 0;
      const wrapped = this.tagged;
      this.tagged = false;
      this.at = this.pos;
      this.need(1);
      const token = this.bytes[this.pos++] as number;
      if (isKey && !(token >= 0xa0 && token <= 0xbf) && token !== 0xd9 && token !== 0xda && token !== 0xdb) {
        this.fail(`map key of type 0x${token.toString(16)}: only strings are accepted`);
      }
      if (wrapped && !(token >= 0x90 && token <= 0x9f) && token !== 0xdc && token !== 0xdd) {
        this.fail(`a tag extension must wrap an array, not a value of type 0x${token.toString(16)}`);
      }
      if (token <= 0x7f || token >= 0xe0) continue; // fixint
      // nil, booleans, floats and ints are held inline; everything else is an object.
      const inline = (token >= 0xc0 && token <= 0xc3) || (token >= 0xca && token <= 0xd3);
      if (!inline && ++this.objects > MAX_OBJECTS) {
        this.fail(
          `more than ${MAX_OBJECTS} arrays, maps, strings and binaries in one payload; send large collections as Buffers or in parts`,
        );
      }
      if (token <= 0x8f) this.open((token & 0x0f) * 2, true, wrapped);
      else if (token <= 0x9f) this.open(token & 0x0f, false, wrapped);
      else if (token <= 0xbf) this.skip(token & 0x1f);
      else
        switch (token) {
          case 0xc0:
          case 0xc2:
          case 0xc3:
            break;
          case 0xc4:
          case 0xd9:
            this.need(1);
            this.skip(this.bytes[this.pos++] as number);
            break;
          case 0xc5:
          case 0xda:
            this.need(2);
            this.pos += 2;
            this.skip(this.view.getUint16(this.pos - 2));
            break;
          case 0xc6:
          case 0xdb:
            this.need(4);
            this.pos += 4;
            this.skip(this.view.getUint32(this.pos - 4));
            break;
          case 0xc7:
            this.need(1);
            this.pos += 1;
            this.extension(this.bytes[this.pos - 1] as number, false);
            break;
          case 0xc8:
            this.need(2);
            this.pos += 2;
            this.extension(this.view.getUint16(this.pos - 2), false);
            break;
          case 0xc9:
            this.need(4);
            this.pos += 4;
            this.extension(this.view.getUint32(this.pos - 4), false);
            break;
          case 0xca:
            this.skip(4);
            break;
          case 0xcb:
            this.skip(8);
            break;
          case 0xcc:
          case 0xd0:
            this.skip(1);
            break;
          case 0xcd:
          case 0xd1:
            this.skip(2);
            break;
          case 0xce:
          case 0xd2:
            this.skip(4);
            break;
          case 0xcf:
          case 0xd3:
            this.skip(8);
            break;
          case 0xd4:
            this.extension(1, true);
            break;
          case 0xd5:
            this.extension(2, false);
            break;
          case 0xd6:
            this.extension(4, false);
            break;
          case 0xd7:
            this.extension(8, false);
            break;
          case 0xd8:
            this.extension(16, false);
            break;
          case 0xdc:
            this.need(2);
            this.pos += 2;
            this.open(this.view.getUint16(this.pos - 2), false, wrapped);
            break;
          case 0xdd:
            this.need(4);
            this.pos += 4;
            this.open(this.view.getUint32(this.pos - 4), false, wrapped);
            break;
          case 0xde:
            this.need(2);
            this.pos += 2;
            this.open(this.view.getUint16(this.pos - 2) * 2, true, wrapped);
            break;
          case 0xdf:
            this.need(4);
            this.pos += 4;
            this.open(this.view.getUint32(this.pos - 4) * 2, true, wrapped);
            break;
          default:
            this.fail(`invalid token 0x${token.toString(16)}`);
        }
    }
    if (this.pos !== this.end) {
      this.at = this.pos;
      this.fail(`${this.end - this.pos} trailing bytes after the value`);
    }
  }
}

/**
 * Walks the msgpack token structure without building values, and refuses
 * (with `DecodeError`, naming the byte) anything the decoder should not be
 * given: a container announcing more elements than bytes remain (each
 * element takes at least one byte), a length past the end, nesting deeper
 * than `MAX_DEPTH` (a tag and the array it wraps count as one level, as
 * when encoding), a map key that is not a string (msgpackr would convert
 * it, at a cost), an extension not in `ALLOWED_EXTENSIONS`, a tag not
 * written as a fixext 1 or wrapping anything but an array, a bigint over
 * `MAX_BIGINT_BYTES`, or anything but exactly one value filling the bytes.
 * Iterative, so hostile nesting cannot overflow the stack here.
 */
export function checkPayload(bytes: Uint8Array): void {
  new PayloadCheck(bytes).run();
}
