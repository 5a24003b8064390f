/**
 * Errors of starting a context: raised by the connection methods, which
 * load only in contexts that start children, so they are not part of every
 * child's core. They are registered with the core so that one raised in a
 * `via` context arrives in the master as its own class.
 */
import { registerRemoteErrors, TendrilError } from '../core/errors.js';
import { escapeTerminalText, KEEP_NEWLINES } from '../core/terminal-text.js';

/** Starting a child context failed before it reported itself ready. */
export class BootstrapError extends TendrilError {
  /** Name the new context would have had. */
  readonly contextName: string;
  /**
   * The last lines the child process wrote to its diagnostic output (a
   * login banner, the tool's complaint), as the message quotes them:
   * escaped for a terminal (`escapeTerminalText`, newlines kept), since the
   * target writes what it likes there (a title change, a cursor move).
   */
  readonly lastOutput: string;

  /**
   * @param contextName the name the context would have had.
   * @param what what went wrong.
   * @param lastOutput the last lines the child wrote, quoted in the message; undefined when no process ran.
   * @param code the stable `code`; subclasses pass their own.
   */
  constructor(contextName: string, what: string, lastOutput: string | undefined, code = 'ERR_TENDRIL_BOOTSTRAP') {
    const output = lastOutput === undefined ? '' : escapeTerminalText(lastOutput, KEEP_NEWLINES);
    // undefined: the failure happened before any process could write (authentication, host key, ...).
    const quoted =
      lastOutput === undefined
        ? ''
        : output.trim()
          ? `; its last output was:\n${indent(output.trim())}`
          : '; it wrote no output';
    super(`could not start context '${contextName}': ${what}${quoted}`, code);
    this.contextName = contextName;
    this.lastOutput = output;
  }
}

/** The child did not become ready within `connectTimeout`; it was killed and reaped. */
export class ConnectTimeoutError extends BootstrapError {
  /** The limit that passed, in milliseconds. */
  readonly timeoutMs: number;
  /**
   * What the connection was doing when time ran out, naming host and port
   * where there is one, e.g. `'SSH handshake with deploy@web1:22'`.
   */
  readonly step: string;

  /**
   * @param contextName the name the context would have had.
   * @param timeoutMs the limit that passed, in ms.
   * @param lastOutput the last lines the child wrote.
   * @param step what the connection was doing, e.g. `'authenticating as deploy to web1:22'`.
   * @param limit which limit passed; default `'connectTimeout'`.
   */
  constructor(contextName: string, timeoutMs: number, lastOutput: string, step = 'starting', limit = 'connectTimeout') {
    super(
      contextName,
      `not ready after ${timeoutMs} ms (${limit}) while ${step}, so it was stopped`,
      lastOutput,
      'ERR_TENDRIL_CONNECT_TIMEOUT',
    );
    this.timeoutMs = timeoutMs;
    this.step = step;
  }
}

/** A password was needed and was wrong, or was needed and not given. Raised as soon as it is known. */
export class PasswordError extends BootstrapError {
  /**
   * @param contextName the context that was being started.
   * @param what which password, for whom and where, and what went wrong.
   */
  constructor(contextName: string, what: string) {
    super(contextName, what, undefined, 'ERR_TENDRIL_PASSWORD');
  }
}

/** The account may not become the target user (not in sudoers, not permitted by doas.conf, requiretty). */
export class NotAllowedError extends BootstrapError {
  /**
   * @param contextName the context that was being started.
   * @param what who may not do what, where, and the remedy.
   * @param lastOutput what the tool printed.
   */
  constructor(contextName: string, what: string, lastOutput: string) {
    super(contextName, what, lastOutput, 'ERR_TENDRIL_NOT_ALLOWED');
  }
}

/** SSH authentication failed with every method tried. */
export class AuthenticationError extends BootstrapError {
  /** Methods tried, in order, e.g. `['publickey', 'password']`. */
  readonly methodsTried: string[];

  /**
   * @param contextName the context that was being started.
   * @param where `user@host:port`.
   * @param methodsTried methods offered to the server.
   */
  constructor(contextName: string, where: string, methodsTried: string[]) {
    super(
      contextName,
      `SSH authentication to ${where} failed; methods tried: ${methodsTried.join(', ') || 'none'}. Check the username, key (identityFile), passphrase, password or agent`,
      undefined,
      'ERR_TENDRIL_AUTHENTICATION',
    );
    this.methodsTried = methodsTried;
  }
}

/** The server's host key is unknown (under the `strict` policy), changed, or revoked. */
export class HostKeyError extends BootstrapError {
  /** SHA256 fingerprint of the key the server presented. */
  readonly presented: string;
  /** Fingerprints known for the host, if any. */
  readonly expected: string[];

