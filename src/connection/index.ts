/**
 * The connection layer: everything a context needs to start children.
 * Loaded in the master directly, and shipped to a child (as the
 * `tendril:connection` bundle) the first time it is asked to start one.
 */
export * from './bootstrap.js';
export * from './connect.js';
export * from './first-stage.js';
export * from './local.js';
export * from './method.js';
export * from './process.js';
