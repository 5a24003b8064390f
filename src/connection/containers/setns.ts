/**
 * `setns`: a context inside a running container's namespaces, entered
 * with util-linux's nsenter (Node has no setns), without the runtime's
 * own exec: for a container whose runtime CLI is missing, broken or too
 * slow, or a process that is no container at all. Root only.
 */
import { execFile } from 'node:child_process';
import { closeSync, constants, fstatSync, openSync, readSync } from 'node:fs';
import { InvalidOptionError } from '../../core/errors.js';
import { integer, text } from '../../core/options.js';
import type { CommonOptions } from '../bootstrap.js';
import {
  BootstrapError,
  ContainerNotFoundError,
  ContainerNotRunningError,
  NotAllowedError,
  ToolNotFoundError,
  UnknownUserError,
} from '../errors.js';
import type { ConnectionMethod, Session } from '../method.js';
import { COMMON_OPTIONS, optionNames, strings } from '../method-options.js';
import { failure, toolMethod } from '../tool-method.js';
import { noShell, plainName } from './names.js';

/** The runtimes whose containers `setns` can find by name. */
export type SetnsRuntime = 'docker' | 'podman' | 'lxc';

/** Options of the `setns` method: `pid`, or `container` and `runtime`. */
export interface SetnsOptions extends CommonOptions {
  /** The process whose namespaces to enter (a container's leader). Exactly one of `pid` and `container`. */
  pid?: number;
  /** The container whose leader process to find with `runtime`. */
  container?: string;
  /** How to find the container's leader: `docker inspect`, `podman inspect` or `lxc-info`. Required with `container`. */
  runtime?: SetnsRuntime;
  /** The runtime's command. Default: `docker`, `podman` or `lxc-info`. */
  runtimePath?: string;
  /**
   * Arguments given to the runtime's command before its own (`inspect ...`,
   * `--name ...`): where its containers are, e.g. `['--root', dir]` for a
   * podman store, `['--host', socket]` for a docker daemon, `['--lxcpath',
   * dir]` for LXC. Default none.
   */
  runtimeArgs?: string[];
  /** The account to run as inside: a name (from the container's /etc/passwd) or a numeric uid. Default: root. */
  user?: string;
  /** The nsenter command. Default `'nsenter'` (util-linux), looked up in the PATH of a container (`/usr/local/sbin:...:/bin`). */
  nsenterPath?: string;
}

const RUNTIMES: readonly SetnsRuntime[] = ['docker', 'podman', 'lxc'];

/** The context's PATH inside: the one OCI runtimes and lxc-attach --clear-env give (also where nsenter is looked up). */
const CONTAINER_PATH = '/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin';

/** How long finding the leader may take at most, in ms, whatever is left of connectTimeout. */
const LOOKUP_LIMIT = 30_000;

function subject(options: SetnsOptions): string {
  return options.container === undefined
    ? `process ${options.pid}`
    : `${options.runtime} container '${options.container}'`;
}

/**
 * The leader process of the container, as its runtime reports it.
 * @throws ToolNotFoundError, ContainerNotFoundError, ContainerNotRunningError.
 */
