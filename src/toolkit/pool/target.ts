/**
 * What a pool is asked for: a target as plain data, checked (targets may
 * come from another process, through the UNIX listener), and reduced to
 * the key that says whether two requests mean one connection.
 */
import type { CommandOptions } from '../../connection/command.js';
import type { BuildahOptions } from '../../connection/containers/buildah.js';
import type { ChrootOptions } from '../../connection/containers/chroot.js';
import type { DockerOptions, PodmanOptions } from '../../connection/containers/engine.js';
import type { KubectlOptions } from '../../connection/containers/kubectl.js';
import type { LxcOptions } from '../../connection/containers/lxc.js';
import type { IncusOptions, LxdOptions } from '../../connection/containers/lxd.js';
import type { SetnsOptions } from '../../connection/containers/setns.js';
import type { DoasOptions } from '../../connection/doas.js';
import type { LocalOptions } from '../../connection/local.js';
import { targetName } from '../../connection/naming.js';
import type { OpensshOptions } from '../../connection/openssh.js';
import type { SshOptions } from '../../connection/ssh-options.js';
import type { SuOptions } from '../../connection/su.js';
import type { SudoOptions } from '../../connection/sudo.js';
import { InvalidOptionError } from '../../core/errors.js';
import { integer, text } from '../../core/options.js';
import { Context } from '../context.js';

/** Where a pooled context is started from: another target (pooled too), or a context the program holds. */
export interface PoolVia {
  /**
   * Start the context from this one. A target is acquired from the same
   * pool first and held for as long as the context started through it is
   * open; a `Context` is used as it is (the pool never closes it).
   */
  via?: PoolTarget | Context;
}

/**
 * A target of a `ContextPool`: the connection method's name and that
 * method's options, as plain data (what `router.<method>()` takes, plus
 * `method`), with `via` a target or a `Context`.
 *
 * ```ts
 * const target: PoolTarget = { method: 'sudo', username: 'root', via: { method: 'ssh', hostname: 'web1' } };
 * ```
 */
export type PoolTarget =
  | ({ method: 'local' } & LocalOptions & PoolVia)
  | ({ method: 'ssh' } & SshOptions & PoolVia)
  | ({ method: 'openssh' } & OpensshOptions & PoolVia)
  | ({ method: 'sudo' } & SudoOptions & PoolVia)
  | ({ method: 'su' } & SuOptions & PoolVia)
  | ({ method: 'doas' } & DoasOptions & PoolVia)
  | ({ method: 'docker' } & DockerOptions & PoolVia)
  | ({ method: 'podman' } & PodmanOptions & PoolVia)
  | ({ method: 'buildah' } & BuildahOptions & PoolVia)
  | ({ method: 'kubectl' } & KubectlOptions & PoolVia)
  | ({ method: 'lxc' } & LxcOptions & PoolVia)
  | ({ method: 'lxd' } & LxdOptions & PoolVia)
  | ({ method: 'incus' } & IncusOptions & PoolVia)
  | ({ method: 'setns' } & SetnsOptions & PoolVia)
  | ({ method: 'chroot' } & ChrootOptions & PoolVia)
  | ({ method: 'command' } & CommandOptions & PoolVia);

/** The connection methods a pool can use. */
export const POOL_METHODS = [
  'local',
  'ssh',
  'openssh',
  'sudo',
  'su',
  'doas',
  'docker',
  'podman',
  'buildah',
  'kubectl',
  'lxc',
  'lxd',
  'incus',
  'setns',
  'chroot',
  'command',
] as const;

/** Options that change how a context starts but not which target it is: left out of a target's key. */
const NOT_IDENTITY = new Set(['name', 'connectTimeout', 'nodePath', 'preferTargetModules', 'nodeCandidates']);

/** One of `POOL_METHODS`. */
export type PoolMethod = (typeof POOL_METHODS)[number];

/** Deepest via chain a target may have: far past any real route, and it bounds the work a malformed one causes. */
export const MAX_VIA_DEPTH = 16;

/** A checked target: what the pool keys, names and starts. */
export interface ParsedTarget {
  /** Identity of the connection; equal keys share a context. */
  readonly key: string;
  /** How messages name the target, e.g. `sudo:root via ssh:deploy@web1:22`. */
  readonly label: string;
  /** The connection method, checked to be one of `POOL_METHODS`. */
  readonly method: PoolMethod;
  /** The method's options, without `method` and `via`. */
  readonly options: Record<string, unknown>;
  /** A pooled via, a held context, or none. */
  readonly via: ParsedTarget | Context | undefined;
  /** Contexts the pool starts for this target: 1 plus those of its pooled via chain. */
  readonly depth: number;
}

/**
 * Checks `target` and computes its key and label.
 * @param where what it was passed to, for errors (e.g. `'pool.acquire()'`).
 * @throws InvalidOptionError naming the bad field (`via.method`, say) and what it must be.
 */
export function parseTarget(target: unknown, where: string): ParsedTarget {
  return parse(target, where, '', 1);
}

/**
 * The key and label of a target, without acquiring it: for naming targets
 * in progress displays and errors before (or without) connecting.
 * @throws InvalidOptionError when the target is malformed, naming the field.
 */
export function describeTarget(target: PoolTarget): { key: string; label: string } {
  const { key, label } = parseTarget(target, 'describeTarget()');
  return { key, label };
}

