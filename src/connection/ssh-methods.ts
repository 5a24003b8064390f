/**
 * The SSH connection methods, `ssh` (ssh2, with its own config and
 * known_hosts handling) and `openssh` (the system client). They are most
 * of the connection layer's code, so they load on first use: in the master
 * as a chunk of its bundle, in a child as the `tendril:ssh` layer, which
 * the master ships only to a context that itself connects over SSH.
 */
export { openssh } from './openssh.js';
export { ssh } from './ssh.js';
