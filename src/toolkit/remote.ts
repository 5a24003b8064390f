/**
 * The remote half of tendril's services: the module children load as
 * `tendril:toolkit` on their first command, file transfer or service
 * registration. Each export is called by its master-side half through
 * `Context[CALL_TOOLKIT]`, or by the core (`serviceRegistry`).
 */

export { contextTmpdir } from '../core/context-tmpdir.js';
export * from './commands/remote.js';
export * from './files/remote.js';
export * from './jobs/process.js';
export * from './jobs/remote.js';
export { killTree } from './process-groups.js';
export * from './services/remote.js';
