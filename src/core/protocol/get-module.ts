import { type ModuleReply, type ModuleRequest, parseModuleRequest } from '../module-protocol.js';
import { fromChildStream } from '../policy.js';
import { record, Violation } from './check.js';
import { GET_MODULE } from './handles.js';
import type { HandleSpec } from './spec.js';

/**
 * GET_MODULE: resolve specifiers as written in a file and send the files
 * of their static closures the requester lacks (see module-protocol.ts and
 * docs/module-forwarding.md). From a child stream only: modules flow down
 * the tree. A reply may be partial; the requester then asks again.
 */
export const GET_MODULE_SPEC: HandleSpec<ModuleRequest, ModuleReply> = {
  handle: GET_MODULE,
  name: 'GET_MODULE',
  policy: fromChildStream,
  request(value) {
    const request = parseModuleRequest(value);
    if (typeof request === 'string') throw new Violation(request);
    return request;
  },
  reply(value) {
    const reply = record(value, 'reply');
    record(reply.resolved, 'reply.resolved');
    if (!Array.isArray(reply.files)) throw new Violation('reply.files: expected a list of files');
    if (reply.partial !== undefined && typeof reply.partial !== 'boolean') {
      throw new Violation('reply.partial: expected a boolean');
    }
    return reply as unknown as ModuleReply;
  },
};
