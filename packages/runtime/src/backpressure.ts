import type { Queue, Worker } from 'bullmq';
import { allPartKeys, type CrawlLayout } from '@crawlfleet/crawl';
import type { Keys, Logger, RedisClient } from '@crawlfleet/core';

/**
 * The job states that count against a queue's high-water mark for the whole stage: jobs that could
 * run now and wait for a worker. The downstream stage is then not keeping up, whatever the crawl.
 * Delayed jobs are left out here: a write job parked while its crawl's store is unavailable, or a
 * paused crawl's parked job, cannot drain, and counting it would stop every crawl for one crawl's
 * outage. Those are bounded per crawl instead (CrawlBacklogs). Active jobs are bounded by the
 * workers' concurrency.
 */
export const BACKPRESSURE_STATES = ['waiting', 'prioritized'] as const;

/** Pure: the backlog of a queue from its job counts by state. */
export function backlogDepth(counts: Partial<Record<string, number>>): number {
  return BACKPRESSURE_STATES.reduce((n, state) => n + (counts[state] ?? 0), 0);
}

/**
 * Pure: what a stage does about a downstream backlog of `depth` jobs. Over the high-water mark it
 * pauses; once the backlog has drained to half of it, it resumes (the gap keeps it from flapping).
 */
export function backpressureAction(paused: boolean, depth: number, highWater: number): 'pause' | 'resume' | 'none' {
  if (!paused && depth > highWater) return 'pause';
  if (paused && depth <= highWater / 2) return 'resume';
  return 'none';
}

/**
 * Bounded memory, for the whole stage: a stage stops taking work while the queue after it holds more
 * than `highWater` jobs ready to run (BACKPRESSURE_STATES), and takes work again once it has drained
 * to half of that. A fetcher watches the parse queue (PARSE_HIGH_WATER), a parser the write queue
 * (WRITE_HIGH_WATER).
 */
export function watchBackpressure(worker: Worker, downstream: Queue, highWater: number, log: Logger, intervalMs = 500): () => void {
  let paused = false;
  let busy = false;
  const timer = setInterval(async () => {
    if (busy) return;
    busy = true;
    try {
      const counts = await downstream.getJobCounts(...BACKPRESSURE_STATES);
      const depth = backlogDepth(counts);
      const action = backpressureAction(paused, depth, highWater);
      if (action === 'pause') {
        paused = true;
        log.info({ queue: downstream.name, depth, waiting: counts.waiting, highWater }, 'downstream queue over its high-water mark: pausing intake');
        await worker.pause(true);
      } else if (action === 'resume') {
        paused = false;
        log.info({ queue: downstream.name, depth }, 'downstream queue drained: resuming intake');
        worker.resume();
      }
    } catch {
      // Redis is unreachable; the workers' own reconnects report it.
    } finally {
      busy = false;
    }
  }, intervalMs);
  timer.unref();
  return () => clearInterval(timer);
}

/** Pure: how long a held-back crawl's job waits before it looks again: 1 s, doubling to 30 s. */
export function holdBackWaitMs(deferrals: number): number {
  return Math.min(30_000, 1000 * 2 ** Math.min(deferrals, 5));
}

/**
 * Bounded memory, per crawl: a crawl whose jobs in the next stage (its pending set there: waiting,
 * delayed or active) are more than the high-water mark is held back, and this stage parks its jobs
 * (DeferError) until they drain. A crawl whose store is down thus stops at the mark, first in the
 * write stage, then in the parse stage, while every other crawl goes on. Each crawl's count is read
 * at most every `ttlMs` per process, and counts this process's own hand-overs in between, so a crawl
 * stops past the mark by at most what other processes handed over meanwhile.
 */
export class CrawlBacklogs {
  private readonly seen = new Map<string, { at: number; depth: number }>();
  constructor(
    private readonly redis: RedisClient,
    private readonly keys: Keys,
    readonly downstream: 'parse' | 'write',
    readonly highWater: number,
    private readonly ttlMs = 500,
    private readonly maxCrawls = 1024,
  ) {}

  /** The crawl's jobs in the downstream stage, when they are over the high-water mark; else undefined. */
  async over(layout: CrawlLayout, now = Date.now()): Promise<number | undefined> {
    let entry = this.seen.get(layout.crawlId);
    if (!entry || now - entry.at >= this.ttlMs) {
      const sizes = await Promise.all(allPartKeys(this.keys, layout).map((k) => this.redis.scard(k.pending[this.downstream])));
      entry = { at: now, depth: sizes.reduce((a, b) => a + b, 0) };
      this.seen.delete(layout.crawlId);
      if (this.seen.size >= this.maxCrawls) this.seen.delete(this.seen.keys().next().value!);
      this.seen.set(layout.crawlId, entry);
    }
    return entry.depth > this.highWater ? entry.depth : undefined;
  }

  /** This process handed the crawl a job in the downstream stage: its count is one more until read again. */
  handedOver(crawlId: string): void {
    const entry = this.seen.get(crawlId);
    if (entry) entry.depth++;
  }
}
