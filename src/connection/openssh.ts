import { spawn } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { createServer, type Server } from 'node:net';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { milliseconds, text } from '../core/options.js';
import { temporaryDirectory } from '../core/private-directory.js';
import type { CommonOptions } from './bootstrap.js';
import {
  AuthenticationError,
  BootstrapError,
  ConnectionRefusedError,
  ConnectTimeoutError,
  HostKeyError,
  PasswordError,
  UnknownHostError,
} from './errors.js';
import type { ConnectionMethod, Transport } from './method.js';
import { COMMON_OPTIONS, optionNames, strings } from './method-options.js';
import { targetName } from './naming.js';
import { processHandle } from './process.js';
import { shellCommand } from './shell.js';
import { checkHostOptions, type HostKeyPolicy } from './ssh-options.js';

/** Options of the `openssh` connection method (the system `ssh` client). */
export interface OpensshOptions extends CommonOptions {
  /** Host name, address, or `Host` alias of the user's ssh config (all of it applies: ControlMaster, certificates, GSSAPI, FIDO keys...). */
  hostname: string;
  /** Port (`-p`). Default: ssh's choice. */
  port?: number;
  /** Remote account (`-l`). Default: ssh's choice. */
  username?: string;
  /** Private key (`-i`, with IdentitiesOnly). Default: ssh's choice. */
  identityFile?: string;
  /** Passphrase of that key, given to ssh through SSH_ASKPASS. */
  passphrase?: string;
  /** Password, given to ssh through SSH_ASKPASS. */
  password?: string;
  /** `strict` (default): StrictHostKeyChecking=yes; `accept-new`; `ignore`: no check, nothing recorded. */
  hostKeyPolicy?: HostKeyPolicy;
  /** UserKnownHostsFile. Default: ssh's. */
  knownHostsFile?: string;
  /** Jump hosts (`-J`). */
  proxyJump?: string;
  /** Milliseconds between keepalive probes (ServerAliveInterval, rounded up to seconds); 3 unanswered end it. Default 15000. */
  keepaliveInterval?: number;
  /** Further ssh arguments, before the host (e.g. `['-o', 'ControlPath=...']`). */
  sshArgs?: string[];
  /** The ssh command. Default `'ssh'`. */
  sshPath?: string;
}

/** The options of `router.openssh()`. */
const OPENSSH_OPTION_NAMES = optionNames<OpensshOptions>({
  ...COMMON_OPTIONS,
  hostname: true,
  port: true,
  username: true,
  identityFile: true,
  passphrase: true,
  password: true,
  hostKeyPolicy: true,
  knownHostsFile: true,
  proxyJump: true,
  keepaliveInterval: true,
  sshArgs: true,
  sshPath: true,
});

/** The askpass helper shipped with tendril, or undefined where tendril is not installed (a child reached by `via`). */
function askpassHelper(): string | undefined {
  try {
    const path = fileURLToPath(new URL('./bootstrap/askpass.sh', import.meta.url));
    return existsSync(path) ? path : undefined;
  } catch {
    return undefined;
  }
}

/**
 * `openssh`: like `ssh`, but through the system OpenSSH client, for setups
 * only it supports. No terminal is allocated (`-T`): the stream is the
 * session's stdin and stdout. A password or passphrase reaches ssh through
 * an SSH_ASKPASS helper that fetches it from a one-time socket of this
 * process, so it is never on a command line.
 */
export const openssh: ConnectionMethod<OpensshOptions> = {
  name: 'openssh',
  optionNames: OPENSSH_OPTION_NAMES,
  checkOptions(options, where) {
    checkHostOptions(options, OPENSSH_OPTION_NAMES, where);
    text(options.proxyJump, 'proxyJump', where, undefined, 4096);
    milliseconds(options.keepaliveInterval, 'keepaliveInterval', where, undefined);
    strings(options.sshArgs, 'sshArgs', where);
    text(options.sshPath, 'sshPath', where, undefined, 4096);
  },
  defaultNode: () => undefined,
  async start(argv, options, session): Promise<Transport> {
    const policy = options.hostKeyPolicy ?? 'strict';
    const name = targetName('openssh', options);
    const target = name.slice('openssh:'.length);
    session.describe(name);
    session.step = `connecting with ssh to ${options.hostname}`;
    const secrets = options.password !== undefined || options.passphrase !== undefined;
    const remaining = Math.max(1, Math.ceil((session.deadline - Date.now()) / 1000));
    const keepalive = Math.ceil(
      milliseconds(options.keepaliveInterval, 'keepaliveInterval', 'router.openssh()', 15_000) / 1000,
    );
    const args = [
      '-T',
      '-o',
      `BatchMode=${secrets ? 'no' : 'yes'}`,
      '-o',
      `StrictHostKeyChecking=${policy === 'strict' ? 'yes' : policy === 'accept-new' ? 'accept-new' : 'no'}`,
      ...(policy === 'ignore'
        ? ['-o', 'UserKnownHostsFile=/dev/null']
        : options.knownHostsFile
          ? ['-o', `UserKnownHostsFile=${options.knownHostsFile}`]
          : []),
      '-o',
      `ConnectTimeout=${remaining}`,
      ...(keepalive > 0 ? ['-o', `ServerAliveInterval=${keepalive}`, '-o', 'ServerAliveCountMax=3'] : []),
      ...(options.port !== undefined ? ['-p', String(options.port)] : []),
      ...(options.username !== undefined ? ['-l', options.username] : []),
      ...(options.identityFile !== undefined ? ['-i', options.identityFile, '-o', 'IdentitiesOnly=yes'] : []),
      ...(options.password === undefined ? ['-o', 'PasswordAuthentication=no'] : []),
      ...(options.proxyJump !== undefined ? ['-J', options.proxyJump] : []),
      ...(options.sshArgs ?? []),
      options.hostname,
      shellCommand(argv),
    ];
    const env: NodeJS.ProcessEnv = { ...process.env };
    let askpass: Askpass | undefined;
    if (secrets) {
      const helper = askpassHelper();
      if (!helper) {
        throw new BootstrapError(
          session.name,
          'openssh with a password or passphrase needs tendril installed where ssh runs (for its askpass helper); from a via context, use key or agent authentication, or the ssh method',
          undefined,
        );
      }
      askpass = await startAskpass(options.password, options.passphrase);
      Object.assign(env, {
        SSH_ASKPASS: helper,
        SSH_ASKPASS_REQUIRE: 'force',
        DISPLAY: env.DISPLAY ?? ':0',
        TENDRIL_ASKPASS_NODE: process.execPath,
        TENDRIL_ASKPASS_SOCKET: askpass.path,
      });
    }
    const child = spawn(options.sshPath ?? 'ssh', args, { stdio: ['pipe', 'pipe', 'pipe'], env });
    const handle = processHandle(child);
    void handle.exited.then(() => askpass?.close());
    const { stdin, stdout, stderr } = child;
    if (!stdin || !stdout || !stderr) throw new Error('spawn returned no stdio pipes');
    const where = `openssh ${target}`;
    return {
      stdin,
      stdout,
      stderr,
      process: handle,
      where,
      explain: (output) => explain(output, session.name, options, askpass, remaining * 1000),
    };
  },
};

