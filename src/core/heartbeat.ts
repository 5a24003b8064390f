import { InvalidOptionError } from './errors.js';
import { logger } from './log.js';
import { Message } from './message.js';
import { MAX_TIMER } from './options.js';
import { HEARTBEAT } from './protocol/handles.js';

const debug = logger('heartbeat');

/**
 * How a stream watches its peer: a ping after `interval` ms with nothing
 * heard, and the stream declared dead after `timeout` ms with nothing
 * heard. Any frame counts as life, so a busy stream never pings.
 */
export interface HeartbeatSettings {
  /** Silence, in ms, after which a ping is sent (and again after each further interval of silence). */
  readonly interval: number;
  /** Silence, in ms, after which the stream is closed as dead. Greater than `interval`. */
  readonly timeout: number;
}

/**
 * Default `heartbeatInterval`: 10 s. A ping is a 28-byte frame, so an idle
 * tree of a thousand contexts sends a hundred a second at most, and only
 * on streams that carried nothing else.
 */
export const DEFAULT_HEARTBEAT_INTERVAL = 10_000;
/**
 * Default `heartbeatTimeout`: 30 s, three intervals: a ping and two more
 * may go unanswered (a loaded link, a host swapping for a while) before a
 * stream is declared dead, and an operation below a frozen hop rejects
 * within about half a minute, sooner than ssh's own keepalive notices a
 * silent link (3 x 15 s by default, see `keepaliveInterval`).
 */
export const DEFAULT_HEARTBEAT_TIMEOUT = 30_000;
/** Shortest `heartbeatInterval` accepted, in ms. */
export const MIN_HEARTBEAT_INTERVAL = 50;

/** The defaults, as one value. */
export const DEFAULT_HEARTBEAT: HeartbeatSettings = {
  interval: DEFAULT_HEARTBEAT_INTERVAL,
  timeout: DEFAULT_HEARTBEAT_TIMEOUT,
};

/** The options that set a heartbeat, as the Router and every connection method take them. */
export interface HeartbeatOptions {
  /**
   * Milliseconds of silence on a stream after which a small ping is sent
   * (a 28-byte frame; any traffic counts as life, so a busy stream sends
   * none). At least 50. Default: what the context this one is started from
   * uses, in the master 10000.
   */
  heartbeatInterval?: number;
  /**
   * Milliseconds with nothing received after which the stream to this
   * context (each end of it) is declared dead: every operation on the
   * contexts behind it rejects with `ContextDisconnectedError` saying
   * `no answer for <timeout> s`, the child side stops its subtree and
   * exits. Greater than `heartbeatInterval`; `false` turns the heartbeat
   * off on this stream. Inherited by the contexts this one starts.
   * Default: what the context this one is started from uses, in the
   * master 30000.
   */
  heartbeatTimeout?: number | false;
}

/**
 * The heartbeat `options` ask for, from what a context inherits
 * (`inherited`): either option replaces the inherited one; `heartbeatTimeout:
 * false` turns it off; an interval given to an inherited `false` turns it
 * on with the default timeout.
 * @throws InvalidOptionError naming the bad option (at `where`).
 */
export function heartbeatSettings(
  options: HeartbeatOptions,
  inherited: HeartbeatSettings | false,
  where: string,
): HeartbeatSettings | false {
  const { heartbeatInterval, heartbeatTimeout } = options;
  if (heartbeatInterval !== undefined) duration(heartbeatInterval, 'heartbeatInterval', where, MIN_HEARTBEAT_INTERVAL);
  if (heartbeatTimeout === false) return false;
  if (heartbeatTimeout !== undefined) {
    duration(heartbeatTimeout, 'heartbeatTimeout', where, MIN_HEARTBEAT_INTERVAL + 1);
  }
  if (heartbeatInterval === undefined && heartbeatTimeout === undefined) return inherited;
  const base = inherited === false ? DEFAULT_HEARTBEAT : inherited;
  const interval = heartbeatInterval ?? base.interval;
  // A timeout given alone keeps an interval that fits inside it.
  const timeout = heartbeatTimeout ?? Math.max(base.timeout, 2 * interval);
  const fitted = heartbeatInterval === undefined ? Math.min(interval, Math.floor(timeout / 2)) : interval;
  if (timeout <= fitted) {
    throw new InvalidOptionError(
      'heartbeatTimeout',
      where,
      `more milliseconds than heartbeatInterval (${fitted}), or false`,
      timeout,
    );
  }
  return { interval: Math.max(MIN_HEARTBEAT_INTERVAL, fitted), timeout };
}

