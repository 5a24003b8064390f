/**
 * Internals the test suite and the benchmarks reach past the public API
 * (`#dist/internal.js`). Not exported by the package: it is a second entry
 * of the same bundle as `index.ts`, so the classes and tables here are the
 * very ones behind the public API, never a second copy.
 *
 * @internal
 * @packageDocumentation
 */

// First, as in index.ts: shared by both entries, the check leads the chunk they share.
import './master/installed.js';

export { becomeEnvironment } from './connection/become-environment.js';
export { DEFAULT_CONNECT_TIMEOUT } from './connection/bootstrap.js';
export {
  fingerprint,
  hashHostName,
  hostKeyName,
  hostsMatch,
  parseKnownHosts,
  readKnownHosts,
  recordHostKey,
  verifyHostKey,
  verifyHostKeyAs,
} from './connection/known-hosts.js';
export { local as localMethod } from './connection/local.js';
export { PASSWORD_PROMPT } from './connection/prompts.js';
export { admitRuntimeRequests, restrictRuntimeRequests } from './connection/runtime-service.js';
export { parseShipRequest, shippableArch } from './connection/runtime-shipping.js';
export { bootstrapArgv } from './connection/shell.js';
export { FIND_FUNCTIONS, PLACES_FUNCTIONS, PLACES_PRELUDE } from './connection/shell-places.js';
export {
  type JumpHost,
  MAX_JUMP_HOPS,
  parseProxyJump,
  type ResolvedHost,
  resolveChain,
  resolveHost,
} from './connection/ssh-config/index.js';
export { Broker, DEFAULT_SHUTDOWN_GRACE } from './core/broker.js';
export { decode, encode, MAX_BIGINT_BYTES, MAX_DEPTH, MAX_OBJECTS } from './core/codec.js';
export { CALL_TOOLKIT } from './core/context.js';
export { remoteError, toRemoteErrorInfo } from './core/errors.js';
export { DEFAULT_MAX_MESSAGE_SIZE, encodeFrame, FrameDecoder } from './core/framing.js';
export { compileFunction } from './core/function-source.js';
export { Heartbeat, heartbeatSettings } from './core/heartbeat.js';
export { ITEM_OVERHEAD } from './core/holdings.js';
export { IdPool } from './core/ids.js';
export { distrustInheritedPlaces } from './core/inherited-environment.js';
export { FLAG_DEAD, HEADER_SIZE, Message } from './core/message.js';
export { MAX_SPECS_PER_REQUEST, MAX_WAITING_MODULE_REQUESTS } from './core/module-protocol.js';
export { checkPlace, privateDirectory, temporaryDirectory } from './core/private-directory.js';
export { ALLOCATE_ID_SPEC } from './core/protocol/allocate-id.js';
export { CALL_FUNCTION_SPEC } from './core/protocol/call-function.js';
export { integer } from './core/protocol/check.js';
export { CONNECT_SPEC } from './core/protocol/connect.js';
export * from './core/protocol/handles.js';
export { ask, serve } from './core/protocol/serve.js';
export type { HandleSpec } from './core/protocol/spec.js';
export { Receiver } from './core/receiver.js';
export { Sender } from './core/sender.js';
export { Stream } from './core/stream.js';
export { MessageSwitch, ROUTER_SWITCH, type RouterWarning } from './core/switch.js';
export { SEND_BYTES } from './core/symbols.js';
export { DEFAULT_HIGH_WATER_MARK } from './core/window.js';
export { IdAllocator, SUBTREE_ID_QUOTA } from './master/id-allocator.js';
export { renameDynamicImports } from './master/module-source.js';
export { RUNTIME_ARCHES, RuntimeFetchError, RuntimeStore } from './master/runtime-store.js';
export { Context } from './toolkit/context.js';
export { receiveInto, type SinkOptions } from './toolkit/files/sink.js';
export { fetchedFrom } from './toolkit/files/transfer.js';
export { DEFAULT_FLEET_CONCURRENCY, MAX_FLEET_CONCURRENCY } from './toolkit/fleet/fleet.js';
export { Job } from './toolkit/jobs/job.js';
export { DEFAULT_MAX_CONNECTING, DEFAULT_MAX_CONTEXTS } from './toolkit/pool/pool.js';
export { MAX_VIA_DEPTH, POOL_METHODS } from './toolkit/pool/target.js';
export {
  DEFAULT_SERVICE_CONCURRENCY,
  DEFAULT_SERVICE_MAX_QUEUED,
  DEFAULT_SERVICE_MAX_QUEUED_BYTES,
} from './toolkit/services/registry.js';
export { Listener } from './unix/listener.js';
