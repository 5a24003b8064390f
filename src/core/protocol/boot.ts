import { contextId, integer, MAX_NAME_LENGTH, record, shownString } from './check.js';
import { BOOT } from './handles.js';
import type { HandleSpec } from './spec.js';

/** Configuration sent to a new child in its BOOT message. */
export interface BootConfig {
  /** The child's context ID. */
  id: number;
  /** The child's name. */
  name: string;
  /** Ancestors, nearest first. */
  parentIds: number[];
  /** Their names, in the same order, so errors from them name them. */
  parentNames?: string[];
  /** Largest payload, in bytes. */
  maxMessageSize: number;
  /** Most bytes each of the child's own children may make it hold (absent from an older parent: the default). */
  maxHeldBytes?: number;
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
  /**
   * The heartbeat of the stream to the parent, `[interval, timeout]` in
   * ms, which the child's end keeps too and passes on to its own children
   * by default; false for none. Absent from an older parent: none.
   */
  heartbeat?: [interval: number, timeout: number] | false;
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

/**
 * A decoded ReadyInfo, checked field by field (it comes from the new
 * context, or from the intermediate that started it, which names it); its
 * text escaped for a terminal, since names and host names are printed.
 */
export function readyInfo(value: unknown): ReadyInfo {
  const info = record(value, 'ready info');
  return {
    id: contextId(info.id, 'id'),
    name: shownString(info.name, 'name', MAX_NAME_LENGTH),
    pid: integer(info.pid, 'pid', 0, 0x7fffffff),
    nodeVersion: shownString(info.nodeVersion, 'nodeVersion', 64),
    hostname: shownString(info.hostname, 'hostname', MAX_NAME_LENGTH),
    platform: shownString(info.platform, 'platform', 64),
    arch: shownString(info.arch, 'arch', 64),
  };
}

/**
 * BOOT: the first message to a new child, its configuration; the reply
 * says it is ready. Read by the child before it has a router, so its
 * request is trusted as the parent's; the reply is checked.
 */
export const BOOT_SPEC: HandleSpec<BootConfig, ReadyInfo> = {
  handle: BOOT,
  name: 'BOOT',
  policy: () => () => false,
  request: (value) => record(value, 'config') as unknown as BootConfig,
  reply: readyInfo,
};
