/**
 * The remote half of `context.copy()`, `fetch()`, the file streams and
 * `router.copy()`: loaded in a child as part of `tendril:toolkit`, and
 * called by the master through `Context[CALL_TOOLKIT]` with a Channel end.
 */
import type { Channel } from '../../core/channel.js';
import { contextRuntime } from '../../core/runtime.js';
import { type FanOutOptions, type Outcome, type TargetRef, teeToChildren } from './fan-out.js';
import { channelOutput, type TransferCounts, type Value } from './protocol.js';
import { sendPath } from './send.js';
import { receiveInto, type SinkOptions } from './sink.js';

/** Options the master passes to a receiving side (see `SinkOptions`). */
export interface RemoteSinkOptions {
  /** Apply the owner and group the entries carry (when the receiving process is root). Only `true` counts. */
  owner?: boolean;
  /** Permission bits for a single file, instead of the source's; ignored unless an integer from 0 to 0o7777. */
  mode?: number;
}

function sinkOptions(options: RemoteSinkOptions | undefined): SinkOptions {
  const owner = options?.owner === true;
  const mode = options?.mode;
  return typeof mode === 'number' && Number.isInteger(mode) && mode >= 0 && mode <= 0o7777
    ? { owner, mode }
    : { owner };
}

/** Receives a transfer on `channel` and writes it at `target` in this context. */
export function filesReceive(
  channel: Channel<unknown, Value>,
  target: string,
  options?: RemoteSinkOptions,
): Promise<TransferCounts> {
  const { router } = contextRuntime();
  return receiveInto(channel[Symbol.asyncIterator](), String(target), router.name, sinkOptions(options));
}

/** Sends the file, tree or symlink at `source` in this context on `channel`; a directory only when `recursive` is not false. */
export function filesSend(
  channel: Channel<Value, unknown>,
  source: string,
  options?: { owner?: boolean; recursive?: boolean },
): Promise<void> {
  const { router } = contextRuntime();
  return sendPath(String(source), channelOutput(channel), router.name, {
    owner: options?.owner === true,
    recursive: options?.recursive !== false,
  });
}

/** Receives a transfer on `channel` and copies it to each of this context's children in `targets`, failing alone one that stalls past `fanOut.stallTimeout`. */
export function filesFanOut(
  channel: Channel<unknown, unknown>,
  targets: TargetRef[],
  target: string,
  options?: RemoteSinkOptions,
  fanOut?: FanOutOptions,
): Promise<Outcome[]> {
  const { router } = contextRuntime();
  if (!Array.isArray(targets) || targets.length > 10_000) throw new TypeError('targets must be a list of contexts');
  const refs = targets.map((t) => ({ id: Number(t?.id), name: String(t?.name) }));
  const stallTimeout = fanOut?.stallTimeout;
  const checked: FanOutOptions =
    typeof stallTimeout === 'number' && stallTimeout > 0 && stallTimeout <= 2_147_483_647 ? { stallTimeout } : {};
  return teeToChildren(router, channel, refs, String(target), sinkOptions(options), checked);
}
