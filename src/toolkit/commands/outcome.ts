/**
 * What a context sends back for a command, checked before the master
 * believes it: output chunks, the outcome, and the channel's normal end.
 */
import { ChannelError } from '../../core/errors.js';
import { SENDER_CLOSED } from '../../core/send-window.js';
import { type OutputChunk, type RemoteOutcome, STDERR, STDOUT } from './protocol.js';

/** Most chunks an outcome may carry. */
const MAX_TAIL = 1024;
/** Most bytes an outcome's tail may carry (the remote half holds at most about 128 KiB). */
const MAX_TAIL_BYTES = 1024 * 1024;
/** Longest spawn error message or code taken from a context. */
const MAX_ERROR_TEXT = 4096;

/** The error a channel's reads end with when the other end closed it: the normal end. */
export function isClosed(error: unknown): boolean {
  return error instanceof ChannelError && error.reason === SENDER_CLOSED;
}

/** A value sent back as output: `[STDOUT | STDERR, bytes]` of at most a pipe's chunk. */
export function isOutputChunk(value: unknown): value is OutputChunk {
  return (
    Array.isArray(value) &&
    value.length === 2 &&
    (value[0] === STDOUT || value[0] === STDERR) &&
    value[1] instanceof Uint8Array
  );
}

/** A remote outcome of the shape the remote half sends. */
export function isOutcome(value: unknown): value is RemoteOutcome {
  if (typeof value !== 'object' || value === null) return false;
  const o = value as Record<string, unknown>;
  const spawnError = o.spawnError as { code?: unknown; message?: unknown } | undefined;
  return (
    (o.pid === undefined || (Number.isSafeInteger(o.pid) && (o.pid as number) > 0)) &&
    (o.exitCode === null ||
      (Number.isInteger(o.exitCode) && (o.exitCode as number) >= 0 && (o.exitCode as number) <= 255)) &&
    (o.signal === null || (typeof o.signal === 'string' && /^SIG[A-Z0-9+-]{1,16}$/.test(o.signal))) &&
    typeof o.durationMs === 'number' &&
    Number.isFinite(o.durationMs) &&
    o.durationMs >= 0 &&
    typeof o.timedOut === 'boolean' &&
    Number.isSafeInteger(o.chunks) &&
    (o.chunks as number) >= 0 &&
    Array.isArray(o.tail) &&
    o.tail.length <= MAX_TAIL &&
    o.tail.every(isOutputChunk) &&
    o.tail.reduce((bytes: number, chunk: OutputChunk) => bytes + chunk[1].byteLength, 0) <= MAX_TAIL_BYTES &&
    (spawnError === undefined ||
      (typeof spawnError === 'object' &&
        spawnError !== null &&
        typeof spawnError.message === 'string' &&
        spawnError.message.length <= MAX_ERROR_TEXT &&
        (spawnError.code === undefined ||
          (typeof spawnError.code === 'string' && spawnError.code.length <= MAX_ERROR_TEXT))))
  );
}
