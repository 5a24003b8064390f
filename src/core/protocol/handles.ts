/**
 * Standard handles: small fixed numbers every context listens on, like
 * well-known ports. Each is defined, with its policy and the shapes of its
 * request and reply, in a file of this folder. Dynamic handles (reply
 * receivers, user channels) are drawn from `FIRST_DYNAMIC_HANDLE` upwards.
 */

/** Run a shipped function and reply with its result. Parent authority only. */
export const CALL_FUNCTION = 1;
/** Shut this context down gracefully. Parent authority only. */
export const SHUTDOWN = 2;
/** A descendant became reachable through the stream this arrived on. */
export const ADD_ROUTE = 3;
/** A descendant is no longer reachable. */
export const DEL_ROUTE = 4;
/** (Master) allocate a block of context IDs to the requester. */
export const ALLOCATE_ID = 5;
/** (Master) log records from a descendant's children. */
export const FORWARD_LOG = 6;
/** (Parent) send the source of a module this context lacks. */
export const GET_MODULE = 7;
/** First message to a new child: its configuration. The reply says it is ready. */
export const BOOT = 8;
/** Start a child context from this one (the `via` option). Parent authority only. */
export const CONNECT = 9;
/** Stop a child of this context: graceful, then SIGTERM, then SIGKILL. Parent authority only. */
export const STOP_CHILD = 10;

/** Report this context's module forwarding counters. Parent authority only. */
export const MODULE_STATS = 11;
/** The stream toward a descendant is backed up, or drained: hold or resume calls to it. From a child only. */
export const ROUTE_PRESSURE = 12;
/**
 * Call a method of a service registered in this context. Every context may
 * send; the service's own policy decides (see call-service.ts). Named
 * `CALL_TOOLKIT` in logs and errors; the constant has a longer name because
 * `CALL_TOOLKIT` is already the key of `Context`'s internal services call.
 */
export const CALL_SERVICE_HANDLE = 13;

/**
 * (Parent) describe the Node runtime to ship for an architecture, and send
 * its bytes when asked. From a child stream only (see
 * connection/runtime-protocol.ts).
 */
export const NODE_RUNTIME = 14;

/** Stop a call this context is running: abort its signal. From the caller only, with parent authority. */
export const CANCEL_CALL = 15;

/**
 * A heartbeat on one stream: a ping (reply-to HEARTBEAT, asking for an
 * answer) or its pong (reply-to 0), a header with no payload. Taken off
 * the stream by the stream itself and never routed (see heartbeat.ts).
 */
export const HEARTBEAT = 16;

/** Answer at once with null: `context.ping()` measures the round trip through the chain. Parent authority only. */
export const PING = 17;

/** Lowest handle number handed out for receivers. */
export const FIRST_DYNAMIC_HANDLE = 1000;

/** Human-readable names for logs. */
export const HANDLE_NAMES: Readonly<Record<number, string>> = {
  [CALL_FUNCTION]: 'CALL_FUNCTION',
  [SHUTDOWN]: 'SHUTDOWN',
  [ADD_ROUTE]: 'ADD_ROUTE',
  [DEL_ROUTE]: 'DEL_ROUTE',
  [ALLOCATE_ID]: 'ALLOCATE_ID',
  [FORWARD_LOG]: 'FORWARD_LOG',
  [GET_MODULE]: 'GET_MODULE',
  [BOOT]: 'BOOT',
  [CONNECT]: 'CONNECT',
  [STOP_CHILD]: 'STOP_CHILD',
  [MODULE_STATS]: 'MODULE_STATS',
  [ROUTE_PRESSURE]: 'ROUTE_PRESSURE',
  [CALL_SERVICE_HANDLE]: 'CALL_TOOLKIT',
  [NODE_RUNTIME]: 'NODE_RUNTIME',
  [CANCEL_CALL]: 'CANCEL_CALL',
  [HEARTBEAT]: 'HEARTBEAT',
  [PING]: 'PING',
};
