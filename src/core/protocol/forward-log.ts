import { fromChildStream } from '../policy.js';
import { contextId, MAX_TEXT_LENGTH, string, tuple } from './check.js';
import { FORWARD_LOG } from './handles.js';
import type { HandleSpec } from './spec.js';

/**
 * Request of FORWARD_LOG: a line written by a context in the sender's
 * subtree. The name is the sender's view; the master names the line by
 * the ID it knows, never by this.
 */
export type ForwardLog = [contextId: number, contextName: string, text: string];

/**
 * FORWARD_LOG (master only): output lines of the contexts below a child.
 * From a child stream only; no reply.
 */
export const FORWARD_LOG_SPEC: HandleSpec<ForwardLog, never> = {
  handle: FORWARD_LOG,
  name: 'FORWARD_LOG',
  policy: fromChildStream,
  request(value) {
    const [id, name, text] = tuple(value, 'request', 3);
    return [contextId(id, 'contextId'), string(name, 'contextName'), string(text, 'text', 2 * MAX_TEXT_LENGTH)];
  },
};
