import { escapeTerminalText, KEEP_NEWLINES } from '../terminal-text.js';
import { TendrilError } from './base.js';

/**
 * A message could not reach its destination, or the context a reply was
 * awaited from went away (it was shut down, killed, or an intermediate
 * context on the path to it died). Pending calls to that context reject with
 * this error instead of hanging.
 */
export class ChannelError extends TendrilError {
  /** Name of the context that could not be reached, when known. */
  readonly contextName: string;
  /** ID of the context that could not be reached. */
  readonly contextId: number;
  /**
   * Why delivery failed, e.g. `'no route to context 7'`; escaped for a
   * terminal (`escapeTerminalText`), as the message is: it may quote what
   * an intermediate said of a context it lost.
   */
  readonly reason: string;

  /**
   * @param contextName the unreachable context's name.
   * @param contextId its ID.
   * @param reason why delivery failed.
   * @param code the stable `code`; subclasses pass their own.
   */
  constructor(contextName: string, contextId: number, reason: string, code = 'ERR_TENDRIL_CHANNEL') {
    super(`context '${contextName}' (id ${contextId}) is unreachable: ${reason}`, code);
    this.contextName = contextName;
    this.contextId = contextId;
    this.reason = escapeTerminalText(reason, KEEP_NEWLINES);
  }
}

/**
 * Why a context went away, in one word: `'heartbeat'` (nothing was heard
 * on the stream toward it for the heartbeat's timeout: a frozen process,
 * a silent link), `'process exited'` (the process behind the stream
 * ended), `'stream ended'` (the stream closed or broke: end of input, a
 * write error, a malformed frame), `'shutdown'` (it was stopped on purpose).
 */
export type DisconnectKind = 'heartbeat' | 'process exited' | 'stream ended' | 'shutdown';

/** The context was disconnected: its stream closed, its process died, its heartbeat stopped, or it was shut down. */
export class ContextDisconnectedError extends ChannelError {
  /** Why, in one word (see `DisconnectKind`); `reason` says it in full and names the hop. */
  readonly kind: DisconnectKind;

  /**
   * @param contextName the context that went away.
   * @param contextId its ID.
   * @param reason why, e.g. `'no answer for 30 s (stream to web1)'`.
   * @param kind the same in one word. Default `'stream ended'`.
   */
  constructor(contextName: string, contextId: number, reason: string, kind: DisconnectKind = 'stream ended') {
    super(contextName, contextId, reason, 'ERR_TENDRIL_DISCONNECTED');
    this.kind = kind;
  }
}