function parse(target: unknown, where: string, path: string, level: number): ParsedTarget {
  const option = (name: string) => `${path}${name}`;
  if (!isPlainObject(target)) {
    throw new InvalidOptionError(
      path ? path.slice(0, -1) : 'target',
      where,
      'a target object ({ method, ... })',
      target,
    );
  }
  const { method, via, ...options } = target as Record<string, unknown>;
  if (typeof method !== 'string' || !(POOL_METHODS as readonly string[]).includes(method)) {
    throw new InvalidOptionError(
      option('method'),
      where,
      `one of ${POOL_METHODS.map((m) => `'${m}'`).join(', ')}`,
      method,
    );
  }
  const name = text(options.name, option('name'), where, undefined);
  let parsedVia: ParsedTarget | Context | undefined;
  if (via instanceof Context) parsedVia = via;
  else if (via !== undefined) {
    if (!isPlainObject(via)) {
      throw new InvalidOptionError(option('via'), where, 'a target object or a Context', via);
    }
    if (level >= MAX_VIA_DEPTH) {
      throw new InvalidOptionError(option('via'), where, `a chain of at most ${MAX_VIA_DEPTH} targets`, via);
    }
    parsedVia = parse(via, where, option('via.'), level + 1);
  }
  const identity = identify(method as PoolMethod, options, where, path);
  const viaKey = parsedVia instanceof Context ? `#${parsedVia.id}` : parsedVia?.key;
  const key = JSON.stringify([
    method,
    identity.host,
    identity.port,
    identity.user,
    identity.jump,
    identity.detail,
    name,
    viaKey,
  ]);
  let label = identity.label;
  if (name !== undefined) label += ` name=${name}`;
  if (parsedVia instanceof Context) label += ` via context '${parsedVia.name}' (id ${parsedVia.id})`;
  else if (parsedVia) label += ` via ${parsedVia.label}`;
  const depth = 1 + (parsedVia instanceof Context || parsedVia === undefined ? 0 : parsedVia.depth);
  return { key, label, method: method as PoolMethod, options, via: parsedVia, depth };
}

/** The parts of a target that make it another connection, per method. */
interface Identity {
  host: string | null;
  port: number | null;
  user: string | null;
  /** ssh's and openssh's jump hosts, as a stable string. */
  jump: string | null;
  /** The other methods' options that say where (container, image, pod, path, argv...), as a stable string. */
  detail: string | null;
  label: string;
}

function identify(method: PoolMethod, options: Record<string, unknown>, where: string, path: string): Identity {
  const option = (name: string) => `${path}${name}`;
  switch (method) {
    case 'local':
      return { host: null, port: null, user: null, jump: null, detail: null, label: targetName(method, {}) };
    case 'ssh':
    case 'openssh': {
      const host = text(options.hostname, option('hostname'), where, undefined, 1024);
      if (host === undefined) {
        throw new InvalidOptionError(option('hostname'), where, 'a host name or address', undefined);
      }
      // The key is taken from the target as given, before any ssh config is read.
      const port = integer(options.port, option('port'), where, 22, 1, 65535);
      const user = text(options.username, option('username'), where, undefined) ?? null;
      const jump = jumpKey(options.proxyJump, option('proxyJump'), where);
      // Labelled as the context will be named: by what the target says (see targetName).
      const label = targetName(method, { hostname: host, port: options.port, username: user ?? undefined });
      return {
        host: host.toLowerCase(),
        port,
        user,
        jump,
        detail: null,
        label: `${label}${jump === null ? '' : ` (through ${jump})`}`,
      };
    }
    case 'sudo':
    case 'su':
    case 'doas': {
      const user = text(options.username, option('username'), where, 'root');
      return { host: null, port: null, user, jump: null, detail: null, label: targetName(method, { username: user }) };
    }
    default: {
      // The container methods and command: every option that says where (container, image, user,
      // pod, path, argv...) is part of the key, in a stable order; the method checks their values as it starts.
      const identity = Object.keys(options)
        .filter((key) => !NOT_IDENTITY.has(key))
        .sort()
        .map((key) => [key, options[key]]);
      return {
        host: null,
        port: null,
        user: null,
        jump: null,
        detail: JSON.stringify(identity),
        label: targetName(method, options),
      };
    }
  }
}

/** ssh's `proxyJump` (a string, or jump hosts), as a string that is equal for equal routes. */
function jumpKey(value: unknown, option: string, where: string): string | null {
  if (value === undefined) return null;
  if (typeof value === 'string') return text(value, option, where, undefined, 4096)?.toLowerCase() ?? null;
  if (!Array.isArray(value) || value.length === 0 || value.length > MAX_VIA_DEPTH || !value.every(isPlainObject)) {
    throw new InvalidOptionError(option, where, `a string or a list of 1 to ${MAX_VIA_DEPTH} jump hosts`, value);
  }
  return value
    .map((hop: Record<string, unknown>, i) => {
      const host = text(hop.hostname, `${option}[${i}].hostname`, where, undefined, 1024);
      if (host === undefined) throw new InvalidOptionError(`${option}[${i}].hostname`, where, 'a host name', undefined);
      const port = integer(hop.port, `${option}[${i}].port`, where, 22, 1, 65535);
      const user = text(hop.username, `${option}[${i}].username`, where, undefined);
      return `${user === undefined ? '' : `${user}@`}${host.toLowerCase()}:${port}`;
    })
    .join(',');
}

/** An object literal (or `Object.create(null)`), not an array, class instance or anything stranger. */
function isPlainObject(value: unknown): value is Record<string, unknown> {
  if (typeof value !== 'object' || value === null || Array.isArray(value)) return false;
  const prototype = Object.getPrototypeOf(value);
  return prototype === Object.prototype || prototype === null;
}
