/**
 * Error classes thrown by tendril. Every error a caller can catch is one of
 * these, so programs can branch on `instanceof` rather than on message text.
 *
 * Messages name the context (and host where one is known), say what happened
 * and, where there is one, what to do about it.
 *
 * One module per kind under errors/: the base class and its brand, call
 * errors, delivery, limits, malformed input from a peer, options, values
 * that cannot be sent, services, module requests, and how an exception
 * travels to the caller and is rebuilt there (revival.ts).
 */

export { describeError, TendrilError, withoutStack } from './errors/base.js';
export { CallError, type RemoteErrorInfo, TimeoutError } from './errors/call.js';
export { ChannelError, ContextDisconnectedError, type DisconnectKind } from './errors/delivery.js';
export { HeldBytesError, MessageTooLargeError } from './errors/limits.js';
export { DecodeError, ProtocolError, StreamError } from './errors/malformed.js';
export { ModuleRequestError } from './errors/module-request.js';
export { InvalidOptionError } from './errors/options.js';
export { registerRemoteErrors, remoteError, toRemoteErrorInfo, withoutOwnFrames } from './errors/revival.js';
export { ServiceError, type ServiceErrorCode, type ServiceErrorDetails } from './errors/service.js';
export { CapturedVariableError, UnsupportedValueError } from './errors/values.js';
