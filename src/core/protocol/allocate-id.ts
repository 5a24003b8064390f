import { fromChildStream } from '../policy.js';
import { contextId, integer, tuple, Violation } from './check.js';
import { ALLOCATE_ID } from './handles.js';
import type { HandleSpec } from './spec.js';

/** A half-open range of context IDs, `[start, end)`. */
export type IdBlock = [start: number, end: number];

/** Most IDs one ALLOCATE_ID request may ask for. */
export const MAX_ID_REQUEST = 1000;

/**
 * ALLOCATE_ID (master only): a block of context IDs for the requester to
 * number its children from. Any descendant may ask, within its subtree's
 * quota; replies `[start, end)`.
 */
export const ALLOCATE_ID_SPEC: HandleSpec<number, IdBlock> = {
  handle: ALLOCATE_ID,
  name: 'ALLOCATE_ID',
  policy: fromChildStream,
  timeout: 30_000,
  request: (value) => integer(value, 'count', 1, MAX_ID_REQUEST),
  reply(value) {
    const [start, end] = tuple(value, 'block', 2);
    const block: IdBlock = [contextId(start, 'start'), contextId(end, 'end')];
    if (block[1] <= block[0]) throw new Violation('block: end must be greater than start');
    return block;
  },
};
