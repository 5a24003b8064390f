import { hasParentAuthority } from '../policy.js';
import { integer, record } from './check.js';
import { MODULE_STATS } from './handles.js';
import type { HandleSpec } from './spec.js';

/** Counters of one context's module forwarding, from `context.moduleStats()`. */
export interface ImporterStats {
  /** GET_MODULE requests this context sent to its parent (round trips). */
  requestsSent: number;
  /** Of those, requests made synchronously (a `require()` outside the static closure). */
  syncRequests: number;
  /** Files received from the parent. */
  filesReceived: number;
  /** Bytes of source received from the parent, as they travelled (compressed files count compressed). */
  bytesReceived: number;
  /** GET_MODULE requests from children answered. */
  requestsServed: number;
  /** Of those, requests answered entirely from this context's cache. */
  servedFromCache: number;
  /** Files sent to children. */
  filesSent: number;
  /** Bytes of source sent to children, as they travelled (compressed files count compressed). */
  bytesSent: number;
  /** Modules evaluated in this context. */
  modulesLoaded: number;
}

const COUNTERS = [
  'requestsSent',
  'syncRequests',
  'filesReceived',
  'bytesReceived',
  'requestsServed',
  'servedFromCache',
  'filesSent',
  'bytesSent',
  'modulesLoaded',
] as const;

/** MODULE_STATS: report the receiving context's module forwarding counters. Parent authority only. */
export const MODULE_STATS_SPEC: HandleSpec<null, ImporterStats> = {
  handle: MODULE_STATS,
  name: 'MODULE_STATS',
  policy: hasParentAuthority,
  timeout: 30_000,
  request: () => null,
  reply(value) {
    const stats = record(value, 'stats');
    const out = {} as ImporterStats;
    for (const key of COUNTERS) out[key] = integer(stats[key], key, 0, Number.MAX_SAFE_INTEGER);
    return out;
  },
};
