import { hasParentAuthority } from '../policy.js';
import { type ReadyInfo, readyInfo } from './boot.js';
import { record, string, strings } from './check.js';
import { CONNECT } from './handles.js';
import type { HandleSpec } from './spec.js';

/** A CONNECT request: start a child from the receiving context (the `via` option). */
export interface ConnectRequest {
  /** Connection method name, e.g. `'local'`. */
  method: string;
  /** Method options, without `via`. */
  options: Record<string, unknown>;
  /** Names of contexts elsewhere in the tree that the method's default name could clash with. */
  taken?: string[];
  /**
   * The new context starts no contexts of its own (an isolated call's
   * interpreter): it is given no block of IDs, and the master gives it
   * none either.
   */
  leaf?: boolean;
  /**
   * For a method that is not one of tendril's own: the module (a path on
   * the master) that exports it. The receiving context imports it through
   * module forwarding and uses its export named `method`.
   */
  module?: string;
}

/**
 * CONNECT: start a child from the receiving context with one of tendril's
 * connection methods, or one a module of the master exports; replies with
 * its ready info. Parent authority only.
 * The requester also checks the new context's ID lies in the via
 * context's subtree.
 */
export const CONNECT_SPEC: HandleSpec<ConnectRequest, ReadyInfo> = {
  handle: CONNECT,
  name: 'CONNECT',
  policy: hasParentAuthority,
  request(value) {
    const request = record(value, 'request');
    const out: ConnectRequest = {
      method: string(request.method, 'method'),
      options: record(request.options, 'options'),
    };
    if (request.taken !== undefined) out.taken = strings(request.taken, 'taken', 100_000);
    if (request.module !== undefined) out.module = string(request.module, 'module');
    if (request.leaf === true) out.leaf = true;
    return out;
  },
  reply: readyInfo,
};
