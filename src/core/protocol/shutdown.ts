import { hasParentAuthority } from '../policy.js';
import { SHUTDOWN } from './handles.js';
import type { HandleSpec } from './spec.js';

/** SHUTDOWN: stop this context's children, then exit. Parent authority only; no reply. */
export const SHUTDOWN_SPEC: HandleSpec<null, never> = {
  handle: SHUTDOWN,
  name: 'SHUTDOWN',
  policy: hasParentAuthority,
  request: () => null,
};
