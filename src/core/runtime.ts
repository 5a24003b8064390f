import type { Broker } from './broker.js';
import type { IdSource } from './ids.js';
import type { LogRecord } from './log.js';
import type { Router } from './router.js';

/**
 * What a context that starts children provides to the connection methods:
 * the same shape in the master and in every child, so one implementation
 * of each method serves both.
 */
export interface Runtime {
  /** This context's router. */
  readonly router: Router;
  /** This context's broker, which takes ownership of started children. */
  readonly broker: Broker;
  /** Numbers new children. */
  readonly ids: IdSource;
  /** The deflated core, exactly as a first stage expects it. */
  readonly coreBundle: Uint8Array;
  /**
   * A V8 code cache of the core made by this context's own Node binary, for
   * children running that same binary; undefined when none could be made.
   */
  codeCache(): Uint8Array | undefined;
  /** The first stage's source, with `__TENDRIL_CORE_SIZE__` where the core's byte count goes. */
  readonly firstStage: string;
  /** `debug` namespaces enabled in the master, passed on to new children. */
  readonly debugNamespaces: string;
  /** Directory (on the master) shipped functions resolve `require()` from by default. */
  readonly moduleBase: string;
  /** Receives output lines of this context's children. */
  readonly onChildLog: (record: LogRecord) => void;
}

/** Configuration sent to a new child in its BOOT message. */
export interface BootConfig {
  /** The child's context ID. */
  id: number;
  /** The child's name. */
  name: string;
  /** Ancestors, nearest first. */
  parentIds: number[];
  /** Largest payload, in bytes. */
  maxMessageSize: number;
  /** IDs the child may hand to its own children, `[start, end)`, or null. */
  idBlock: [number, number] | null;
  /** `debug` namespaces to enable. */
  debug: string;
  /** The first stage's source, so the child can start children of its own. */
  firstStage: string;
  /** Directory (on the master) that shipped functions' `require()` resolves from by default. */
  moduleBase: string;
  /** Prefer packages installed on the target over shipping the master's copy. */
  preferTargetModules: boolean;
}

/** A CONNECT request: start a child from the receiving context (the `via` option). */
export interface ConnectRequest {
  /** Connection method name, e.g. `'local'`. */
  method: string;
  /** Method options, without `via`. */
  options: Record<string, unknown>;
  /** Names of contexts elsewhere in the tree that the method's default name could clash with. */
  taken?: string[];
}

/** The reply to BOOT and to CONNECT: the new context's identity. */
export interface ReadyInfo {
  /** The new context's ID. */
  id: number;
  /** Its name. */
  name: string;
  /** Its process ID on its host. */
  pid: number;
  /** `process.version` there. */
  nodeVersion: string;
  /** Host name of its machine. */
  hostname: string;
  /** `process.platform` there. */
  platform: string;
  /** `process.arch` there. */
  arch: string;
}

/** What the connection module exports to children. */
export interface ConnectionModule {
  /** Serves a CONNECT request in this context. */
  connectFromRequest(runtime: Runtime, request: ConnectRequest): Promise<ReadyInfo>;
}
