import { TendrilError } from './base.js';

/** Codes of `ServiceError`: what went wrong with a call to a service. */
export type ServiceErrorCode =
  | 'ERR_TENDRIL_SERVICE_UNKNOWN'
  | 'ERR_TENDRIL_SERVICE_METHOD'
  | 'ERR_TENDRIL_SERVICE_ARGUMENTS'
  | 'ERR_TENDRIL_SERVICE_REFUSED'
  | 'ERR_TENDRIL_SERVICE_BUSY';

/** Who a `ServiceError` is about: the service, the method, where it runs and who called. */
export interface ServiceErrorDetails {
  /** The service's name. */
  service: string;
  /** The method called. */
  method: string;
  /** Name of the context that offers (or lacks) the service. */
  contextName: string;
  /** Name of the calling context, as the serving context knows it. */
  caller: string;
  /** ID of the calling context. */
  callerId: number;
}

/**
 * A call to a service was not run: the context offers no such service
 * (`ERR_TENDRIL_SERVICE_UNKNOWN`), the service has no such method
 * (`ERR_TENDRIL_SERVICE_METHOD`), the service's `validate` rejected the
 * arguments (`ERR_TENDRIL_SERVICE_ARGUMENTS`), its policy does not admit
 * the caller (`ERR_TENDRIL_SERVICE_REFUSED`, "refused by policy"), or it
 * has as many calls waiting as it queues (`ERR_TENDRIL_SERVICE_BUSY`).
 * The service itself carries on. An error a method throws is not one of
 * these: it arrives as it does for `context.call()`.
 */
export class ServiceError extends TendrilError {
  /** One of the `ServiceErrorCode`s. */
  declare readonly code: ServiceErrorCode;
  /** The service's name. */
  readonly service: string;
  /** The method called. */
  readonly method: string;
  /** Name of the context that offers (or lacks) the service. */
  readonly contextName: string;
  /** Name of the calling context, as the serving context knows it. */
  readonly caller: string;
  /** ID of the calling context. */
  readonly callerId: number;

  /**
   * @param code what went wrong.
   * @param message the whole message, naming the service, the context and what to do.
   * @param details the service, method, context and caller.
   */
  constructor(code: ServiceErrorCode, message: string, details: ServiceErrorDetails) {
    super(message, code);
    this.service = details.service;
    this.method = details.method;
    this.contextName = details.contextName;
    this.caller = details.caller;
    this.callerId = details.callerId;
  }
}
