import type { LogRecord } from './log.js';
import { Message } from './message.js';
import { FORWARD_LOG_SPEC, type ForwardLog } from './protocol/forward-log.js';
import type { MessageSwitch } from './switch.js';

/** Most children whose output is held while they start (the oldest is dropped past it). */
const MAX_STARTING = 16;
/** Most lines held for one starting child: as many as a failed start's error quotes. */
const MAX_HELD_LINES = 20;
/** Most characters held for one starting child. */
const MAX_HELD_CHARS = 64 * 1024;

interface Held {
  records: LogRecord[];
  chars: number;
}

/**
 * Sends the output lines of this context's children to the master
 * (FORWARD_LOG), which takes a line only from the context that started the
 * one that wrote it, and knows who that is once the route is announced. A
 * child's lines from before (its start's: prompts, banners, a runtime being
 * sent) are held until then and sent after the announcement, on the same
 * stream, so they arrive in order; what a start that fails wrote is quoted
 * by its error instead, and its held lines are dropped. Held lines are
 * bounded: the last `MAX_HELD_LINES` (at most `MAX_HELD_CHARS`) of each of
 * the last `MAX_STARTING` children.
 */
export class LogForwarder {
  private readonly starting = new Map<number, Held>();

  /** @param router this context's switch: lines go to the master through it. */
  constructor(private readonly router: MessageSwitch) {
    router.on('route', (contextId: number) => this.announced(contextId));
  }

  /** Sends `record` to the master, or holds it while its context has no route yet. */
  forward(record: LogRecord): void {
    if (this.router.parentOf(record.contextId) !== undefined) {
      this.send(record);
      return;
    }
    let held = this.starting.get(record.contextId);
    if (!held) {
      if (this.starting.size >= MAX_STARTING) this.starting.delete(this.starting.keys().next().value as number);
      held = { records: [], chars: 0 };
      this.starting.set(record.contextId, held);
    }
    held.records.push(record);
    held.chars += record.text.length;
    while (held.records.length > MAX_HELD_LINES || (held.chars > MAX_HELD_CHARS && held.records.length > 1)) {
      held.chars -= (held.records.shift() as LogRecord).text.length;
    }
  }

  private announced(contextId: number): void {
    const held = this.starting.get(contextId);
    if (!held) return;
    this.starting.delete(contextId);
    for (const record of held.records) this.send(record);
  }

  private send(record: LogRecord): void {
    const router = this.router;
    try {
      const log: ForwardLog = [record.contextId, record.contextName, record.text];
      router.send(
        Message.encoded({ dst: 0, src: router.id, auth: router.id, handle: FORWARD_LOG_SPEC.handle, replyTo: 0 }, log),
      );
    } catch {
      // The master is unreachable; the line has nowhere to go.
    }
  }
}
