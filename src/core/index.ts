/**
 * Everything in the core, as one namespace: what tendril modules loaded in
 * a child receive for `tendril:core` (the bundle shipped to children is
 * bundle.ts: this and the child's `boot`), so export names must be unique
 * across files.
 */
export * from './broker.js';
export * from './call-base.js';
export * from './call-exec.js';
export * from './call-preparation.js';
export * from './call-signal.js';
export * from './channel.js';
export * from './child-entry.js';
export * from './code-cache.js';
export * from './codec.js';
export * from './context.js';
export * from './context-tmpdir.js';
export * from './dead-replies.js';
export * from './dispatcher.js';
export * from './errors.js';
export * from './event-loop-holds.js';
export * from './framing.js';
export * from './function-source.js';
export * from './handler-table.js';
export * from './heartbeat.js';
export * from './holdings.js';
export * from './ids.js';
export * from './importer.js';
export type { JobProcess } from './job-process.js';
export * from './log.js';
export * from './message.js';
export * from './options.js';
export * from './own-copy.js';
export * from './policy.js';
export * from './pressure.js';
export * from './private-directory.js';
export * from './process-group.js';
export * from './process-state.js';
export * from './protocol/allocate-id.js';
export * from './protocol/boot.js';
export * from './protocol/call-function.js';
export * from './protocol/call-service.js';
// Only what modules loaded after the core need: `integer` and `string` would clash with options.ts.
export { record, Violation } from './protocol/check.js';
export * from './protocol/connect.js';
export * from './protocol/envelope.js';
export * from './protocol/forward-log.js';
export * from './protocol/get-module.js';
export * from './protocol/handles.js';
export * from './protocol/module-stats.js';
export * from './protocol/ping.js';
export * from './protocol/route-pressure.js';
export * from './protocol/routes.js';
export * from './protocol/serve.js';
export * from './protocol/shutdown.js';
export * from './protocol/spec.js';
export * from './protocol/stop-child.js';
export * from './receive-window.js';
export * from './receiver.js';
export * from './regular-file.js';
export * from './runtime.js';
export * from './select.js';
export * from './send-window.js';
export * from './sender.js';
export * from './service-dispatch.js';
export * from './services.js';
export * from './shares.js';
export * from './stream.js';
export * from './switch.js';
export * from './symbols.js';
// The ownership rule of the caches kept on targets, for the runtime cache of the connection layer.
export { closed, ownedAlone } from './target-code-cache.js';
export * from './terminal-text.js';
export * from './trust.js';
export * from './warnings.js';
export * from './window.js';
