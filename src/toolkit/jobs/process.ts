import type { JobProcess } from '../../core/job-process.js';
import type { JobRequest } from './request.js';
import { supervise } from './supervisor.js';
import { work } from './worker.js';

/**
 * Entry of a job's processes in the toolkit, called by the core's
 * `bootJob` once the job's modules are loaded: `role` is `supervisor` or
 * `worker` (see supervisor.ts, worker.ts).
 */
export function runJobProcess(role: string, directory: string, job: JobProcess): void {
  const request = job.request as JobRequest;
  if (role === 'supervisor') supervise(directory, request, job.coreSource);
  else if (role === 'worker') work(directory, request, job.importer);
  else throw new Error(`unknown job process role '${role}'`);
}
