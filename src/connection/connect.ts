import type { ConnectRequest, ReadyInfo, Runtime } from '../core/runtime.js';
import { bootstrap } from './bootstrap.js';
import { command } from './command.js';
import { doas } from './doas.js';
import { local } from './local.js';
import type { ConnectionMethod } from './method.js';
import { checkMethodOptions } from './method-options.js';
import { childRuntimeSource } from './runtime-cache.js';
import { serveNodeRuntime } from './runtime-service.js';
import { su } from './su.js';
import { sudo } from './sudo.js';

// biome-ignore lint/suspicious/noExplicitAny: each method has its own options type; requests are checked by the method.
type AnyMethod = ConnectionMethod<any>;

/** The SSH methods, loaded on first use (see ssh-methods.ts). */
function sshMethod(name: 'ssh' | 'openssh'): Promise<AnyMethod> {
  return import('./ssh-methods.js').then((methods) => methods[name]);
}

/** The container methods, loaded on first use (see containers/index.ts). */
function containerMethod(
  name: 'docker' | 'podman' | 'buildah' | 'kubectl' | 'lxc' | 'lxd' | 'incus' | 'setns' | 'chroot',
): () => Promise<AnyMethod> {
  return () => import('./containers/index.js').then((methods) => methods[name]);
}

/** Connection methods a context can be asked to use through CONNECT, by name. */
const methods: Record<string, () => Promise<AnyMethod>> = {
  local: async () => local,
  sudo: async () => sudo,
  su: async () => su,
  doas: async () => doas,
  command: async () => command,
  ssh: () => sshMethod('ssh'),
  openssh: () => sshMethod('openssh'),
  docker: containerMethod('docker'),
  podman: containerMethod('podman'),
  buildah: containerMethod('buildah'),
  kubectl: containerMethod('kubectl'),
  lxc: containerMethod('lxc'),
  lxd: containerMethod('lxd'),
  incus: containerMethod('incus'),
  setns: containerMethod('setns'),
  chroot: containerMethod('chroot'),
};

/** tendril's own connection method called `name`, or undefined when there is none. */
export function ownMethod(name: string): Promise<AnyMethod> | undefined {
  // biome-ignore lint/suspicious/noPrototypeBuiltins: Object.hasOwn is missing on the Node 12 to 16.8 a child may run.
  return Object.prototype.hasOwnProperty.call(methods, name) ? methods[name]?.() : undefined;
}

/**
 * The connection method called `name` among the exports of `module` (a
 * namespace, or a CommonJS module's exports).
 * @param path the module's path on the master, for the error.
 * @throws TypeError naming the module when it exports none.
 */
export function exportedMethod(module: unknown, name: string, path: string): AnyMethod {
  const exports: Record<string, unknown> = typeof module === 'object' && module !== null ? { ...module } : {};
  const fallback = exports.default;
  // `export default method`, `module.exports = { method }` seen through import(), or named exports.
  const candidates = [
    ...Object.values(exports),
    ...(typeof fallback === 'object' && fallback !== null ? Object.values(fallback) : []),
  ];
  const found = candidates.find(
    (value): value is AnyMethod =>
      typeof value === 'object' &&
      value !== null &&
      (value as AnyMethod).name === name &&
      typeof (value as AnyMethod).start === 'function' &&
      typeof (value as AnyMethod).defaultNode === 'function',
  );
  if (!found) {
    throw new TypeError(
      `module ${path}, where connection method '${name}' is defined (its start function), exports no connection method named '${name}': export the method object from that module (a method made by another module's function is defined there: give yours a start of its own, such as start: (argv, options, session) => made.start(argv, options, session))`,
    );
  }
  return found;
}

/**
 * Loads the user's method a CONNECT request names: imports `request.module`
 * (through module forwarding, as a call's module) and takes its export of
 * that name.
 * @throws Error naming the method, the module and this context when the module cannot be loaded; TypeError as `exportedMethod`.
 */
async function userMethod(
  runtime: Runtime,
  request: ConnectRequest & { module: string },
  load: ((path: string) => Promise<unknown>) | undefined,
): Promise<AnyMethod> {
  if (!load)
    throw new Error(
      `context '${runtime.router.name}' cannot load modules, so not connection method '${request.method}'`,
    );
  let module: unknown;
  try {
    module = await load(request.module);
  } catch (error) {
    throw new Error(
      `context '${runtime.router.name}' could not load module ${request.module}, which defines connection method '${request.method}': ${(error as Error)?.message ?? String(error)}`,
    );
  }
  return exportedMethod(module, request.method, request.module);
}

/**
 * Serves a CONNECT request: starts a child of this context (the `via`
 * context of the caller) with the named method: one of tendril's own, or,
 * when the request names a module, the user's method it exports.
 * @param load imports a module by its path on the master (module forwarding).
 * @throws Error naming the method when it is unknown or its module cannot be loaded; TypeError when that module does not export it; BootstrapError as `bootstrap`.
 */
export async function connectFromRequest(
  runtime: Runtime,
  request: ConnectRequest,
  load?: (path: string) => Promise<unknown>,
): Promise<ReadyInfo> {
  const { module } = request;
  // Its children may ask it for the Node runtime they ship to theirs.
  serveNodeRuntime(runtime.router, () => childRuntimeSource(runtime));
  const method =
    module === undefined ? await ownMethod(request.method) : await userMethod(runtime, { ...request, module }, load);
  if (!method) throw new Error(`unknown connection method '${request.method}' in context '${runtime.router.name}'`);
  // The master checked them; a context checks what it is asked to start with all the same.
  checkMethodOptions(method, request.options, `router.${method.name}()`);
  // Names in use elsewhere in the tree, from the master, so the new context's default name is unique.
  const taken = Array.isArray(request.taken)
    ? new Set(request.taken.filter((name): name is string => typeof name === 'string'))
    : undefined;
  return bootstrap(runtime, method, request.options, { taken, leaf: request.leaf === true });
}
