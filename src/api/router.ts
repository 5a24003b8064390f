import { EventEmitter } from 'eventemitter3';
import type { CommonOptions } from '../connection/bootstrap.js';
import { type CommandOptions, command } from '../connection/command.js';
import type { BuildahOptions } from '../connection/containers/buildah.js';
import type { ChrootOptions } from '../connection/containers/chroot.js';
import type { DockerOptions, PodmanOptions } from '../connection/containers/engine.js';
import type { KubectlOptions } from '../connection/containers/kubectl.js';
import type { LxcOptions } from '../connection/containers/lxc.js';
import type { IncusOptions, LxdOptions } from '../connection/containers/lxd.js';
import type { SetnsOptions } from '../connection/containers/setns.js';
import { type DoasOptions, doas } from '../connection/doas.js';
import { type LocalOptions, local } from '../connection/local.js';
import type { ConnectionMethod } from '../connection/method.js';
import type { OpensshOptions } from '../connection/openssh.js';
import type { RuntimeStats, ShipProgress } from '../connection/runtime-shipping.js';
import type { SshOptions } from '../connection/ssh.js';
import { type SuOptions, su } from '../connection/su.js';
import { type SudoOptions, sudo } from '../connection/sudo.js';
import { Receiver, type ReceiverOptions } from '../core/receiver.js';
import type { ServiceName, ServiceOptions } from '../core/services.js';
import { ROUTER_SWITCH, type RouterEvents as SwitchEvents } from '../core/switch.js';
import { MasterSwitch, type RouterOptions, type ViaOption } from '../master/master-switch.js';
import type { ResponderStats } from '../master/module-responder.js';
import { Context } from '../toolkit/context.js';
import { type CopyOutcome, copyToMany, type TransferOptions } from '../toolkit/files/transfer.js';
import { Fleet, type FleetFunction, type FleetOptions } from '../toolkit/fleet/fleet.js';
import type { FleetTarget } from '../toolkit/fleet/target.js';
import { ContextPool, routerShuttingDown } from '../toolkit/pool/pool.js';
import { serviceRegistry } from '../toolkit/services/registry.js';
import { Listener, type ListenOptions } from '../unix/listener.js';
import { shutDownOnSignals } from './shutdown-signals.js';

/** Options of the `Router` and of its connection methods. */
export type { RouterOptions, ViaOption } from '../master/master-switch.js';

/**
 * Events of a `Router`: `log` (a `LogRecord` for each line a context
 * writes), `disconnect` (a context became unreachable: its ID, why, and why in one word, a `DisconnectKind`), `route`
 * (one became reachable: its ID), `warning` (a message was refused or
 * dropped: a `RouterWarning`), `ship` (progress of a Node runtime being
 * sent: a `ShipProgress`).
 */
export type RouterEvents = Pick<SwitchEvents, 'route' | 'disconnect' | 'log' | 'warning'> & {
  /** Progress of a Node runtime the master sends to a target without Node (or to an intermediate's cache). */
  ship: [progress: ShipProgress];
};

/** The events the facade forwards from its switch (a master has no parent, so never `parentClosed`). */
const EVENTS = ['route', 'disconnect', 'log', 'warning'] as const;

/**
 * The root of a tree of contexts, and the object a program uses to start
 * them. It stops and reaps every child at `shutdown()`.
 *
 * ```ts
 * await using router = new Router();
 * const child = await router.local();
 * console.log(await child.call(() => process.pid));
 * ```
 *
 * The process can exit while contexts are running: streams only keep the
 * event loop alive while a call or bootstrap is pending, and children exit
 * by themselves within a second of losing their parent. With the option
 * `shutdownOnSignal`, Ctrl-C (SIGINT) or SIGTERM shuts the router down
 * first, so the program's `finally` blocks run.
 *
 * Events: `log` (a `LogRecord` for each line a context writes to stdout or
 * stderr; also printed on the master's stderr as `[<context name>] <line>`,
 * or with the option `output: 'events'` only shown under the `debug`
 * namespace `tendril:<context name>`),
 * `disconnect` (a context became unreachable), `route` (one became
 * reachable), `warning` (a message was refused or dropped; a
 * `RouterWarning`), `ship` (progress of a Node runtime sent to a target
 * without Node: a `ShipProgress`, every MiB and at the end).
 *
 * This is a facade: the message switch it drives (routing, handlers,
 * requests) is internal and not part of the API.
 */
