import { EventEmitter } from 'eventemitter3';
import type { CommonOptions } from '../connection/bootstrap.js';
import { type DoasOptions, doas } from '../connection/doas.js';
import { type LocalOptions, local } from '../connection/local.js';
import type { ConnectionMethod } from '../connection/method.js';
import type { OpensshOptions } from '../connection/openssh.js';
import type { SshOptions } from '../connection/ssh.js';
import { type SuOptions, su } from '../connection/su.js';
import { type SudoOptions, sudo } from '../connection/sudo.js';
import type { Context } from '../core/context.js';
import { Receiver, type ReceiverOptions } from '../core/receiver.js';
import { ROUTER_SWITCH, type RouterEvents } from '../core/switch.js';
import { MasterSwitch, type RouterOptions, type ViaOption } from './master-switch.js';
import type { ResponderStats } from './module-responder.js';

/** Options of the `Router` and of its connection methods. */
export type { RouterOptions, ViaOption } from './master-switch.js';

const EVENTS = ['route', 'disconnect', 'parentClosed', 'log', 'warning'] as const;

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
 * by themselves within a second of losing their parent.
 *
 * Events: `log` (a `LogRecord` for each line a context writes to stdout or
 * stderr; also shown under the `debug` namespace `tendril:<context name>`),
 * `disconnect` (a context became unreachable), `route` (one became
 * reachable), `warning` (a message was refused or dropped; a
 * `RouterWarning`).
 *
 * This is a facade: the message switch it drives (routing, handlers,
 * requests) is internal and not part of the API.
 */
export class Router extends EventEmitter<RouterEvents> {
  readonly #core: MasterSwitch;

  /**
   * @param options see `RouterOptions`.
   * @throws InvalidOptionError when an option is invalid or unknown (a misspelt one), naming it.
   * @throws Error when tendril's bootstrap files are missing (the package was not built).
   */
  constructor(options: RouterOptions = {}) {
    super();
    this.#core = new MasterSwitch(options);
    for (const event of EVENTS) {
      this.#core.on(event, (...args: unknown[]) =>
        (this.emit as (e: string, ...a: unknown[]) => boolean)(event, ...args),
      );
    }
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
   * Starts a context with any connection method. With `via`, the method
   * runs in that context and must be one of tendril's own (by name).
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
   * calls reject with `ContextDisconnectedError`. Idempotent.
   */
  shutdown(): Promise<void> {
    return this.#core.shutdown();
  }

  /** `await using router = new Router()` shuts it down at the end of the scope. */
  [Symbol.asyncDispose](): Promise<void> {
    return this.shutdown();
  }

  /**
   * Module forwarding counters of the master: requests answered, files and
   * bytes sent, files read from disk, refusals; in total and per context
   * that asked. (Each context's own counters: `context.moduleStats()`.)
   */
  moduleStats(): ResponderStats {
    return this.#core.moduleStats();
  }

  /** The message switch behind this facade; internal (receivers and tests reach it this way). */
  get [ROUTER_SWITCH](): MasterSwitch {
    return this.#core;
  }
}
