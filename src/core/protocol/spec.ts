import type { MessageSwitch, Policy } from '../switch.js';

/**
 * Everything there is to know about one standard handle: its number and
 * name, who may send to it, the shape of its request and of its reply, and
 * how long a requester waits. Each standard handle has one of these, in
 * this folder; `serve` and `ask` are the only ways to use them.
 */
export interface HandleSpec<Request, Reply> {
  /** The handle number (see handles.ts). */
  readonly handle: number;
  /** Its name in logs and errors, e.g. `'ALLOCATE_ID'`. */
  readonly name: string;
  /** Who may send requests, given the serving context's router. */
  readonly policy: (router: MessageSwitch) => Policy;
  /**
   * Checks a decoded request and returns it typed.
   * @throws Violation naming what is wrong.
   */
  readonly request: (value: unknown) => Request;
  /**
   * Checks a decoded success reply and returns it typed (undefined for
   * handles that never reply).
   * @throws Violation naming what is wrong.
   */
  readonly reply?: (value: unknown) => Reply;
  /** How long a requester waits for the reply by default, in ms; undefined: no limit. */
  readonly timeout?: number;
  /** True when requests and replies may carry Senders (decoded bound to the router). */
  readonly senders?: boolean;
  /** How a reply value is named in an `UnsupportedValueError`. Default `'reply'`. */
  readonly replyName?: string;
}

/** The request type of a handle spec. */
export type RequestOf<S> = S extends HandleSpec<infer R, unknown> ? R : never;
/** The reply type of a handle spec. */
export type ReplyOf<S> = S extends HandleSpec<unknown, infer R> ? R : never;
