/**
 * NODE_RUNTIME: how an intermediate gets the runtime it ships to a target
 * without Node from its own parent, so that each hop carries it at most
 * once. The requester names the architecture; the parent answers with
 * the runtime the program chose, and sends its bytes
 * through the request's Sender when the request carries one. A request is
 * untrusted: its shape is checked here, and the parent sends one runtime
 * at a time to each requester.
 */
import { fromChildStream } from '../core/policy.js';
import { record, Violation } from '../core/protocol/check.js';
import { NODE_RUNTIME } from '../core/protocol/handles.js';
import type { HandleSpec } from '../core/protocol/spec.js';
import { Sender } from '../core/sender.js';
import { ENTRY, RUNTIME_ARCHES, type RuntimeArch } from './runtime-types.js';

/** A request for a runtime. */
export interface RuntimeRequest {
  /** The architecture. */
  readonly arch: RuntimeArch;
  /** Where to send the package's bytes (chunks of at most `RUNTIME_CHUNK` bytes); absent: describe it only. */
  readonly chunks?: Sender<Uint8Array>;
}

/** The runtime chosen, as the reply describes it. */
export interface RuntimeReply {
  /** Its directory's name in a runtime cache (see `ShippableRuntime.entry`). */
  readonly entry: string;
  /** The Node release. */
  readonly version: string;
  /** Its architecture. */
  readonly arch: RuntimeArch;
  /** The package's size, in bytes. */
  readonly bytes: number;
  /** The package's SHA-512, in hex. */
  readonly sha512: string;
}

/** Size of the chunks a runtime travels in, in bytes. */
export const RUNTIME_CHUNK = 256 * 1024;
/** Largest runtime package taken, in bytes (Node 26's is about 55 MB). */
export const MAX_RUNTIME_BYTES = 512 * 1024 * 1024;

/** NODE_RUNTIME's policy (from a child stream) and shapes. */
export const NODE_RUNTIME_SPEC: HandleSpec<RuntimeRequest, RuntimeReply> = {
  handle: NODE_RUNTIME,
  name: 'NODE_RUNTIME',
  policy: fromChildStream,
  senders: true,
  request(value) {
    const request = record(value, 'request');
    if (!(RUNTIME_ARCHES as readonly unknown[]).includes(request.arch)) {
      throw new Violation(`arch: expected one of ${RUNTIME_ARCHES.join(', ')}`);
    }
    if (request.chunks !== undefined && !(request.chunks instanceof Sender)) {
      throw new Violation('chunks: expected a Sender');
    }
    return {
      arch: request.arch as RuntimeArch,
      ...(request.chunks !== undefined && { chunks: request.chunks as Sender<Uint8Array> }),
    };
  },
  reply(value) {
    const reply = record(value, 'reply');
    if (typeof reply.entry !== 'string' || !ENTRY.test(reply.entry))
      throw new Violation('reply.entry: expected an entry');
    if (typeof reply.version !== 'string' || !/^\d+\.\d+\.\d+$/.test(reply.version)) {
      throw new Violation('reply.version: expected a release');
    }
    if (!(RUNTIME_ARCHES as readonly unknown[]).includes(reply.arch))
      throw new Violation('reply.arch: expected an arch');
    if (
      !Number.isSafeInteger(reply.bytes) ||
      (reply.bytes as number) <= 0 ||
      (reply.bytes as number) > MAX_RUNTIME_BYTES
    ) {
      throw new Violation('reply.bytes: expected a size');
    }
    if (typeof reply.sha512 !== 'string' || !/^[0-9a-f]{128}$/.test(reply.sha512)) {
      throw new Violation('reply.sha512: expected a SHA-512 in hex');
    }
    return reply as unknown as RuntimeReply;
  },
};
