import type { ModuleSnapshot } from '../../core/importer.js';
import type { JobSpec } from './protocol.js';

/** A job's `request` file (msgpack): what its processes run, written once by the context that starts it. */
export interface JobRequest {
  /** Modules the job loads (the core reads these, and `toolkitFrom`; see src/core/job-process.ts). */
  modules: ModuleSnapshot;
  /** Where tendril's toolkit was resolved from in the context. */
  toolkitFrom: string;
  /** The job's ID. */
  id: string;
  /** What the master asked for. */
  spec: JobSpec;
  /** The directory calls resolve modules from by default in the context (its `moduleBase`). */
  moduleBase: string;
}

/** How the job stage reports on fd 4 that the job runs: the supervisor to the context, the worker to the supervisor. */
export const STARTED = 'started\n';
