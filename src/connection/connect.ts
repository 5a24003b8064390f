import type { ConnectRequest, ReadyInfo, Runtime } from '../core/runtime.js';
import { bootstrap } from './bootstrap.js';
import { doas } from './doas.js';
import { local } from './local.js';
import type { ConnectionMethod } from './method.js';
import { checkMethodOptions } from './method-options.js';
import { su } from './su.js';
import { sudo } from './sudo.js';

// biome-ignore lint/suspicious/noExplicitAny: each method has its own options type; requests are checked by the method.
type AnyMethod = ConnectionMethod<any>;

/** The SSH methods, loaded on first use (see ssh-methods.ts). */
function sshMethod(name: 'ssh' | 'openssh'): Promise<AnyMethod> {
  return import('./ssh-methods.js').then((methods) => methods[name]);
}

/** Connection methods a context can be asked to use through CONNECT, by name. */
const methods: Record<string, () => Promise<AnyMethod>> = {
  local: async () => local,
  sudo: async () => sudo,
  su: async () => su,
  doas: async () => doas,
  ssh: () => sshMethod('ssh'),
  openssh: () => sshMethod('openssh'),
};

/** tendril's own connection method called `name`, or undefined when there is none. */
export function ownMethod(name: string): Promise<AnyMethod> | undefined {
  // biome-ignore lint/suspicious/noPrototypeBuiltins: Object.hasOwn is missing on the Node 12 to 16.8 a child may run.
  return Object.prototype.hasOwnProperty.call(methods, name) ? methods[name]?.() : undefined;
}

/**
 * Serves a CONNECT request: starts a child of this context (the `via`
 * context of the caller) with the named method.
 * @throws Error naming the method when it is unknown; BootstrapError as `bootstrap`.
 */
export async function connectFromRequest(runtime: Runtime, request: ConnectRequest): Promise<ReadyInfo> {
  const method = await ownMethod(request.method);
  if (!method) throw new Error(`unknown connection method '${request.method}' in context '${runtime.router.name}'`);
  // The master checked them; a context checks what it is asked to start with all the same.
  checkMethodOptions(method, request.options, `router.${method.name}()`);
  // Names in use elsewhere in the tree, from the master, so the new context's default name is unique.
  const taken = Array.isArray(request.taken)
    ? new Set(request.taken.filter((name): name is string => typeof name === 'string'))
    : undefined;
  return bootstrap(runtime, method, request.options, taken);
}
