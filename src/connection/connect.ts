import type { ConnectRequest, ReadyInfo, Runtime } from '../core/runtime.js';
import { bootstrap } from './bootstrap.js';
import { doas } from './doas.js';
import { local } from './local.js';
import type { ConnectionMethod } from './method.js';
import { openssh } from './openssh.js';
import { ssh } from './ssh.js';
import { su } from './su.js';
import { sudo } from './sudo.js';

/** Connection methods a context can be asked to use through CONNECT, by name. */
// biome-ignore lint/suspicious/noExplicitAny: each method has its own options type; requests are checked by the method.
export const methods: Record<string, ConnectionMethod<any>> = { local, ssh, openssh, sudo, su, doas };

/**
 * Serves a CONNECT request: starts a child of this context (the `via`
 * context of the caller) with the named method.
 * @throws Error naming the method when it is unknown; BootstrapError as `bootstrap`.
 */
export function connectFromRequest(runtime: Runtime, request: ConnectRequest): Promise<ReadyInfo> {
  const method = methods[request.method];
  if (!method) {
    return Promise.reject(
      new Error(`unknown connection method '${request.method}' in context '${runtime.router.name}'`),
    );
  }
  // Names in use elsewhere in the tree, from the master, so the new context's default name is unique.
  const taken = Array.isArray(request.taken)
    ? new Set(request.taken.filter((name): name is string => typeof name === 'string'))
    : undefined;
  return bootstrap(runtime, method, request.options, taken);
}
