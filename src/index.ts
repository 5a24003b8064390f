/**
 * tendril: start Node interpreters on other machines and accounts, and
 * call functions in them as if they were local.
 *
 * @packageDocumentation
 */

// First, before any dependency is evaluated: fails clearly when tendril was bundled.
import './master/installed.js';

export type { CommonOptions } from './connection/bootstrap.js';
export { DEFAULT_CONNECT_TIMEOUT } from './connection/bootstrap.js';
export type { DoasOptions } from './connection/doas.js';
export {
  AuthenticationError,
  BootstrapError,
  ConnectionRefusedError,
  ConnectTimeoutError,
  HostKeyError,
  InterpreterError,
  NotAllowedError,
  PasswordError,
  UnknownHostError,
} from './connection/errors.js';
export type { LocalOptions } from './connection/local.js';
export { local as localMethod } from './connection/local.js';
export type { ConnectionMethod, Transport } from './connection/method.js';
export type { OpensshOptions } from './connection/openssh.js';
export type { HostKeyPolicy, SshJumpHost, SshOptions } from './connection/ssh.js';
export type { SuOptions } from './connection/su.js';
export type { SudoOptions } from './connection/sudo.js';
export type { ChildProcessHandle, ExitStatus } from './core/broker.js';
export { Broker, DEFAULT_SHUTDOWN_GRACE } from './core/broker.js';
export type { ChannelOptions } from './core/channel.js';
export { Channel } from './core/channel.js';
export type { CallOptions, ContextInfo, RemoteModule, ShutdownOptions } from './core/context.js';
export { Context } from './core/context.js';
export type { RemoteErrorInfo } from './core/errors.js';
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
  StreamError,
  TendrilError,
  TimeoutError,
  UnsupportedValueError,
} from './core/errors.js';
export { DEFAULT_MAX_MESSAGE_SIZE } from './core/framing.js';
export type { ImporterStats } from './core/importer.js';
export { NativeModuleError } from './core/importer.js';
export type { LogRecord } from './core/log.js';
export { Message } from './core/message.js';
export type { ReceiverOptions } from './core/receiver.js';
export { Receiver } from './core/receiver.js';
export type { Selected } from './core/select.js';
export { Select } from './core/select.js';
export type { SenderOptions } from './core/sender.js';
export { Sender } from './core/sender.js';
export type { Policy, RequestOptions, RouterEvents, RouterWarning } from './core/switch.js';
export type { HighWaterMark } from './core/window.js';
export { DEFAULT_HIGH_WATER_MARK } from './core/window.js';
export type { ModuleFilter, ModuleVerdict } from './master/module-files.js';
export type { ResponderStats } from './master/module-responder.js';
export type { RouterOptions, ViaOption } from './master/router.js';
export { Router } from './master/router.js';
export * from './toolkit/commands/index.js';
export * from './toolkit/files/index.js';
export * from './toolkit/fleet/index.js';
export * from './toolkit/pool/index.js';
export * from './toolkit/services/index.js';
export * from './unix/index.js';