async function leaderPid(options: SetnsOptions, session: Session, machine: string): Promise<number> {
  if (options.pid !== undefined) return options.pid;
  const runtime = options.runtime as SetnsRuntime;
  const container = options.container as string;
  const tool = options.runtimePath ?? (runtime === 'lxc' ? 'lxc-info' : runtime);
  const argv = [
    ...(options.runtimeArgs ?? []),
    ...(runtime === 'lxc'
      ? ['--name', container, '--pid', '--no-humanize']
      : ['inspect', '--format', '{{.State.Pid}}', container]),
  ];
  session.step = `finding the leader process of ${subject(options)} with ${tool} on ${machine}`;
  const { error, stdout, stderr } = await new Promise<{
    error: { code?: unknown } | null;
    stdout: string;
    stderr: string;
  }>((resolve) =>
    execFile(
      tool,
      argv,
      { timeout: Math.max(1, Math.min(LOOKUP_LIMIT, session.deadline - Date.now())), maxBuffer: 64 * 1024 },
      (failed, out, err) => resolve({ error: failed, stdout: String(out), stderr: String(err) }),
    ),
  );
  if (error?.code === 'ENOENT') {
    throw new ToolNotFoundError(
      session.name,
      tool,
      machine,
      `the ${runtime === 'lxc' ? 'lxc' : runtime} package`,
      'runtimePath',
    );
  }
  const output = `${stdout}${stderr}`.trim();
  if (error && /no such (object|container)|not known|doesn't exist|does not exist/i.test(output)) {
    throw new ContainerNotFoundError(session.name, `no ${subject(options)} on ${machine}`, output);
  }
  if (error) throw new BootstrapError(session.name, `${tool} could not tell the leader of ${subject(options)}`, output);
  const pid = Number(stdout.trim());
  if (!Number.isSafeInteger(pid) || pid <= 0) {
    throw new ContainerNotRunningError(session.name, `${subject(options)} on ${machine} is not running`, output);
  }
  return pid;
}

/** The most of a container's /etc/passwd read, in bytes. */
const PASSWD_LIMIT = 1024 * 1024;

/**
 * The container's /etc/passwd as the container sees it, or '' when it
 * cannot be read so. The container controls the file: read through
 * /proc/PID/root, a link in it (/etc, or /etc/passwd itself) would be
 * followed on this side, into this machine's files (a /dev/zero, a FIFO,
 * another passwd), so no link is followed, only a regular file is read,
 * and at most PASSWD_LIMIT bytes of it.
 */
function containerPasswd(pid: number): string {
  const { O_RDONLY, O_DIRECTORY, O_NOFOLLOW, O_NONBLOCK } = constants;
  const opened: number[] = [];
  try {
    const etc = openSync(`/proc/${pid}/root/etc`, O_RDONLY | O_DIRECTORY | O_NOFOLLOW);
    opened.push(etc);
    // Through the directory already opened: nothing can swap /etc for a link in between.
    const file = openSync(`/proc/self/fd/${etc}/passwd`, O_RDONLY | O_NOFOLLOW | O_NONBLOCK);
    opened.push(file);
    if (!fstatSync(file).isFile()) return '';
    const buffer = Buffer.alloc(PASSWD_LIMIT);
    let length = 0;
    for (let read = -1; read !== 0 && length < PASSWD_LIMIT; length += read) {
      read = readSync(file, buffer, length, PASSWD_LIMIT - length, length);
    }
    return buffer.subarray(0, length).toString('utf8');
  } catch {
    return '';
  } finally {
    for (const fd of opened) closeSync(fd);
  }
}

/**
 * `user` as nsenter's `-S uid -G gid`, read from the container's own
 * passwd file (see containerPasswd), whose numbers must be numbers.
 * @throws UnknownUserError when the container has no such account.
 */
function credentials(options: SetnsOptions, pid: number, session: Session, machine: string): string[] {
  const user = options.user;
  if (user === undefined) return [];
  const entry = containerPasswd(pid)
    .split('\n')
    .map((line) => line.split(':'))
    .find((fields) => fields.length >= 4 && (fields[0] === user || fields[2] === user));
  const [uid, gid] = [entry?.[2], entry?.[3]];
  if (uid !== undefined && gid !== undefined && /^\d{1,10}$/.test(uid) && /^\d{1,10}$/.test(gid)) {
    return ['-S', uid, '-G', gid];
  }
  // A numeric uid needs no entry (as `docker exec --user 1234` does not).
  if (/^\d{1,10}$/.test(user)) return ['-S', user, '-G', user];
  throw new UnknownUserError(
    session.name,
    `user '${user}' does not exist in ${subject(options)} on ${machine} (its /etc/passwd, a regular file, names no such account)`,
    '',
  );
}

