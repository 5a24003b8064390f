/**
 * The shape shared by every method that starts the child through a local
 * program which runs a command somewhere else and passes its stdio
 * through: `docker exec`, `kubectl exec -i`, `lxc-attach`, `nsenter`,
 * `chroot`, a user's `gcloud compute ssh`. Such a method only says which
 * argv to run, what to call the target, and how to read the program's
 * complaints; starting it, naming the context and telling "not installed"
 * from "no such container" are done here once.
 */
import { hostname, userInfo } from 'node:os';
import { BootstrapError, ToolNotFoundError } from './errors.js';
import { spawnTransport } from './local.js';
import type { ConnectionMethod, Session } from './method.js';
import { type NamedTarget, targetName } from './naming.js';

/** A complaint a tool prints on stderr, and the error it becomes. */
export interface ToolFailure {
  /** Matched against the tool's last output (at most the last 20 lines). */
  readonly pattern: RegExp;
  /**
   * The error for it.
   * @param contextName the context that was being started.
   * @param lastOutput what the tool printed.
   */
  error(contextName: string, lastOutput: string): BootstrapError;
}

/** What a tool-based method is made of (see `toolMethod`). */
export interface ToolMethodSpec<O> {
  /** Method name: the context name's prefix and how `via` names it. */
  readonly name: string;
  /** Every option it takes, the common ones included. */
  readonly optionNames: ReadonlySet<string>;
  /** Checks its own options' values (see `ConnectionMethod.checkOptions`). */
  checkOptions?(options: O, where: string): void;
  /** The program, as the options name it (e.g. `options.dockerPath ?? 'docker'`). */
  tool(options: O): string;
  /** The option that names the program's path, for the `ToolNotFoundError` remedy. */
  readonly toolOption: string;
  /** What provides the program, e.g. `'the podman package'`. */
  readonly install: string;
  /**
   * The program's arguments (the program itself is `tool(options)`): its
   * own, then `argv` (the shell wrapper, Node and the first stage). May
   * look things up first (setns finds the container's PID).
   * @throws BootstrapError (a subclass) when the lookup already shows the target cannot be reached.
   */
  command(options: O, argv: string[], session: Session, machine: string): string[] | Promise<string[]>;
  /** The complaints to recognise, most specific first. */
  failures(options: O, where: string): ToolFailure[];
  /**
   * The program's whole environment (the program is looked up in its
   * PATH): where a client finds its daemon added to the starting
   * context's, or a bare one that the target must not see the starting
   * context's variables through. Default: the starting context's.
   */
  environment?(options: O): NodeJS.ProcessEnv | undefined;
  /** What the attempt is doing while the program starts, for `ConnectTimeoutError`. */
  step(options: O, where: string): string;
  /** What runs, in errors about the process (`'<program> on <machine>'`). Default: the method's name, `'docker on web1'`. */
  program?(options: O): string;
  /** True when the program puts the child on this machine as this account (no Node code cache otherwise). */
  readonly sameMachine?: boolean;
  /** True when the stream to the child stays on this machine (see `ConnectionMethod.localStream`). Default false. */
  localStream?(options: O): boolean;
}

/**
 * A connection method that runs `spec.tool(options)` with
 * `spec.command(options, argv)` on the
 * machine of the context starting it. The new context is named
 * `<target>@<machine>` unless `name` is given; when the program ends before
 * the child is ready, its output is read for the complaints of
 * `spec.failures`, and a program that cannot be run at all is a
 * `ToolNotFoundError` naming the package that provides it.
 */
export function toolMethod<O extends NamedTarget>(spec: ToolMethodSpec<O>): ConnectionMethod<O> {
  return {
    name: spec.name,
    optionNames: spec.optionNames,
    ...(spec.checkOptions && { checkOptions: (options: O, where: string) => spec.checkOptions?.(options, where) }),
    ...(spec.sameMachine && { sameMachine: true }),
    ...(spec.localStream && { localStream: (options: O) => spec.localStream?.(options) === true }),
    // The target (a container, a chroot, a remote reached by a command) finds sh on its own PATH.
    shell: 'sh',
    defaultNode: () => undefined,
    async start(argv: string[], options: O, session: Session) {
      const machine = hostname();
      session.describe(`${targetName(spec.name, options)}@${machine}`);
      session.step = spec.step(options, machine);
      const tool = spec.tool(options);
      const env = spec.environment?.(options);
      const transport = spawnTransport(
        [tool, ...(await spec.command(options, argv, session, machine))],
        // The tool runs as this account: its environment, not the one for another (spawnTransport's default).
        { env: env ?? process.env },
        `${spec.program?.(options) ?? spec.name} on ${machine}`,
      );
      return {
        ...transport,
        explain(lastOutput: string, status: string) {
          // Node's spawn reports a program it cannot find as ENOENT, before the program could print anything.
          if (/could not be started: spawn .* ENOENT/.test(status)) {
            return new ToolNotFoundError(
              session.name,
              tool,
              `${machine} (as ${accountName()})`,
              spec.install,
              spec.toolOption,
            );
          }
          for (const failure of spec.failures(options, machine)) {
            if (failure.pattern.test(lastOutput)) return failure.error(session.name, lastOutput);
          }
          return undefined;
        },
      };
    },
  };
}

/** This process's account name, for messages; its uid where the passwd entry cannot be read. */
export function accountName(): string {
  try {
    return userInfo().username;
  } catch {
    return `uid ${process.getuid?.() ?? '?'}`;
  }
}

/** `BootstrapError`'s class for a complaint, so a failure list reads as a table. */
export type FailureClass = new (contextName: string, what: string, lastOutput: string) => BootstrapError;

/** A `ToolFailure` that raises `Class` with `what` when `pattern` matches. */
export function failure(pattern: RegExp, Class: FailureClass, what: string): ToolFailure {
  return { pattern, error: (contextName, lastOutput) => new Class(contextName, what, lastOutput) };
}

/** `BootstrapError` itself as a `FailureClass`: for complaints no more specific class fits. */
export const Bootstrap: FailureClass = BootstrapError;
