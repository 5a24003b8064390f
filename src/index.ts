/**
 * tendril: start Node interpreters on other machines and accounts, and
 * call functions in them as if they were local.
 *
 * The package's whole surface, recorded in etc/tendril.api.md (checked by
 * the suite): the `Router` facade and what it hands out (as types: users
 * never construct a `Context`, `Receiver`, `Command`, `Fleet`...), the
 * classes users construct (`Channel`, `Select`, `ContextPool`), the error
 * classes, and option, result and event types. Code running inside a
 * context uses the `tendril/child` entry (src/child.ts).
 *
 * @packageDocumentation
 */

// First, before any dependency is evaluated: fails clearly when tendril was bundled.
import './master/installed.js';

export type * from './api/context-types.js';
export type { RouterEvents } from './api/router.js';
export { Router } from './api/router.js';
export type { CommonOptions } from './connection/bootstrap.js';
export type { CommandOptions } from './connection/command.js';
export type { BuildahOptions } from './connection/containers/buildah.js';
export type { ChrootOptions } from './connection/containers/chroot.js';
export type { DockerOptions, EngineOptions, PodmanOptions } from './connection/containers/engine.js';
export type { KubectlOptions } from './connection/containers/kubectl.js';
export type { LxcOptions } from './connection/containers/lxc.js';
export type { IncusOptions, LxdOptions } from './connection/containers/lxd.js';
export type { SetnsOptions, SetnsRuntime } from './connection/containers/setns.js';
export type { DoasOptions } from './connection/doas.js';
export {
  AuthenticationError,
  BootstrapError,
  ConnectionRefusedError,
  ConnectTimeoutError,
  ContainerNotFoundError,
  ContainerNotRunningError,
  HostKeyError,
  InterpreterError,
  NotAllowedError,
  PasswordError,
  ToolNotFoundError,
  UnknownHostError,
  UnknownUserError,
} from './connection/errors.js';
export type { LocalOptions } from './connection/local.js';
export type { ConnectionMethod, Transport } from './connection/method.js';
export type { OpensshOptions } from './connection/openssh.js';
export type { RuntimeStats, ShipNode, ShipProgress } from './connection/runtime-shipping.js';
export type { RuntimeArch } from './connection/runtime-types.js';
export type { HostKeyPolicy, SshJumpHost, SshOptions } from './connection/ssh.js';
export type { SuOptions } from './connection/su.js';
export type { SudoOptions } from './connection/sudo.js';
export type { ChildProcessHandle, ExitStatus } from './core/broker.js';
export type { ChannelOptions } from './core/channel.js';
export { Channel } from './core/channel.js';
export { serviceName } from './core/child-entry.js';
export type { DisconnectKind, RemoteErrorInfo, ServiceErrorCode, ServiceErrorDetails } from './core/errors.js';
export {
  CallError,
  CapturedVariableError,
  ChannelError,
  ContextDisconnectedError,
  DecodeError,
  HeldBytesError,
  InvalidOptionError,
  MessageTooLargeError,
  ModuleRequestError,
  ProtocolError,
  ServiceError,
  StreamError,
  TendrilError,
  TimeoutError,
  UnsupportedValueError,
} from './core/errors.js';
export type { HeartbeatOptions } from './core/heartbeat.js';
export { NativeModuleError } from './core/importer.js';
export type { LogRecord } from './core/log.js';
export { type PlaceProblem, type PlaceReason, UnsafePlaceError } from './core/private-directory.js';
export type { Receiver, ReceiverOptions } from './core/receiver.js';
export type { Selected } from './core/select.js';
export { Select } from './core/select.js';
export type { Sender, SenderOptions } from './core/sender.js';
export type { Policy, RouterWarning } from './core/switch.js';
export { escapeTerminalText, type TerminalTextOptions } from './core/terminal-text.js';
export type { HighWaterMark } from './core/window.js';
export type { RouterOptions, ViaOption } from './master/master-switch.js';
export type { ModuleFilter, ModuleVerdict } from './master/module-files.js';
export type { ResponderStats } from './master/module-responder.js';
export type { NodeRuntimeOptions } from './master/runtime-provider.js';
export type { Command, LinesFrom } from './toolkit/commands/command.js';
export { CommandError } from './toolkit/commands/errors.js';
export type { CommandTag } from './toolkit/commands/exec.js';
export type { CommandInput, ExecOptions, OutputLine, OutputStream } from './toolkit/commands/options.js';
export type { CommandResult } from './toolkit/commands/result.js';
export type { TemplateValue } from './toolkit/commands/template.js';
export type { Context } from './toolkit/context.js';
export { FileTransferError } from './toolkit/files/errors.js';
export type { TransferProgress } from './toolkit/files/progress.js';
export type { FileWriteStream, ReadStreamOptions, WriteStreamOptions } from './toolkit/files/streams.js';
export type { CopyOutcome, TransferOptions, TransferResult } from './toolkit/files/transfer.js';
export { FleetError } from './toolkit/fleet/errors.js';
export type {
  Fleet,
  FleetEvents,
  FleetFailureOutcome,
  FleetFunction,
  FleetOptions,
  FleetOutcome,
  FleetProgress,
  FleetStep,
  FleetSuccessOutcome,
} from './toolkit/fleet/fleet.js';
export type {
  FleetFailure,
  FleetFormatOptions,
  FleetSkip,
  FleetSuccess,
  FleetSummary,
} from './toolkit/fleet/summary.js';
export type { FleetTarget } from './toolkit/fleet/target.js';
export { type CommandJobResult, JobError, type JobErrorCode } from './toolkit/jobs/errors.js';
export type { Job, JobOutputLine, JobWaitOptions } from './toolkit/jobs/job.js';
export type { JobState, JobStatus } from './toolkit/jobs/protocol.js';
export type { CommandJobOptions, FunctionJobOptions, JobOptions } from './toolkit/jobs/start.js';
export { PoolError } from './toolkit/pool/errors.js';
export type { AcquireOptions, PoolLease, PoolOptions, PoolRouter, PoolStats } from './toolkit/pool/pool.js';
export { ContextPool } from './toolkit/pool/pool.js';
export type { PoolMethod, PoolTarget, PoolVia } from './toolkit/pool/target.js';
export { describeTarget } from './toolkit/pool/target.js';
export type {
  JoinListenerOptions,
  ListenerClient,
  ListenerClientAcquireOptions,
  ListenerClientEvents,
  ListenerClientLease,
  ListenerClientTarget,
} from './unix/client.js';
export { joinListener } from './unix/client.js';
export { ListenerError } from './unix/errors.js';
export type { Listener, ListenerEvents, ListenOptions, Peer } from './unix/listener.js';