export class Router extends EventEmitter<RouterEvents> {
  readonly #core: MasterSwitch<Context>;
  #pool: ContextPool | undefined;
  /** Removes this router's signal handlers (option `shutdownOnSignal`), once it has shut down. */
  readonly #releaseSignals: (() => void) | undefined;
  /**
   * What `shutdown()` stops, in this order: the pools first, so that what
   * waits on them is rejected (`PoolError`) and they start nothing more
   * before the contexts under them go; then the switch, which runs its
   * broker's cleanups (closing the listeners, disconnecting the processes
   * that joined) and stops every context.
   */
  readonly #shutdownSteps: readonly (() => void | Promise<void>)[] = [
    () => routerShuttingDown(this),
    () => this.#core.shutdown(),
  ];

  /**
   * @param options see `RouterOptions`.
   * @throws InvalidOptionError when an option is invalid or unknown (a misspelt one), naming it.
   * @throws Error when tendril's bootstrap files are missing (the package was not built).
   */
  constructor(options: RouterOptions = {}) {
    super();
    this.#core = new MasterSwitch<Context>(options, (...args) => new Context(...args));
    this.#core.onShipProgress = (progress) => this.emit('ship', progress);
    for (const event of EVENTS) {
      this.#core.on(event, (...args: unknown[]) =>
        (this.emit as (e: string, ...a: unknown[]) => boolean)(event, ...args),
      );
    }
    const signals = this.#core.shutdownSignals;
    if (signals.length > 0) this.#releaseSignals = shutDownOnSignals(signals, () => this.shutdown());
  }

  /** The master's context ID: 0. */
  get id(): number {
    return this.#core.id;
  }

  /** The master's name in logs and errors (option `name`, default `'master'`). */
  get name(): string {
    return this.#core.name;
  }

  /** Largest message payload accepted or sent anywhere in the tree, in bytes. */
  get maxMessageSize(): number {
    return this.#core.maxMessageSize;
  }

  /**
   * Starts a Node child process on this machine (connection method `local`)
   * and resolves with its context once it is ready.
   *
   * @param options name, `nodePath` (default: this Node binary), `env`,
   *   `cwd`, `connectTimeout` (ms, default 30000) and `via`.
   * @throws BootstrapError when the child fails before it is ready, quoting its last output.
   * @throws ConnectTimeoutError when it is not ready within `connectTimeout`; it is killed and reaped.
   *   With `via`, also when the via context does not answer within `connectTimeout` and 2 s more.
   * @throws the same errors when `via` is given: a `BootstrapError` (or subclass)
   *   raised in the via context arrives as that class.
   * @throws ChannelError when the router is shut down while the context starts.
   */
  local(options: LocalOptions & ViaOption = {}): Promise<Context> {
    return this.#core.connect(local, options);
  }

  /**
   * Starts a context on another machine over SSH (the ssh2 library; no
   * OpenSSH client needed), optionally through jump hosts. Host keys are
   * checked against known_hosts; `~/.ssh/config` is honoured. See
   * docs/connection-methods.md for every option.
   * @throws HostKeyError, AuthenticationError (listing the methods tried),
   *   PasswordError (a wrong key passphrase), ConnectionRefusedError,
   *   UnknownHostError, ConnectTimeoutError, InterpreterError (no usable
   *   Node there, naming the host and every path tried), BootstrapError.
   */
  ssh(options: SshOptions & ViaOption): Promise<Context> {
    // The SSH methods are a chunk of their own: a program that never uses them never loads them.
    return import('../connection/ssh-methods.js').then(({ ssh }) => this.#core.connect(ssh, options));
  }

  /**
   * Starts a context over the system OpenSSH client, for setups only it
   * supports (ControlMaster, GSSAPI, certificates, FIDO keys): the user's
   * whole ssh config applies. Passwords and passphrases reach ssh through
   * SSH_ASKPASS, never a command line. With `via`, only key or agent
   * authentication is available.
   * @throws as `ssh`.
   */
  openssh(options: OpensshOptions & ViaOption): Promise<Context> {
    return import('../connection/ssh-methods.js').then(({ openssh }) => this.#core.connect(openssh, options));
  }

  /**
   * Starts a context as another account with sudo, on the machine of `via`
   * (default: the master's). See docs/connection-methods.md.
   * @param options `username` (default `'root'`), `password`, `preserveEnv`,
   *   `login`, `sudoArgs`, `sudoPath`, plus the common options and `via`.
   * @throws PasswordError at once for a wrong or missing password;
   *   NotAllowedError when the account may not sudo (or sudoers requires a tty);
   *   the other errors of `local`.
   */
  sudo(options: SudoOptions & ViaOption = {}): Promise<Context> {
    return this.#core.connect(sudo, options);
  }

  /**
   * Starts a context as another account with su, answering su's password
   * prompt. See docs/connection-methods.md.
   * @param options `username` (default `'root'`), `password` (of that account), `login`, `suPath`, common options, `via`.
   * @throws PasswordError, NotAllowedError, and the errors of `local`.
   */
  su(options: SuOptions & ViaOption = {}): Promise<Context> {
    return this.#core.connect(su, options);
  }

  /**
   * Starts a context as another account with doas. With a password, doas
   * runs under util-linux `script`, which gives it a terminal for the prompt.
   * @param options `username` (default `'root'`), `password`, `doasPath`, common options, `via`.
   * @throws PasswordError, NotAllowedError, and the errors of `local`.
   */
  doas(options: DoasOptions & ViaOption = {}): Promise<Context> {
    return this.#core.connect(doas, options);
  }

  /**
   * Starts a context in a container of the Docker engine: `docker exec
   * --interactive [--user U] CONTAINER ...` into a running container, or
   * with `image`, `docker run --interactive --rm ...` of a throwaway one
   * that lives as long as the context. The docker CLI runs on the machine
   * of `via` (default: the master's). See docs/connection-methods.md.
   * @param options exactly one of `container` and `image`; `user`, `runArgs` (with `image`),
   *   `dockerPath` (default `'docker'`), `dockerArgs` (global options such as `--host`), common options, `via`.
   * @throws ContainerNotFoundError (no such container or image), ContainerNotRunningError,
   *   UnknownUserError, NotAllowedError (no access to the daemon's socket), ToolNotFoundError
   *   (no docker CLI), InterpreterError (no Node or no sh in the container), and the errors of `local`.
   */
  docker(options: DockerOptions & ViaOption): Promise<Context> {
    return containerMethods().then(({ docker }) => this.#core.connect(docker, options));
  }

  /**
   * Starts a context in a Podman container (root or rootless), as `docker`
   * does: `podman exec --interactive ...`, or `podman run --interactive --rm ...` with `image`.
   * @param options as `docker`, with `podmanPath` and `podmanArgs`.
   * @throws as `docker`.
   */
  podman(options: PodmanOptions & ViaOption): Promise<Context> {
    return containerMethods().then(({ podman }) => this.#core.connect(podman, options));
  }

  /**
   * Starts a context in a buildah working container (`buildah run [--user U] -- CONTAINER ...`).
   * @param options `container`, `user`, `buildahPath`, `buildahArgs`, common options, `via`.
   * @throws ContainerNotFoundError, UnknownUserError, ToolNotFoundError, and the errors of `local`.
   */
  buildah(options: BuildahOptions & ViaOption): Promise<Context> {
    return containerMethods().then(({ buildah }) => this.#core.connect(buildah, options));
  }

  /**
   * Starts a context in a container of a Kubernetes pod: `kubectl [options] exec -i POD [-c C] -- ...`.
   * @param options `pod`, `container`, `namespace`, `context`, `kubeconfig`, `kubectlArgs`,
   *   `kubectlPath`, common options, `via`.
   * @throws ContainerNotFoundError (no such pod or container), ContainerNotRunningError,
   *   NotAllowedError (no pods/exec permission), ToolNotFoundError, and the errors of `local`.
   */
  kubectl(options: KubectlOptions & ViaOption): Promise<Context> {
    return containerMethods().then(({ kubectl }) => this.#core.connect(kubectl, options));
  }

  /**
   * Starts a context in a running LXC container: `lxc-attach [--lxcpath P] --clear-env --name C -- ...`.
   * @param options `container`, `lxcDirectory`, `lxcAttachPath`, common options, `via`.
   * @throws ContainerNotFoundError, ContainerNotRunningError, NotAllowedError, ToolNotFoundError,
   *   and the errors of `local`.
   */
  lxc(options: LxcOptions & ViaOption): Promise<Context> {
    return containerMethods().then(({ lxc }) => this.#core.connect(lxc, options));
  }

  /**
   * Starts a context in an LXD instance: `lxc exec --mode=non-interactive C -- ...`.
   * @param options `container` (`[remote:]name`), `lxcPath` (the client, default `'lxc'`), `lxdDirectory`
   *   (the daemon's directory, given to the client as `LXD_DIR`), common options, `via`.
   * @throws ContainerNotFoundError, ContainerNotRunningError, NotAllowedError, ToolNotFoundError,
   *   and the errors of `local`.
   */
  lxd(options: LxdOptions & ViaOption): Promise<Context> {
    return containerMethods().then(({ lxd }) => this.#core.connect(lxd, options));
  }

  /**
   * Starts a context in an Incus instance: `incus exec --mode=non-interactive C -- ...`.
   * @param options `container` (`[remote:]name`), `incusPath`, `incusDirectory` (as `INCUS_DIR`), common options, `via`.
   * @throws as `lxd`.
   */
  incus(options: IncusOptions & ViaOption): Promise<Context> {
    return containerMethods().then(({ incus }) => this.#core.connect(incus, options));
  }

  /**
   * Starts a context inside a running container's namespaces with
   * util-linux nsenter, without the runtime's exec; root only. The leader
   * process is `pid`, or found with `docker inspect`, `podman inspect` or
   * `lxc-info` for `container` and `runtime`.
   * @param options `pid`, or `container` and `runtime`; `runtimePath`, `runtimeArgs` (given to the runtime
   *   before its own: where its containers are), `user`, `nsenterPath`, common options, `via`.
   * @throws NotAllowedError (not root), ContainerNotFoundError, ContainerNotRunningError,
   *   UnknownUserError, ToolNotFoundError, and the errors of `local`.
   */
  setns(options: SetnsOptions & ViaOption): Promise<Context> {
    return containerMethods().then(({ setns }) => this.#core.connect(setns, options));
  }

  /**
   * Starts a context in another root directory: `chroot [--userspec U] PATH ...`, as root.
   * @param options `path`, `user`, `chrootPath`, common options, `via`.
   * @throws ContainerNotFoundError (no such directory), NotAllowedError (not root),
   *   UnknownUserError, ToolNotFoundError, and the errors of `local`.
   */
  chroot(options: ChrootOptions & ViaOption): Promise<Context> {
    return containerMethods().then(({ chroot }) => this.#core.connect(chroot, options));
  }

  /**
   * Starts a context through any program that runs a command and passes
   * its stdin and stdout through (`gcloud compute ssh`, `aws ssm
   * start-session`, `vagrant ssh -c`, an in-house wrapper): tendril's start
   * is appended to `argv`, as separate arguments, or as one shell-quoted
   * string with `remoteShell: true` for tools that hand it to a shell.
   * @param options `argv`, `remoteShell` (default false), common options, `via`.
   * @throws ToolNotFoundError (the program is not installed), and the errors of `local`.
   */
  command(options: CommandOptions & ViaOption): Promise<Context> {
    return this.#core.connect(command, options);
  }

  /**
   * Starts a context with any connection method: one of tendril's, or one
   * you wrote (docs/connection-methods.md, "Writing a method"). With `via`,
   * the method runs in that context; a method of yours is loaded there from
   * the module that defines it, through module forwarding.
   * @throws TypeError with `via` when the module defining the method cannot be told (defined by eval, in a REPL).
   * @throws as `local`; Error when the router has been shut down;
   *   ProtocolError when the via context replies with a context that is not under it.
   */
  connect<O extends CommonOptions>(method: ConnectionMethod<O>, options: O & ViaOption): Promise<Context> {
    return this.#core.connect(method, options);
  }

  /**
   * A receiver in the master: values sent to it by contexts (through its
   * `toSender()`, passed to a call) queue until read, under flow control
   * (docs/streams.md). It ends once every call that carried one of its
   * Senders has settled, or with `ChannelError` when such a context goes away.
   * @param options `highWaterMark`: how much each Sender may have unread
   *   here (default 1024 messages, 8 MiB); `contextId`: admit values only
   *   from that context and close when it disconnects; `policy`: a further
   *   admission check.
   * @throws InvalidOptionError when `highWaterMark` is malformed.
   */
  receiver<T = unknown>(options: ReceiverOptions = {}): Receiver<T> {
    return new Receiver<T>(this.#core, options);
  }

  /**
   * Shuts down every context: each is asked to exit (stopping its own
   * children first), then after `shutdownGrace` ms sent SIGTERM, then
   * SIGKILL, and reaped. Contexts still starting are stopped too. Pending
   * calls reject with `ContextDisconnectedError`. Idempotent. Once it has
   * finished, the router's signal handlers (option `shutdownOnSignal`) are removed.
   */
  async shutdown(): Promise<void> {
    try {
      for (const step of this.#shutdownSteps) await step();
    } finally {
      this.#releaseSignals?.();
    }
  }

  /** `await using router = new Router()` shuts it down at the end of the scope. */
  [Symbol.asyncDispose](): Promise<void> {
    return this.shutdown();
  }

  /**
   * This router's default `ContextPool` (default limits), made on first
   * use: one context per target, shared by every part of the program
   * that acquires it. `router.shutdown()` closes it.
   *
   * ```ts
   * const lease = await router.pool.acquire({ method: 'ssh', hostname: 'web1' });
   * ```
   */
  get pool(): ContextPool {
    this.#pool ??= new ContextPool(this);
    return this.#pool;
  }

  /**
   * Runs `fn` across many targets: each is acquired from `router.pool`
   * (or used as it is, for a `Context`), `fn(context, target, { signal,
   * label, index })` runs in the master with its context, and the lease
   * is released when `fn` ends, so a later fleet over the same targets
   * reuses the connections. At most `concurrency` targets run at once,
   * each under its own `timeout` (connecting included).
   *
   * ```ts
   * const fleet = router.fleet(hosts.map((hostname) => ({ method: 'ssh', hostname })), (context) =>
   *   context.call(() => require('node:os').loadavg()[0]),
   * );
   * fleet.on('progress', ({ done, total }) => console.log(`${done}/${total}`));
   * for await (const outcome of fleet) console.log(outcome.label, outcome.ok ? outcome.value : outcome.error.message);
   * console.log((await fleet.summary()).format());
   * ```
   * @param targets pool targets (`{ method, ... }`) and contexts, checked before any starts.
   * @param fn runs once per target; what it returns is that target's `value`, what it throws its error.
   * @param options `concurrency` (default 16), `timeout` per target, `signal`, `pool`, `close`.
   * @returns the running fleet: iterate its outcomes, listen to its events, await its `summary()`.
   *   A target's failure is a `FleetError` naming it, never a rejection of the fleet.
   * @throws InvalidOptionError for a malformed target (naming its index and field), `fn` or option.
   */
  fleet<T, Target extends FleetTarget = FleetTarget>(
    targets: Iterable<Target>,
    fn: FleetFunction<T, Target>,
    options?: FleetOptions,
  ): Fleet<T, Target> {
    return new Fleet(() => this.pool, targets, fn, options);
  }

  /**
   * Copies one file (or tree) from the master to many contexts, reading
   * it once. Targets are grouped by the context that started them: the
   * master's own children each get a stream, and all the children of
   * another context get one stream to it, which it tees to them, so that
   * hop and those above it carry the data once. The slowest target paces
   * the others (flow control); one failing does not stop the rest, and
   * one that takes no data for `stallTimeout` ms (default 30000), or does
   * not answer that long once the data has ended, fails alone with
   * `ERR_TENDRIL_STALLED` while the others go on.
   * @param contexts the targets.
   * @param options as `copy`'s, and `stallTimeout`.
   * @returns one outcome per target, in order, like `Promise.allSettled`,
   *   each with its context; a failure is a `FileTransferError` naming
   *   its context (for a stalled intermediate, that context), or the
   *   signal's reason (or past `timeout`, a `TimeoutError`) for every
   *   target when it aborts (within `STOP_GRACE`, 2 s, whatever the
   *   targets do).
   * @throws InvalidOptionError for a bad argument.
   */
  copy(localPath: string, remotePath: string, contexts: Context[], options?: TransferOptions): Promise<CopyOutcome[]> {
    return copyToMany(this.#core, localPath, remotePath, contexts, options);
  }

  /**
   * Offers `implementation`'s methods to the contexts of the tree under
   * `name`: its function-valued properties and those of its prototypes
   * (a class instance's methods), except `constructor` and names starting
   * with `_`, as they are now. Other contexts call them with
   * `context.callService(name, method, ...args)` through their handle on
   * the master; children reach it through `thisContext().master`.
   *
   * ```ts
   * const MATH = router.registerService('math', { add: (a: number, b: number) => a + b }, { policy: 'any' });
   * // in a child: await thisContext().master.callService(MATH, 'add', 1, 2)
   * ```
   *
   * @param name the service's name, up to 256 characters.
   * @param implementation the object whose methods are the service.
   * @param options `policy` (who may call: `'parents'`, the default, which
   *   in the master admits only the master itself and processes acting
   *   with its authority; `'any'`; or a predicate over the caller),
   *   `concurrency` (calls running at once, default 16), `maxQueued`
   *   (calls waiting at most, default 1000) and `validate` (checks of the
   *   arguments by method).
   * @returns `name`, typed with the implementation, for `callService()`.
   * @throws InvalidOptionError for a bad name, implementation or option.
   * @throws Error when a service of that name is registered already.
   */
  registerService<S extends object>(name: string, implementation: S, options?: ServiceOptions<S>): ServiceName<S> {
    return serviceRegistry(this.#core).register(name, implementation, options);
  }

  /**
   * Withdraws the service `name`: later calls to it fail with
   * `ERR_TENDRIL_SERVICE_UNKNOWN`; those already queued or running finish.
   * @returns false when no service of that name was registered.
   */
  unregisterService(name: string): boolean {
    return serviceRegistry(this.#core).unregister(name);
  }

  /**
   * Lets other processes of this user on this machine join this tree
   * through a UNIX socket at `path` (see `joinListener()`): each gets a
   * context ID, acts with the master's authority, and shares the
   * master's connections and services. The socket's directory is created
   * with mode 0700 when missing and must otherwise be private to this
   * user; the socket gets mode 0600; a stale socket is replaced, a live
   * one refused; and a process running as another user is refused by
   * the kernel's record of its credentials (SO_PEERCRED, Linux; read
   * with perl), not only by file modes. `router.shutdown()` closes it.
   * @param options `allowUids`, `maxPeers` (default 256), `helloTimeout` (ms, default 10000).
   * @returns the listening `Listener`; `listener.close()` disconnects the
   *   processes that joined and leaves the master's own contexts alone.
   * @throws ListenerError when the directory is shared or not a
   *   directory, the path is too long, something else is at the path, or
   *   another master listens there (`ERR_TENDRIL_LISTENER_IN_USE`).
   */
  listen(path: string, options?: ListenOptions): Promise<Listener> {
    return Listener.open(this.#core, () => this.pool, path, options);
  }

  /**
   * Module forwarding counters of the master: requests answered, files and
   * bytes sent, files read from disk, refusals; in total and per context
   * that asked. (Each context's own counters: `context.moduleStats()`.)
   */
  moduleStats(): ResponderStats {
    return this.#core.moduleStats();
  }

  /**
   * Counters of the Node runtimes the master sent to targets without Node
   * (and to intermediates' caches): runtimes and bytes sent, starts that
   * found the runtime on the target already; in total and per context
   * they went to. See docs/runtime.md.
   */
  runtimeStats(): RuntimeStats {
    return this.#core.runtimeStats();
  }

  /** The message switch behind this facade; internal (receivers and tests reach it this way). */
  get [ROUTER_SWITCH](): MasterSwitch<Context> {
    return this.#core;
  }
}

/** The container methods: a chunk of their own, loaded by the first container context. */
function containerMethods(): Promise<typeof import('../connection/containers/index.js')> {
  return import('../connection/containers/index.js');
}
