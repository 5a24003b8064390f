/**
 * What a child needs of the service framework, loaded with the rest of
 * `tendril:toolkit` on its first `thisContext().registerService()`:
 * the same registry the master uses.
 */
export { serviceRegistry } from './registry.js';