  /**
   * @param contextName the context that was being started.
   * @param what what is wrong with the key, naming the host and the known_hosts file.
   * @param presented fingerprint presented.
   * @param expected fingerprints on record.
   */
  constructor(contextName: string, what: string, presented: string, expected: string[]) {
    super(contextName, what, undefined, 'ERR_TENDRIL_HOST_KEY');
    this.presented = presented;
    this.expected = expected;
  }
}

/** Nothing listens at the address (TCP connection refused). */
export class ConnectionRefusedError extends BootstrapError {
  /**
   * @param contextName the context that was being started.
   * @param where `host:port`.
   */
  constructor(contextName: string, where: string) {
    super(
      contextName,
      `connection to ${where} was refused: is the SSH server running and the port right?`,
      undefined,
      'ERR_TENDRIL_CONNECTION_REFUSED',
    );
  }
}

/** The host name does not resolve. */
export class UnknownHostError extends BootstrapError {
  /**
   * @param contextName the context that was being started.
   * @param host the name that did not resolve.
   */
  constructor(contextName: string, host: string) {
    super(
      contextName,
      `host name '${host}' does not resolve; check the spelling or ~/.ssh/config`,
      undefined,
      'ERR_TENDRIL_UNKNOWN_HOST',
    );
  }
}

/** No usable Node.js interpreter on the target: none found, or too old. */
export class InterpreterError extends BootstrapError {
  /**
   * @param contextName the context that was being started.
   * @param what what was tried where, quoted from the target.
   * @param lastOutput the target's output.
   */
  constructor(contextName: string, what: string, lastOutput: string) {
    super(contextName, what, lastOutput, 'ERR_TENDRIL_INTERPRETER');
  }
}

/**
 * The container, pod, chroot directory or process a container method was
 * pointed at does not exist where its tool looked (`docker exec` of an
 * unknown container, a pod kubectl cannot find, a missing chroot path).
 */
export class ContainerNotFoundError extends BootstrapError {
  /**
   * @param contextName the context that was being started.
   * @param what which target was not found, by which tool, on which machine.
   * @param lastOutput what the tool printed.
   */
  constructor(contextName: string, what: string, lastOutput: string) {
    super(contextName, what, lastOutput, 'ERR_TENDRIL_CONTAINER_NOT_FOUND');
  }
}

/** The container exists but is not running (stopped, paused, or still being created), so nothing can run in it. */
export class ContainerNotRunningError extends BootstrapError {
  /**
   * @param contextName the context that was being started.
   * @param what which container, by which tool, on which machine, and what to do.
   * @param lastOutput what the tool printed.
   */
  constructor(contextName: string, what: string, lastOutput: string) {
    super(contextName, what, lastOutput, 'ERR_TENDRIL_CONTAINER_NOT_RUNNING');
  }
}

/** The program a connection method runs (docker, kubectl, nsenter...) is not installed where it runs. */
export class ToolNotFoundError extends BootstrapError {
  /** The command that was not found, as it was run (e.g. `'docker'` or the `dockerPath` given). */
  readonly tool: string;

  /**
   * @param contextName the context that was being started.
   * @param tool the command that was not found.
   * @param where the machine (and account) it was looked for on.
   * @param install what provides it, e.g. `'the docker.io or docker-ce package'`.
   * @param option the option that names another path, e.g. `'dockerPath'`.
   */
  constructor(contextName: string, tool: string, where: string, install: string, option: string) {
    super(
      contextName,
      `'${tool}' was not found on ${where}: install ${install}, or give its path with the ${option} option`,
      undefined,
      'ERR_TENDRIL_TOOL_NOT_FOUND',
    );
    this.tool = tool;
  }
}

/** The account a container method was asked to run as does not exist in the container (its passwd file). */
export class UnknownUserError extends BootstrapError {
  /**
   * @param contextName the context that was being started.
   * @param what which user was not found in which container.
   * @param lastOutput what the tool printed.
   */
  constructor(contextName: string, what: string, lastOutput: string) {
    super(contextName, what, lastOutput, 'ERR_TENDRIL_UNKNOWN_USER');
  }
}

function indent(text: string): string {
  return text
    .split('\n')
    .map((line) => `  ${line}`)
    .join('\n');
}

registerRemoteErrors({
  BootstrapError,
  ConnectTimeoutError,
  PasswordError,
  NotAllowedError,
  AuthenticationError,
  HostKeyError,
  ConnectionRefusedError,
  UnknownHostError,
  InterpreterError,
  ContainerNotFoundError,
  ContainerNotRunningError,
  ToolNotFoundError,
  UnknownUserError,
});
