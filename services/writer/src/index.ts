import { ItemsRejectedError, SinkBusyError, closeMongoConnections, mongoConnection, openSink, type ItemSink, type OpenSinkOptions } from '@crawlfleet/storage';
import { NonRetryableError } from '@crawlfleet/core';
import { DeferError, createStageWorker, runningStage, type FleetContext, type RunningStage } from '@crawlfleet/runtime';
import type { CrawlRecord } from '@crawlfleet/crawl';

export interface WriterOptions {
  concurrency: number;
  /** a crawl's sink closes after this long without items */
  idleCloseMs?: number;
}

/** The sinks this writer has open, one per crawl, closed when idle or when the writer stops. */
class SinkPool {
  private readonly open = new Map<string, { key: string; sink: Promise<ItemSink>; timer?: NodeJS.Timeout }>();
  constructor(private readonly idleCloseMs: number, private readonly options: OpenSinkOptions) {}

  get(crawl: CrawlRecord): Promise<ItemSink> {
    const key = `${crawl.version}:${JSON.stringify(crawl.sink)}`;
    let entry = this.open.get(crawl.crawlId);
    if (entry && entry.key !== key) {
      void this.close(crawl.crawlId);
      entry = undefined;
    }
    if (!entry) {
      entry = { key, sink: openSink(crawl.sink, crawl.spider, { ...this.options, crawlId: crawl.crawlId }) };
      entry.sink.catch(() => this.open.delete(crawl.crawlId));
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

/** Readiness of a writer's MongoDB: the server answers a ping. */
export function mongoReadiness(url: string): { name: string; check: () => Promise<unknown> } {
  return { name: 'mongodb', check: async () => (await mongoConnection(url)).db!.admin().ping() };
}

/**
 * The write stage. Many concurrent jobs share one batched flush per crawl; each job is acknowledged
 * only after the flush that holds its items succeeded.
 */
export function startWriter(ctx: FleetContext, options: WriterOptions): RunningStage {
  const sinks = new SinkPool(options.idleCloseMs ?? 30_000, {
    mongoUrl: ctx.env.mongoUrl,
    redis: ctx.redis,
    keys: ctx.keys,
    log: ctx.log,
    batch: { maxItems: ctx.env.writeBatchSize, maxWaitMs: ctx.env.writeBatchMs, onFlush: (items, seconds) => ctx.metrics.writeBatch(items, seconds) },
  });
  const worker = createStageWorker(ctx, {
    stage: 'write',
    concurrency: options.concurrency,
    defaultAttempts: 10,
    handler: async ({ data, crawl }) => {
      const sink = await sinks.get(crawl);
      try {
        await sink.write(data.items);
      } catch (err) {
        // The store refused some of this page's items: the job goes to the dead-letter set with the
        // reason; the rest of the batch, including this page's other items, is stored.
        if (err instanceof ItemsRejectedError) throw new NonRetryableError(err.code, err.message, { url: data.url }, { cause: err });
        // Another writer process holds the sink's file: wait for it without spending an attempt.
        if (err instanceof SinkBusyError) throw new DeferError(err.waitMs, err.message);
        throw err;
      }
      return { counters: { written: data.items.length } };
    },
  });
  return runningStage('write', worker, async () => {
    await sinks.closeAll();
    await closeMongoConnections();
  });
}
