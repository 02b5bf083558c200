/**
 * The event loop's heartbeat: a timer that should fire every `intervalMs`. A gap much longer than
 * that means the loop stalled (a runaway regex, a synchronous loop). The stall is remembered for
 * `windowMs`, so a liveness probe that is answered right after the loop comes back still sees it;
 * a loop blocked outright cannot answer the probe at all, which fails it as well.
 */
export class Heartbeat {
  private last = Date.now();
  private worst = { gapMs: 0, at: 0 };
  private readonly timer: NodeJS.Timeout;

  constructor(
    private readonly intervalMs = 250,
    private readonly windowMs = 10_000,
  ) {
    this.timer = setInterval(() => {
      const now = Date.now();
      const gapMs = now - this.last - this.intervalMs;
      if (gapMs >= this.worst.gapMs || now - this.worst.at > this.windowMs) this.worst = { gapMs, at: now };
      this.last = now;
    }, intervalMs);
    this.timer.unref();
  }

  /** The longest stall of the loop in the last `windowMs`, or the one going on now. */
  stalledMs(now = Date.now()): number {
    const ongoing = now - this.last - this.intervalMs;
    const recent = now - this.worst.at <= this.windowMs ? this.worst.gapMs : 0;
    return Math.max(0, ongoing, recent);
  }

  stop(): void {
    clearInterval(this.timer);
  }
}
