import { ServiceError } from './errors.js';
import type { Message } from './message.js';
import {
  CALL_SERVICE_SPEC,
  describeServiceCaller,
  type ServiceRequest,
  serviceErrorDetails,
} from './protocol/call-service.js';
import { serve } from './protocol/serve.js';
import type { MessageSwitch } from './switch.js';
import { CALL_SETTLED } from './symbols.js';

/**
 * Serves CALL_SERVICE in `router`'s context: hands each call to the
 * registry the services layer installed (`router.serviceDispatcher`), or
 * says there is no such service.
 */
export function serveServiceCalls(router: MessageSwitch): void {
  serve(router, CALL_SERVICE_SPEC, (request, message) => dispatchService(router, request, message), {
    // Senders and Channels passed to a service call end with it, as a call's do.
    onSettled: (message) => {
      for (const reference of message.references) (reference as { [CALL_SETTLED](): void })[CALL_SETTLED]();
    },
  });
}

/** Hands a service call to the registry, or says there is no such service. */
function dispatchService(router: MessageSwitch, request: ServiceRequest, message: Message): unknown {
  if (router.serviceDispatcher) return router.serviceDispatcher(request, message);
  const [service, method] = request;
  throw new ServiceError(
    'ERR_TENDRIL_SERVICE_UNKNOWN',
    `context '${router.name}' offers no service '${service}' (called by ${describeServiceCaller(router, message.src)}); no service is registered there`,
    serviceErrorDetails(router, service, method, message),
  );
}
