import type { ServiceErrorDetails } from '../errors.js';
import type { Message } from '../message.js';
import type { MessageSwitch, Policy } from '../switch.js';
import { MAX_NAME_LENGTH, string, tuple, Violation } from './check.js';
import { CALL_SERVICE_HANDLE } from './handles.js';
import type { HandleSpec } from './spec.js';

/** Request of CALL_TOOLKIT: the service's name, the method's name, and the arguments. */
export type ServiceRequest = [service: string, method: string, args: unknown[]];

/** Most arguments one service call may carry. */
export const MAX_SERVICE_ARGUMENTS = 1024;

/** Admits every message: each service applies its own policy to the caller. */
const admitAll: Policy = () => true;

/**
 * CALL_TOOLKIT: call a method of a service registered in this context and
 * reply with its result. The handle admits any context, so that a refusal
 * can be answered with an error naming the service and the caller; the
 * service's policy decides whether the method runs. Arguments and results
 * may carry Senders and Channels, closed when the call settles.
 */
export const CALL_SERVICE_SPEC: HandleSpec<ServiceRequest, unknown> = {
  handle: CALL_SERVICE_HANDLE,
  name: 'CALL_TOOLKIT',
  policy: () => admitAll,
  senders: true,
  replyName: 'return value',
  request(value) {
    const [service, method, args] = tuple(value, 'request', 3);
    string(service, 'service', MAX_NAME_LENGTH);
    string(method, 'method', MAX_NAME_LENGTH);
    if (!Array.isArray(args) || args.length > MAX_SERVICE_ARGUMENTS) {
      throw new Violation(`args: expected the arguments as an array of at most ${MAX_SERVICE_ARGUMENTS} items`);
    }
    return [service as string, method as string, args];
  },
};

/** The details of a `ServiceError` about the call `message` carried. */
export function serviceErrorDetails(
  router: MessageSwitch,
  service: string,
  method: string,
  message: Message,
): ServiceErrorDetails {
  return { service, method, contextName: router.name, caller: router.nameOf(message.src), callerId: message.src };
}

/** How a service error names the calling context: `context 'web1' (id 3)`, or `context 7` when this context knows no name for it. */
export function describeServiceCaller(router: MessageSwitch, contextId: number): string {
  const name = router.nameOf(contextId);
  return /^context \d+$/.test(name) ? name : `context '${name}' (id ${contextId})`;
}
