import type { Keys, RedisClient } from '@crawlfleet/core';
import { getStatus, type CrawlStatus } from '@crawlfleet/crawl';

/** Pages per second over a sliding window, for progress and ETA. */
export class RateMeter {
  private samples: { at: number; value: number }[] = [];
  constructor(private readonly windowMs = 5000) {}

  add(value: number, at = Date.now()): number {
    this.samples.push({ at, value });
    while (this.samples.length > 2 && this.samples[0]!.at < at - this.windowMs) this.samples.shift();
    const first = this.samples[0]!;
    const span = (at - first.at) / 1000;
    return span > 0 ? (value - first.value) / span : 0;
  }
}

function duration(seconds: number): string {
  if (!Number.isFinite(seconds) || seconds < 0) return '--:--';
  const s = Math.round(seconds);
  const h = Math.floor(s / 3600);
  const m = Math.floor((s % 3600) / 60);
  const pad = (n: number) => String(n).padStart(2, '0');
  return h > 0 ? `${h}:${pad(m)}:${pad(s % 60)}` : `${m}:${pad(s % 60)}`;
}

/** Pure: one progress line for a TTY. */
export function progressLine(status: CrawlStatus, pagesPerSecond: number): string {
  const c = status.counters;
  const q = status.queues;
  const remaining = q.fetch.waiting + q.fetch.active + q.fetch.delayed;
  const eta = pagesPerSecond > 0 ? remaining / pagesPerSecond : Number.NaN;
  return [
    `${status.state}`,
    `${c.fetched}/${c.seen} pages`,
    `${pagesPerSecond.toFixed(1)}/s`,
    `queues fetch ${remaining} parse ${q.parse.waiting + q.parse.active} write ${q.write.waiting + q.write.active}`,
    `items ${c.items} (written ${c.written})`,
    `errors ${c.failed} failed, ${c.retries} retries`,
    `ETA ${duration(eta)}`,
  ].join(' | ');
}

/**
 * The progress line of a crawl redrawn on stderr at most once a second, from a wait loop's ticks;
 * nothing when `enabled` is false (not a terminal, or --quiet). `end` moves past the line.
 */
export function progressTicker(redis: RedisClient, keys: Keys, crawlId: string, enabled: boolean): { tick: () => Promise<void>; end: () => void } {
  const meter = new RateMeter();
  let lastDraw = 0;
  return {
    tick: async () => {
      if (!enabled || Date.now() - lastDraw < 1000) return;
      lastDraw = Date.now();
      const status = await getStatus(redis, keys, crawlId);
      if (status) process.stderr.write(`\r\x1b[2K${progressLine(status, meter.add(status.counters.fetched))}`);
    },
    end: () => {
      if (enabled && lastDraw > 0) process.stderr.write('\n');
    },
  };
}
