/** What the refusal log says about a window in which it kept some refusals out of the logs. */
export interface RefusalSummary {
  /** refusals in the window, logged or not */
  refused: number;
  /** refusals in the window that got no line of their own */
  unlogged: number;
  /** the window's length */
  windowMs: number;
}

export interface RefusalLogLimits {
  /** distinct targets remembered (the oldest is forgotten first) */
  maxTargets: number;
  /** lines about newly refused targets per window; the rest go into the window's summary */
  linesPerWindow: number;
  windowMs: number;
}

export const REFUSAL_LOG_LIMITS: RefusalLogLimits = { maxTargets: 1000, linesPerWindow: 20, windowMs: 60_000 };

/**
 * The guard proxy's memory of what it refused, bounded however many requests a page makes: a line
 * for each target the first time it is refused, at most `linesPerWindow` a window, and one summary
 * for a window in which more were refused. A page that asks for 10^6 forbidden addresses costs
 * `maxTargets` entries and a few lines a minute. The clock is the caller's (`now`), so the policy
 * is tested without waiting.
 */
export class RefusalLog {
  private readonly targets = new Map<string, number>();
  private windowStart: number | undefined;
  private refused = 0;
  private lines = 0;
  private unlogged = 0;
  /** refusals since the start, for the tests and the metrics */
  total = 0;

  constructor(private readonly limits: RefusalLogLimits = REFUSAL_LOG_LIMITS) {}

  /**
   * Counts one refusal of `target`: `log` says whether it gets a line now; `summary` is the
   * previous window's, when that window ended with refusals left unlogged.
   */
  note(target: string, now: number): { log: boolean; summary?: RefusalSummary } {
    const summary = this.flush(now);
    this.windowStart ??= now;
    this.total++;
    this.refused++;
    const known = this.targets.has(target);
    this.remember(target);
    const log = !known && this.lines < this.limits.linesPerWindow;
    if (log) this.lines++;
    else this.unlogged++;
    return summary ? { log, summary } : { log };
  }

  /** The summary of the window that has ended by `now`, if any refusal in it went unlogged; the window is then closed. */
  flush(now: number): RefusalSummary | undefined {
    if (this.windowStart === undefined || now - this.windowStart < this.limits.windowMs) return undefined;
    const summary = this.unlogged > 0 ? { refused: this.refused, unlogged: this.unlogged, windowMs: this.limits.windowMs } : undefined;
    this.windowStart = undefined;
    this.refused = 0;
    this.lines = 0;
    this.unlogged = 0;
    return summary;
  }

  /** When the open window ends, if one is open with unlogged refusals (for a timer to flush it). */
  pendingUntil(): number | undefined {
    return this.windowStart !== undefined && this.unlogged > 0 ? this.windowStart + this.limits.windowMs : undefined;
  }

  /** Distinct targets remembered now (at most maxTargets). */
  get size(): number {
    return this.targets.size;
  }

  private remember(target: string): void {
    this.targets.set(target, (this.targets.get(target) ?? 0) + 1);
    if (this.targets.size > this.limits.maxTargets) this.targets.delete(this.targets.keys().next().value!);
  }
}
