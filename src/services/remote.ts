/**
 * The remote half of tendril's services: the module children load as
 * `tendril:services` on their first command or file transfer. Each export
 * is called by its master-side half through `Context[CALL_SERVICE]`.
 */
export * from './commands/remote.js';
export * from './files/remote.js';
