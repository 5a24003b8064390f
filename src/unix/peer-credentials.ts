import { spawn } from 'node:child_process';
import type { Socket } from 'node:net';

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

/**
 * The kernel's record of the process that connected `socket` (SO_PEERCRED,
 * Linux): unlike the socket file's mode, a peer cannot choose or forge it.
 * @throws Error when it cannot be read (no perl, or not Linux), saying so.
 */
export function peerCredentials(socket: Socket): Promise<PeerCredentials> {
  return new Promise((resolve, reject) => {
    let settled = false;
    const fail = (why: string) => {
      if (settled) return;
      settled = true;
      reject(new Error(`cannot read the peer's credentials (SO_PEERCRED): ${why}`));
    };
    let child: ReturnType<typeof spawn>;
    try {
      child = spawn('perl', ['-e', SCRIPT], { stdio: ['ignore', 'pipe', 'pipe', socket] });
    } catch (error) {
      fail((error as Error).message);
      return;
    }
    const timer = setTimeout(() => {
      child.kill('SIGKILL');
      fail(`perl did not answer within ${TIMEOUT} ms`);
    }, TIMEOUT);
    let out = '';
    let err = '';
    child.stdout?.setEncoding('utf8').on('data', (text: string) => {
      out += text;
    });
    child.stderr?.setEncoding('utf8').on('data', (text: string) => {
      err += text;
    });
    child.on('error', (error: NodeJS.ErrnoException) => {
      clearTimeout(timer);
      fail(
        error.code === 'ENOENT'
          ? 'perl is not installed (it reads them for tendril; on Debian it is the essential package perl-base)'
          : error.message,
      );
    });
    child.on('close', (code) => {
      clearTimeout(timer);
      const fields = /^(-?\d+) (\d+) (\d+)$/.exec(out.trim());
      if (code !== 0 || !fields) {
        fail(err.trim() || `perl exited with status ${code} and printed '${out.trim()}'`);
        return;
      }
      if (settled) return;
      settled = true;
      resolve({ pid: Number(fields[1]), uid: Number(fields[2]), gid: Number(fields[3]) });
    });
  });
}

/**
 * Resolves when peers' credentials can be read here (perl is installed and
 * knows SO_PEERCRED), so a listener fails as it opens rather than refusing
 * every process later.
 * @throws Error saying what is missing.
 */
export function checkPeerCredentials(): Promise<void> {
  return new Promise((resolve, reject) => {
    const child = spawn('perl', ['-MSocket', '-e', 'SO_PEERCRED(); print "ok"'], { stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '';
    let err = '';
    child.stdout.setEncoding('utf8').on('data', (text: string) => {
      out += text;
    });
    child.stderr.setEncoding('utf8').on('data', (text: string) => {
      err += text;
    });
    child.on('error', (error: NodeJS.ErrnoException) =>
      reject(
        new Error(
          error.code === 'ENOENT'
            ? "perl is not installed; the listener reads its peers' credentials (SO_PEERCRED) with it: install perl (on Debian, the essential package perl-base)"
            : `perl could not be run to read peers' credentials: ${error.message}`,
        ),
      ),
    );
    child.on('close', () => {
      if (out === 'ok') resolve();
      else
        reject(
          new Error(`this system cannot report a UNIX socket peer's credentials (SO_PEERCRED, Linux): ${err.trim()}`),
        );
    });
  });
}
