import { integer, optionsObject } from './options.js';

/** The fields of a `highWaterMark` option. */
const HIGH_WATER_MARK_FIELDS = new Set(['messages', 'bytes']);

/**
 * How much a Receiver queues from each sending context, and so how far
 * ahead of it the Senders of one context may run, all together: they wait
 * once they have this much in flight (sent, and not yet read by the
 * receiver's owner). With nothing in flight, one message may always be
 * sent, however large.
 */
export interface HighWaterMark {
  /** Messages. Default 1024. */
  messages: number;
  /** Bytes of payload. Default 8 MiB. */
  bytes: number;
}

/** The window a Receiver grants when its options name none: 1024 messages, 8 MiB. */
export const DEFAULT_HIGH_WATER_MARK: Readonly<HighWaterMark> = Object.freeze({
  messages: 1024,
  bytes: 8 * 1024 * 1024,
});

/** Largest window either way: the wire carries 32-bit fields. */
const MAX_WINDOW = 0xffffffff;

/**
 * Checks a `highWaterMark` option and fills in defaults.
 * @throws InvalidOptionError naming the field and where it was passed.
 */
export function highWaterMark(value: Partial<HighWaterMark> | undefined, where: string): HighWaterMark {
  const options = optionsObject(value, where, HIGH_WATER_MARK_FIELDS);
  return {
    messages: integer(
      options.messages,
      'highWaterMark.messages',
      where,
      DEFAULT_HIGH_WATER_MARK.messages,
      1,
      MAX_WINDOW,
    ),
    bytes: integer(options.bytes, 'highWaterMark.bytes', where, DEFAULT_HIGH_WATER_MARK.bytes, 1, MAX_WINDOW),
  };
}

/**
 * Whether one more message of `size` bytes fits a window that has
 * `messages` and `bytes` in flight. The Senders of one context (together)
 * and the receiver (for that context) apply the same rule to the same
 * count: the receiver's never exceeds the senders' (a message is counted
 * before it leaves, credit before it is sent, a Sender's close or refusal
 * leaves both counts before the messages that follow it, and messages
 * from one context arrive in order), so a context that keeps to it is
 * never refused.
 */
export function fits(window: HighWaterMark, messages: number, bytes: number, size: number): boolean {
  return messages === 0 || (messages < window.messages && bytes + size <= window.bytes);
}
