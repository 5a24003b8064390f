import { spawn } from 'node:child_process';
import type { Socket } from 'node:net';
import { InvalidOptionError } from '../core/errors.js';

/** Who is at the other end of a UNIX socket, as the kernel recorded it when it connected. */
export interface PeerCredentials {
  /** Process ID of the peer. */
  pid: number;
  /** Its effective user ID. */
  uid: number;
  /** Its effective group ID. */
  gid: number;
}

/** How long the helper may take, in ms. */
const TIMEOUT = 10_000;

// Node has no getsockopt(); perl (perl-base, essential on Debian) reads
// SO_PEERCRED from the socket, handed to it as fd 3, in a few milliseconds.
const SCRIPT =
  'use Socket; open(my $s, "+<&=", 3) or die "fd 3: $!\\n"; ' +
  'my $c = getsockopt($s, SOL_SOCKET, SO_PEERCRED) or die "getsockopt SO_PEERCRED: $!\\n"; ' +
  'print join(" ", unpack("iII", $c))';

/** What a run of perl printed, and how it ended. */
interface PerlRun {
  code: number | null;
  out: string;
  err: string;
}

/**
 * Runs perl with `args`, `socket` (if any) as its fd 3, for at most
 * TIMEOUT ms.
 * @throws the spawn error (`code` 'ENOENT' when perl is missing), or an Error when it timed out.
 */
function runPerl(args: string[], socket?: Socket): Promise<PerlRun> {
  return new Promise((resolve, reject) => {
    const stdio: ('ignore' | 'pipe' | Socket)[] = ['ignore', 'pipe', 'pipe'];
    if (socket) stdio.push(socket);
    let child: ReturnType<typeof spawn>;
    try {
      child = spawn('perl', args, { stdio });
    } catch (error) {
      reject(error);
      return;
    }
    const timer = setTimeout(() => {
      child.kill('SIGKILL');
      reject(new Error(`perl did not answer within ${TIMEOUT} ms`));
    }, TIMEOUT);
    let out = '';
    let err = '';
    child.stdout?.setEncoding('utf8').on('data', (text: string) => {
      out += text;
    });
    child.stderr?.setEncoding('utf8').on('data', (text: string) => {
      err += text;
    });
    child.on('error', (error) => {
      clearTimeout(timer);
      reject(error);
    });
    child.on('close', (code) => {
      clearTimeout(timer);
      resolve({ code, out, err });
    });
  });
}

const isMissing = (error: unknown) => (error as NodeJS.ErrnoException).code === 'ENOENT';

/**
 * The kernel's record of the process that connected `socket` (SO_PEERCRED,
 * Linux): unlike the socket file's mode, a peer cannot choose or forge it.
 * @throws Error when it cannot be read (no perl, or not Linux), saying so.
 */
export async function peerCredentials(socket: Socket): Promise<PeerCredentials> {
  const fail = (why: string) => new Error(`cannot read the peer's credentials (SO_PEERCRED): ${why}`);
  let run: PerlRun;
  try {
    run = await runPerl(['-e', SCRIPT], socket);
  } catch (error) {
    throw fail(
      isMissing(error)
        ? 'perl is not installed (it reads them for tendril; on Debian it is the essential package perl-base)'
        : (error as Error).message,
    );
  }
  const fields = /^(-?\d+) (\d+) (\d+)$/.exec(run.out.trim());
  if (run.code !== 0 || !fields) {
    throw fail(run.err.trim() || `perl exited with status ${run.code} and printed '${run.out.trim()}'`);
  }
  return { pid: Number(fields[1]), uid: Number(fields[2]), gid: Number(fields[3]) };
}

/**
 * Resolves when peers' credentials can be read here (perl is installed and
 * knows SO_PEERCRED), so a listener fails as it opens rather than refusing
 * every process later.
 * @throws Error saying what is missing.
 */
export async function checkPeerCredentials(): Promise<void> {
  let run: PerlRun;
  try {
    run = await runPerl(['-MSocket', '-e', 'SO_PEERCRED(); print "ok"']);
  } catch (error) {
    throw new Error(
      isMissing(error)
        ? "perl is not installed; the listener reads its peers' credentials (SO_PEERCRED) with it: install perl (on Debian, the essential package perl-base)"
        : `perl could not be run to read peers' credentials: ${(error as Error).message}`,
    );
  }
  if (run.out !== 'ok') {
    throw new Error(
      `this system cannot report a UNIX socket peer's credentials (SO_PEERCRED, Linux): ${run.err.trim()}`,
    );
  }
}

/**
 * The `allowUids` option of the listener and of `connect()`: user IDs.
 * @throws InvalidOptionError when it is not an array of non-negative integers.
 */
export function userIds(value: unknown, where: string): number[] {
  if (value === undefined) return [];
  if (!Array.isArray(value) || !value.every((uid) => Number.isInteger(uid) && uid >= 0)) {
    throw new InvalidOptionError('allowUids', where, 'an array of user IDs', value);
  }
  return value as number[];
}