function explain(
  output: string,
  name: string,
  options: OpensshOptions,
  askpass: Askpass | undefined,
  timeoutMs: number,
): BootstrapError | undefined {
  const where = `${options.hostname}${options.port ? `:${options.port}` : ''}`;
  if (/Connection refused/i.test(output)) return new ConnectionRefusedError(name, where);
  if (/Could not resolve hostname|Name or service not known/i.test(output))
    return new UnknownHostError(name, options.hostname);
  if (/Connection timed out|Operation timed out|timed out during banner/i.test(output)) {
    const step = /banner/i.test(output) ? `the SSH handshake with ${where}` : `connecting to ${where}`;
    return new ConnectTimeoutError(name, timeoutMs, output, step, "ssh's ConnectTimeout");
  }
  if (/Host key verification failed|REMOTE HOST IDENTIFICATION HAS CHANGED|No \S+ host key is known/i.test(output)) {
    const presented = /(SHA256:[\w+/]+)/.exec(output)?.[1] ?? 'unknown';
    return new HostKeyError(
      name,
      `ssh refused the host key of ${where}: ${output.trim().split('\n').pop()}`,
      presented,
      [],
    );
  }
  if (askpass?.asked.passphrase && askpass.asked.passphrase > 1) {
    return new PasswordError(name, `the passphrase for ${options.identityFile ?? 'the private key'} is wrong`);
  }
  // Not past a newline or another "(": each run is scanned from one start (`[^)]*` was quadratic).
  const denied = /Permission denied \(([^()\n]*)\)/.exec(output);
  if (denied) {
    if (askpass?.asked.password && askpass.asked.password > 1) {
      return new PasswordError(name, `wrong password for ${options.username ?? 'the account'} on ${where}`);
    }
    return new AuthenticationError(name, where, (denied[1] as string).split(','));
  }
  return undefined;
}

interface Askpass {
  path: string;
  asked: { password: number; passphrase: number };
  close(): void;
}

/** Most characters of an askpass prompt kept, to tell a passphrase prompt from a password prompt. */
const MAX_ASKPASS_PROMPT = 4096;

/**
 * A one-time socket in a private directory that answers ssh's askpass
 * prompts with the secret asked for. The directory is made where no other
 * account can swap it (core/private-directory.ts): one that could would
 * put its own socket in its place and answer ssh's questions itself
 * (a host key's confirmation among them).
 * @throws UnsafePlaceError when no temporary directory will do.
 */
function startAskpass(password: string | undefined, passphrase: string | undefined): Promise<Askpass> {
  const dir = mkdtempSync(join(temporaryDirectory("the openssh method's askpass directory"), 'tendril-askpass-'));
  const path = join(dir, 'socket');
  const asked = { password: 0, passphrase: 0 };
  const server: Server = createServer((socket) => {
    let prompt = '';
    socket.on('data', (chunk) => {
      // ssh's prompt can carry the server's keyboard-interactive text: its start is all that is needed.
      if (prompt.length < MAX_ASKPASS_PROMPT) prompt += chunk.toString();
    });
    socket.on('end', () => {
      const kind = /passphrase/i.test(prompt) ? 'passphrase' : 'password';
      asked[kind]++;
      const secret = kind === 'passphrase' ? passphrase : password;
      // Answered once: asked again means it was wrong, and an empty answer ends ssh's retries.
      socket.end(asked[kind] === 1 && secret !== undefined ? `${secret}\n` : '\n');
    });
  });
  return new Promise((resolve, reject) => {
    server.once('error', reject);
    server.listen(path, () => {
      server.unref();
      resolve({
        path,
        asked,
        close: () => {
          server.close();
          rmSync(dir, { recursive: true, force: true });
        },
      });
    });
  });
}
