/**
 * A token bucket: `burst` events at once, then `perSecond` on average.
 * Used to bound what a peer can make this context do (dead replies to a
 * flood), and to report a drop at most once a second.
 */
export class RateLimit {
  private tokens: number;
  private last = Date.now();
  private lastReport = 0;
  /** Events refused so far. */
  dropped = 0;

  /** Events allowed per second after the burst. */
  readonly perSecond: number;

  /**
   * @param burst events allowed at once.
   * @param perSecond events allowed per second after the burst.
   */
  constructor(
    private readonly burst: number,
    perSecond: number,
  ) {
    this.tokens = burst;
    this.perSecond = perSecond;
  }

  /** True when an event would be allowed now (nothing is used up). */
  available(): boolean {
    this.refill();
    return this.tokens >= 1;
  }

  /** True, using up one token, when an event is allowed now; false (counted in `dropped`) otherwise. */
  take(): boolean {
    this.refill();
    if (this.tokens >= 1) {
      this.tokens -= 1;
      return true;
    }
    this.dropped++;
    return false;
  }

  private refill(): void {
    const now = Date.now();
    this.tokens = Math.min(this.burst, this.tokens + ((now - this.last) * this.perSecond) / 1000);
    this.last = now;
  }

  /** True at most once a second: whether a drop should be reported now. */
  shouldReport(): boolean {
    const now = Date.now();
    if (now - this.lastReport < 1000) return false;
    this.lastReport = now;
    return true;
  }
}
