import type { Stream } from './stream.js';

/**
 * Which streams keep the process alive: the parent's always, child
 * streams only while requests are in flight, so a context with nothing to
 * wait for can exit.
 */
export class EventLoopHolds {
  private readonly streams = new Set<Stream>();
  private inflight = 0;
  /** Whether child streams are referenced now: they stay so until `unrefLater` runs. */
  private referenced = false;
  private unrefScheduled = false;
  /** The stream to the parent, kept referenced (see `release`). */
  private parent: Stream | undefined;

  /** Operations in flight that keep the event loop alive (tests watch it for leaks). */
  get count(): number {
    return this.inflight;
  }

  /** Starts following `stream`; `parent` is the stream to the parent, if any. */
  attach(stream: Stream, parent: Stream | undefined): void {
    this.streams.add(stream);
    if (!this.referenced && stream !== parent) stream.unref();
  }

  /** Stops following a closed stream. */
  detach(stream: Stream): void {
    this.streams.delete(stream);
  }

  /** One more request in flight: child streams keep the event loop alive. */
  hold(): void {
    if (this.inflight++ === 0 && !this.referenced) {
      this.referenced = true;
      for (const stream of this.streams) stream.ref();
    }
  }

  /** Puts `stream` back in line with the requests in flight (see `MessageSwitch.followHolds`). */
  follow(stream: Stream, parent: Stream | undefined): void {
    if (this.referenced || stream === parent) stream.ref();
    else stream.unref();
  }

  /** Undoes one `hold()`; when none remain, child streams stop keeping the process alive. */
  release(parent: Stream | undefined): void {
    if (--this.inflight > 0) return;
    this.parent = parent;
    // Not at once: calls made one after another would otherwise ref and
    // unref every child stream's handles for each call, a cost that grows
    // with the number of children. Once the event loop has turned with
    // nothing in flight, they are unreferenced.
    if (!this.unrefScheduled) {
      this.unrefScheduled = true;
      // Referenced: an unreferenced immediate does not wake a loop blocked in
      // poll, and the streams would stay referenced until some I/O came.
      setImmediate(this.unrefLater);
    }
  }

  private readonly unrefLater = (): void => {
    this.unrefScheduled = false;
    if (this.inflight > 0 || !this.referenced) return;
    this.referenced = false;
    for (const stream of this.streams) if (stream !== this.parent) stream.unref();
  };
}
