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

  /**
   * @param burst events allowed at once.
   * @param perSecond events allowed per second after the burst.
   */
  constructor(
    private readonly burst: number,
    private readonly perSecond: number,
  ) {
    this.tokens = burst;
  }

  /** True, using up one token, when an event is allowed now; false (counted in `dropped`) otherwise. */
  take(): boolean {
    const now = Date.now();
    this.tokens = Math.min(this.burst, this.tokens + ((now - this.last) * this.perSecond) / 1000);
    this.last = now;
    if (this.tokens >= 1) {
      this.tokens -= 1;
      return true;
    }
    this.dropped++;
    return false;
  }

  /** True at most once a second: whether a drop should be reported now. */
  shouldReport(): boolean {
    const now = Date.now();
    if (now - this.lastReport < 1000) return false;
    this.lastReport = now;
    return true;
  }
}
