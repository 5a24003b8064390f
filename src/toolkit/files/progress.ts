/** How far a transfer has come, for `onProgress`. */
export interface TransferProgress {
  /** File data bytes moved so far. */
  bytes: number;
  /** File data bytes in the whole transfer (0 until known; unknown for a write stream). */
  total: number;
  /** Average rate since the start, in bytes per second. */
  rate: number;
}

/** Reports at least every 250 ms while a transfer runs (200 ms apart), and once at its end. */
export const PROGRESS_INTERVAL = 200;

/** Counts a transfer's bytes and calls `onProgress` on a timer and at the end. */
export class Progress {
  private bytes = 0;
  private total = 0;
  private readonly started = Date.now();
  private readonly timer: ReturnType<typeof setInterval> | undefined;

  /** Without `onProgress` it only counts: no timer runs. */
  constructor(private readonly onProgress: ((progress: TransferProgress) => void) | undefined) {
    if (onProgress) {
      this.timer = setInterval(() => this.report(), PROGRESS_INTERVAL);
      this.timer.unref();
    }
  }

  /** Counts `bytes` more of file data (a transfer's `onBytes`; bound, so it can be passed as it is). */
  readonly add = (bytes: number): void => {
    this.bytes += bytes;
  };

  /** Takes the total from a transfer's description, once it is known. */
  readonly begin = (begin: { bytes: number }): void => {
    this.total = begin.bytes;
  };

  /** Stops the timer; reports once more when the transfer succeeded. */
  finish(succeeded: boolean): void {
    if (this.timer) clearInterval(this.timer);
    if (succeeded) this.report();
  }

  private report(): void {
    const seconds = (Date.now() - this.started) / 1000;
    try {
      this.onProgress?.({ bytes: this.bytes, total: this.total, rate: seconds > 0 ? this.bytes / seconds : 0 });
    } catch {
      // A progress display that throws must not break the transfer it displays.
    }
  }
}