/** `setns`: finds the leader PID, then runs `nsenter -t PID -m -u -i -n -p -r -w [-S uid -G gid] ...`. */
export const setns: ConnectionMethod<SetnsOptions> = toolMethod<SetnsOptions>({
  name: 'setns',
  optionNames: optionNames<SetnsOptions>({
    ...COMMON_OPTIONS,
    pid: true,
    container: true,
    runtime: true,
    runtimePath: true,
    runtimeArgs: true,
    user: true,
    nsenterPath: true,
  }),
  checkOptions(options, where) {
    const pid = integer(options.pid, 'pid', where, undefined, 1, 2 ** 22);
    if (options.container !== undefined) plainName(options.container, 'container', where, 'a running container');
    if ((pid === undefined) === (options.container === undefined)) {
      throw new InvalidOptionError('pid', where, 'exactly one of pid and container (with runtime)', options.pid);
    }
    if (options.container !== undefined && !RUNTIMES.includes(options.runtime as SetnsRuntime)) {
      throw new InvalidOptionError(
        'runtime',
        where,
        `one of ${RUNTIMES.join(', ')} (how to find the container)`,
        options.runtime,
      );
    }
    if (options.container === undefined && options.runtime !== undefined) {
      throw new InvalidOptionError('runtime', where, 'only given with container', options.runtime);
    }
    text(options.runtimePath, 'runtimePath', where, undefined, 4096);
    strings(options.runtimeArgs, 'runtimeArgs', where);
    if (options.container === undefined && options.runtimeArgs !== undefined) {
      throw new InvalidOptionError('runtimeArgs', where, 'only given with container', options.runtimeArgs);
    }
    text(options.user, 'user', where, undefined);
    text(options.nsenterPath, 'nsenterPath', where, undefined, 4096);
  },
  // The container sees none of the starting context's variables (secrets, HOME, ...), as lxc-attach
  // --clear-env; not the leader's either, which the container controls and nsenter would run with
  // on this side (LD_PRELOAD). Node finds HOME in the container's passwd.
  environment: () => ({ PATH: CONTAINER_PATH }),
  tool: (options) => options.nsenterPath ?? 'nsenter',
  toolOption: 'nsenterPath',
  // nsenter enters namespaces of this machine: the stream is a pipe.
  localStream: () => true,
  install: 'util-linux',
  async command(options, argv, session, machine) {
    // Entering another process's mount and PID namespaces takes CAP_SYS_ADMIN; say so before trying.
    if (process.getuid?.() !== 0) {
      throw new NotAllowedError(
        session.name,
        `setns enters namespaces with nsenter, which needs root on ${machine}: start the context via a sudo context`,
        '',
      );
    }
    const pid = await leaderPid(options, session, machine);
    session.step = `entering the namespaces of ${subject(options)} (pid ${pid}) with nsenter on ${machine}`;
    return [
      '-t',
      String(pid),
      '-m',
      '-u',
      '-i',
      '-n',
      '-p',
      '-r',
      '-w',
      ...credentials(options, pid, session, machine),
      '--',
      ...argv,
    ];
  },
  step: (options, machine) => `entering ${subject(options)} on ${machine}`,
  failures: (options, machine) => [
    failure(
      // "nsenter: cannot open /proc/PID/ns/ipc: No such file or directory": no such process (any more).
      // The path has no spaces: `[^:\s]*` stops where another message could start (`[^:]*` was quadratic).
      /cannot open \/proc\/\d+\/[^:\s]*: No such file or directory|No such process/,
      ContainerNotRunningError,
      `${subject(options)} on ${machine} is gone`,
    ),
    failure(
      /Operation not permitted|Permission denied/,
      NotAllowedError,
      `nsenter may not enter ${subject(options)} on ${machine}`,
    ),
    noShell(subject(options), machine),
  ],
});
