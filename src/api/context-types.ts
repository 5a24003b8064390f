/**
 * The types of calls and services, shared by both entries of the package:
 * the master's (`tendril`) and the one for code running in a context
 * (`tendril/child`). Types only: each entry re-exports them with
 * `export type *`.
 */
export type { CallExecOptions, CallExecResult } from '../core/call-exec.js';
export type { CallThis } from '../core/call-signal.js';
export type {
  CallOptions,
  ContextInfo,
  RemoteModule,
  ServiceCallOptions,
  ShutdownOptions,
} from '../core/context.js';
export type { ImporterStats } from '../core/importer.js';
export type { OperationOptions } from '../core/options.js';
export type {
  RemoteService,
  ServiceArgs,
  ServiceCaller,
  ServiceMethodOf,
  ServiceMethods,
  ServiceName,
  ServiceOf,
  ServiceOptions,
  ServicePolicy,
  ServiceResult,
} from '../core/services.js';
