import type { Broker } from './broker.js';
import type { CoreSource } from './core-source.js';
import type { HeartbeatSettings } from './heartbeat.js';
import type { IdSource } from './ids.js';
import type { Importer } from './importer.js';
import type { LogRecord } from './log.js';
import type { ReadyInfo } from './protocol/boot.js';
import type { ConnectRequest } from './protocol/connect.js';
import type { MessageSwitch } from './switch.js';

/**
 * What a context that starts children provides to the connection methods:
 * the same shape in the master and in every child, so one implementation
 * of each method serves both.
 */
export interface Runtime {
  /** This context's router. */
  readonly router: MessageSwitch;
  /** This context's broker, which takes ownership of started children. */
  readonly broker: Broker;
  /** Numbers new children. */
  readonly ids: IdSource;
  /** The core, in either form a first stage takes it in. */
  readonly coreSource: CoreSource;
  /**
   * A V8 code cache of the core made by this context's own Node binary, for
   * children running that same binary; undefined when none could be made.
   */
  codeCache(): Uint8Array | undefined;
  /**
   * The first stage's source, with a placeholder for the core's byte count
   * and form (see connection/first-stage.ts): the variant that looks for the
   * core's code cache on the target when the Router's targetCodeCache asked
   * for it, passed on to every descendant.
   */
  readonly firstStage: string;
  /** `debug` namespaces enabled in the master, passed on to new children. */
  readonly debugNamespaces: string;
  /** Directory (on the master) shipped functions resolve `require()` from by default. */
  readonly moduleBase: string;
  /** The heartbeat of the streams to children started here, unless their own options say otherwise; false for none. */
  readonly heartbeat: HeartbeatSettings | false;
  /** A child's module system (a job takes from it what it needs before it detaches); none in the master. */
  readonly importer?: Importer;
  /** Receives output lines of this context's children. */
  readonly onChildLog: (record: LogRecord) => void;
}

let current: Runtime | undefined;

/** Records the runtime of the context this process is, once, as it starts. */
export function setContextRuntime(runtime: Runtime): void {
  current = runtime;
}

/**
 * The runtime of the context this process is, for tendril's modules loaded
 * after the core (its services): its router, broker and ID source.
 * @throws Error in a process that is not a tendril child context.
 */
export function contextRuntime(): Runtime {
  if (!current) throw new Error('not running in a tendril context: tendril:toolkit is loaded by child contexts only');
  return current;
}

/** BOOT's request and the ready info of BOOT and CONNECT (defined with BOOT). */
export type { BootConfig, ReadyInfo } from './protocol/boot.js';
/** CONNECT's request (defined with CONNECT). */
export type { ConnectRequest } from './protocol/connect.js';

/** What the connection module exports to children. */
export interface ConnectionModule {
  /** Serves a CONNECT request in this context; `load` imports the module of a user's method (`request.module`). */
  connectFromRequest(
    runtime: Runtime,
    request: ConnectRequest,
    load: (path: string) => Promise<unknown>,
  ): Promise<ReadyInfo>;
}
