import { closeMongoConnections, mongoAnsweredAt, mongoConnection, openCrawlSinks, type CrawlSinks, type OpenSinkOptions } from '@crawlfleet/storage';
import { createStageWorker, runningStage, type FleetContext, type ReadinessCheck, type RunningStage } from '@crawlfleet/runtime';
import type { CrawlRecord } from '@crawlfleet/crawl';
import { SinkOutages } from './outage.js';
import { writePage } from './write-page.js';

export { MAX_OUTAGE_WAIT_MS, SinkOutages, outageWaitMs, sinkLabel } from './outage.js';

/**
 * A sink that failed to open stays failed this long: the jobs that ask for it meanwhile are parked at
 * once instead of each starting an open of its own (each waits out the driver's 5 s server selection).
 */
const FAILED_OPEN_REUSE_MS = 5_000;

export interface WriterOptions {
  concurrency: number;
  /** a crawl's sink closes after this long without items */
  idleCloseMs?: number;
}

interface PoolEntry {
  key: string;
  sink: Promise<CrawlSinks>;
  timer?: NodeJS.Timeout;
}

/** The sinks this writer has open, one per crawl, closed when idle or when the writer stops. */
class SinkPool {
  private readonly open = new Map<string, PoolEntry>();
  constructor(
    private readonly idleCloseMs: number,
    private readonly options: OpenSinkOptions,
  ) {}

  get(crawl: CrawlRecord): Promise<CrawlSinks> {
    // a new run (a recrawl, or a reset and a new seed) opens its sinks again: WARC output archives per run
    const key = `${crawl.version}:${crawl.startedAt}:${JSON.stringify(crawl.sink)}`;
    let entry = this.open.get(crawl.crawlId);
    if (entry && entry.key !== key) {
      void this.close(crawl.crawlId);
      entry = undefined;
    }
    if (!entry) {
      const opened: PoolEntry = { key, sink: openCrawlSinks(crawl.sink, crawl.spider, { ...this.options, crawlId: crawl.crawlId, run: crawl.startedAt }) };
      opened.sink.catch(() => {
        const forget = setTimeout(() => {
          if (this.open.get(crawl.crawlId) === opened) this.open.delete(crawl.crawlId);
        }, FAILED_OPEN_REUSE_MS);
        forget.unref();
      });
      entry = opened;
      this.open.set(crawl.crawlId, entry);
    }
    if (entry.timer) clearTimeout(entry.timer);
    entry.timer = setTimeout(() => void this.close(crawl.crawlId), this.idleCloseMs);
    entry.timer.unref();
    return entry.sink;
  }

  async close(crawlId: string): Promise<void> {
    const entry = this.open.get(crawlId);
    if (!entry) return;
    this.open.delete(crawlId);
    if (entry.timer) clearTimeout(entry.timer);
    await (await entry.sink.catch(() => undefined))?.close();
  }

  async closeAll(): Promise<void> {
    await Promise.all([...this.open.keys()].map((id) => this.close(id)));
  }
}

/** A flush that reached MongoDB this recently proves it answers, without a ping. */
const RECENT_FLUSH_MS = 30_000;

/**
 * Readiness of a writer's MongoDB: a flush reached it in the last 30 s, or the server answers a ping
 * within 2.5 s (under the probes' own 3 s). A busy store answers its writers' batches yet may keep
 * a ping waiting past a second: a ping alone turned a writer unready at the busiest moment, with
 * its writes going through.
 */
export function mongoReadiness(url: string, now: () => number = () => performance.now()): ReadinessCheck {
  return {
    name: 'mongodb',
    timeoutMs: 2_500,
    check: async () => {
      const flushedAt = mongoAnsweredAt(url);
      if (flushedAt !== undefined && now() - flushedAt < RECENT_FLUSH_MS) return;
      await (await mongoConnection(url)).db!.admin().ping();
    },
  };
}

/**
 * The write stage. Many concurrent jobs share one batched flush per crawl; each job is acknowledged
 * only after the flush that holds its items succeeded.
 *
 * A store that is unavailable (it cannot be reached, opened or written for now; `isSinkUnavailable`)
 * parks the job in BullMQ's delayed set with a growing wait (DeferError): no attempt is spent and no
 * worker slot held, for as long as the outage lasts. Only a fault of the write itself (a cast, a
 * duplicate key, an unforeseen error) spends the job's attempts and ends in the dead-letter set.
 */
export function startWriter(ctx: FleetContext, options: WriterOptions): RunningStage {
  const sinks = new SinkPool(options.idleCloseMs ?? 30_000, {
    mongoUrl: ctx.env.mongoUrl,
    redis: ctx.redis,
    keys: ctx.keys,
    log: ctx.log,
    batch: { maxItems: ctx.env.writeBatchSize, maxWaitMs: ctx.env.writeBatchMs, onFlush: (items, seconds) => ctx.metrics.writeBatch(items, seconds) },
  });
  const outages = new SinkOutages(ctx.log, (unavailable) => ctx.metrics.sinksUnavailable(unavailable));
  const worker = createStageWorker(ctx, {
    stage: 'write',
    concurrency: options.concurrency,
    defaultAttempts: ctx.env.writeAttempts,
    handler: (input) => writePage({ ctx, sinks, outages }, input),
  });
  return runningStage('write', worker, async () => {
    await sinks.closeAll();
    await closeMongoConnections();
  });
}