function duration(value: unknown, option: string, where: string, min: number): void {
  if (typeof value !== 'number' || !Number.isFinite(value) || value < min || value > MAX_TIMER) {
    throw new InvalidOptionError(option, where, `a number of milliseconds from ${min} to ${MAX_TIMER}`, value);
  }
}

/** `'30 s'`, `'1.5 s'`, `'200 ms'`: a timeout as errors say it. */
export function describeSilence(ms: number): string {
  return ms < 1000 ? `${Math.round(ms)} ms` : `${Math.round(ms / 100) / 10} s`;
}

/** What the heartbeat needs of the stream it watches. */
export interface HeartbeatHost {
  /** Name of the peer, for debug output. */
  readonly name: string;
  /** Bytes read from the peer so far: any change is life. */
  readonly bytesIn: number;
  /** Sends a heartbeat frame. */
  send(message: Message): void;
  /** Closes the stream as dead. */
  dead(reason: string): void;
}

/** How many times per interval (or timeout, if shorter) the silence is checked. */
const CHECKS_PER_INTERVAL = 4;

/**
 * The watch of one stream's peer. Silence is counted only in time this
 * event loop ran: a check that comes late (the loop was blocked by
 * synchronous work, a debugger, a stopped process) adds no more than one
 * check's period, and never declares the stream dead, since what the peer
 * sent meanwhile may be waiting unread. So a context whose own loop was
 * held does not declare its peers dead for time it did not run.
 */
export class Heartbeat {
  private readonly period: number;
  private readonly timer: ReturnType<typeof setInterval>;
  private seenBytes: number;
  private lastCheck = Date.now();
  /** Silence counted so far, in ms of running time. */
  private silence = 0;
  /** `silence` when the last ping went, or -1 when none has since life was heard. */
  private pingedAt = -1;

  /**
   * @param host the stream watched.
   * @param settings interval and timeout, in ms.
   * @param ownId this context's ID, the src of its pings.
   * @param peerId the peer's, their dst.
   */
  constructor(
    private readonly host: HeartbeatHost,
    private readonly settings: HeartbeatSettings,
    private readonly ownId: number,
    private readonly peerId: number,
  ) {
    this.seenBytes = host.bytesIn;
    this.period = Math.max(10, Math.floor(Math.min(settings.interval, settings.timeout) / CHECKS_PER_INTERVAL));
    this.timer = setInterval(() => this.check(), this.period);
    // A heartbeat never keeps a process alive: streams decide that (event-loop-holds.ts).
    this.timer.unref?.();
  }

  /** Stops watching (the stream closed). */
  stop(): void {
    clearInterval(this.timer);
  }

  private check(): void {
    const now = Date.now();
    const elapsed = now - this.lastCheck;
    this.lastCheck = now;
    const late = elapsed > 2 * this.period;
    const bytes = this.host.bytesIn;
    if (bytes !== this.seenBytes) {
      this.seenBytes = bytes;
      this.silence = 0;
      this.pingedAt = -1;
      return;
    }
    this.silence += Math.min(elapsed, this.period);
    const { interval, timeout } = this.settings;
    if (this.silence >= timeout && !late) {
      debug('%s: nothing heard for %d ms: the stream is dead', this.host.name, this.silence);
      this.host.dead(`no answer for ${describeSilence(timeout)}`);
      return;
    }
    if (late) debug('%s: this event loop did not run for %d ms; that time is not counted', this.host.name, elapsed);
    if (this.silence >= interval && (this.pingedAt < 0 || this.silence - this.pingedAt >= interval || late)) {
      if (this.pingedAt >= 0) debug('%s: no answer to a ping for %d ms', this.host.name, this.silence - this.pingedAt);
      this.pingedAt = this.silence;
      this.host.send(frame(this.ownId, this.peerId, HEARTBEAT));
    }
  }
}

/** The answer to a ping: from the context it was sent to, whichever end of the stream asks. */
export function pong(ping: Message): Message {
  return frame(ping.dst, ping.src, 0);
}

/** A ping (`replyTo` HEARTBEAT: answer me) or a pong (`replyTo` 0): a header and no payload. */
function frame(src: number, dst: number, replyTo: number): Message {
  return Message.raw({ dst: Math.max(0, dst), src, auth: src, handle: HEARTBEAT, replyTo }, EMPTY);
}

const EMPTY = new Uint8Array(0);
