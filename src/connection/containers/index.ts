/**
 * The container methods, loaded on first use (a program that never enters
 * a container never loads them): docker, podman, buildah, kubectl, lxc,
 * lxd, incus, setns, chroot.
 */
export * from './buildah.js';
export * from './chroot.js';
export * from './engine.js';
export * from './kubectl.js';
export * from './lxc.js';
export * from './lxd.js';
export * from './setns.js';
