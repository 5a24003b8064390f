import { hasParentAuthority } from '../policy.js';
import { Violation } from './check.js';
import { PING } from './handles.js';
import type { HandleSpec } from './spec.js';

/**
 * PING: answered at once with null, by every context, whatever its calls
 * are doing as far as its routing can: `context.ping()` times the round
 * trip through every hop on the way. Parent authority only.
 */
export const PING_SPEC: HandleSpec<null, null> = {
  handle: PING,
  name: 'PING',
  policy: hasParentAuthority,
  request: () => null,
  reply(value) {
    if (value !== null) throw new Violation('reply: expected null');
    return null;
  },
};
