/**
 * The connection layer: everything a context needs to start children.
 * Loaded in the master directly, and shipped to a child (as the
 * `tendril:connection` bundle) the first time it is asked to start one.
 * The SSH methods are not part of it: see ssh-methods.ts.
 */
export * from './bootstrap.js';
export * from './command.js';
export * from './connect.js';
export * from './doas.js';
// The SSH and container layers take the error classes from here (one instance of each class per context).
export * from './errors.js';
export * from './first-stage.js';
export * from './local.js';
export * from './method.js';
export * from './method-options.js';
export * from './naming.js';
export * from './packages.js';
export * from './process.js';
export * from './prompts.js';
export * from './shell.js';
export * from './su.js';
export * from './sudo.js';
export * from './tool-method.js';
