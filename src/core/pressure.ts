import { Message } from './message.js';
import { ROUTE_PRESSURE_SPEC } from './protocol/route-pressure.js';
import type { Stream } from './stream.js';

/** What route pressure needs of the switch it belongs to. */
export interface PressureHost {
  /** This context's ID. */
  readonly id: number;
  /** The parent's ID, or -1 in the master. */
  readonly parentId: number;
  /** The stream to the parent; undefined in the master. */
  readonly parentStream: Stream | undefined;
  /** The stream a descendant is reached through, if it is known. */
  routeOf(contextId: number): Stream | undefined;
  /** The stream a message to `id` leaves by. */
  expectedStream(id: number): Stream | undefined;
  /** @throws RouteRefusedError always (see `MessageSwitch.refuseRoute`). */
  refuseRoute(handleName: string, target: number, stream: Stream | undefined, reason: string): never;
}

/**
 * Route pressure (ROUTE_PRESSURE): a context whose stream toward a
 * destination backs up with what its parent sent tells the parent to hold
 * calls to that destination, rather than stall the whole subtree by not
 * reading the parent's stream; and it holds its own calls to destinations
 * a child reported backed up below it.
 */
export class PressureHolds {
  /** Per child stream backed up with what the parent sent: the destinations the parent was told to hold. */
  private readonly pressured = new Map<Stream, Set<number>>();
  /** Descendants a child reported backed up below it, and calls here waiting for them to drain. */
  private readonly congested = new Map<number, (() => void)[]>();

  /** @param host the switch whose routes are held and relieved. */
  constructor(private readonly host: PressureHost) {}

  /** Tells the parent to hold calls to `dst` until `out` has drained. */
  pressure(out: Stream, dst: number): void {
    const known = this.pressured.get(out);
    const held = known ?? new Set<number>();
    if (held.has(dst)) return;
    held.add(dst);
    this.sendPressure(dst, 1);
    if (known) return;
    this.pressured.set(out, held);
    // Last: `out` may have drained already (its frames leave when asked), and
    // then this calls back at once; the relief must follow the pressure.
    out.whenDrained(() => {
      this.pressured.delete(out);
      for (const target of held) this.sendPressure(target, 0);
    });
  }

  private sendPressure(target: number, on: 0 | 1): void {
    const parent = this.host.parentStream;
    if (!parent || parent.closed) return;
    parent.send(
      Message.encoded(
        {
          dst: this.host.parentId,
          src: this.host.id,
          auth: this.host.id,
          handle: ROUTE_PRESSURE_SPEC.handle,
          replyTo: 0,
        },
        [target, on],
      ),
    );
  }

  /** Serves ROUTE_PRESSURE from a child. */
  onPressure(target: number, on: 0 | 1, stream: Stream | undefined): null {
    // Only about a context routed through the child saying so: a child can hold calls to its own subtree, no other.
    if (!stream || this.host.routeOf(target) !== stream) {
      this.host.refuseRoute('ROUTE_PRESSURE', target, stream, 'that context is not reached through it');
    }
    // Saying again what was said already changes nothing, and is no refusal.
    if (on === 1) {
      if (this.congested.has(target)) return null;
      this.congested.set(target, []);
    } else if (!this.relieve(target)) return null;
    this.sendPressure(target, on);
    return null;
  }

  /** Ends the hold on calls to `target`; false when there was none. */
  relieve(target: number): boolean {
    const waiting = this.congested.get(target);
    if (!waiting) return false;
    this.congested.delete(target);
    for (const resume of waiting) resume();
    return true;
  }

  /** See `MessageSwitch.whenWritable`. */
  whenWritable(dst: number): Promise<void> | undefined {
    if (dst === this.host.id) return undefined;
    const out = this.host.expectedStream(dst);
    if (!out || out.closed) return undefined;
    if (out.needsDrain) return new Promise<void>((resolve) => out.whenDrained(resolve));
    const waiting = this.congested.get(dst);
    return waiting && new Promise<void>((resolve) => waiting.push(resolve));
  }
}
