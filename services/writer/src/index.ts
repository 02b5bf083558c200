import {
  ItemsRejectedError,
  SinkBusyError,
  closeMongoConnections,
  isSinkUnavailable,
  mongoConnection,
  openCrawlSinks,
  type CrawlSinks,
  type Exchange,
  type OpenSinkOptions,
} from '@crawlfleet/storage';
import { NonRetryableError, type WireCapture } from '@crawlfleet/core';
import { decodeBody } from '@crawlfleet/fetch';
import { DeferError, createStageWorker, runningStage, type FleetContext, type RunningStage } from '@crawlfleet/runtime';
import type { CrawlRecord } from '@crawlfleet/crawl';
import { SinkOutages, outageWaitMs, sinkLabel } from './outage.js';

export { MAX_OUTAGE_WAIT_MS, SinkOutages, outageWaitMs, sinkLabel } from './outage.js';

/**
 * A sink that failed to open stays failed this long: the jobs that ask for it meanwhile are parked at
 * once instead of each starting an open of its own (each waits out the driver's 5 s server selection).
 */
const FAILED_OPEN_REUSE_MS = 5_000;

/** A write job still waiting for a store after this long is logged, with the store it waits for. */
const SLOW_WRITE_MS = 60_000;

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

/** A capture as job data (its body compressed for Redis) to the exchange the archive writes. */
function exchangeOf(capture: WireCapture): Exchange {
  const { body, ...rest } = capture;
  return { ...rest, body: decodeBody(body) };
}

/** Readiness of a writer's MongoDB: the server answers a ping. */
export function mongoReadiness(url: string): { name: string; check: () => Promise<unknown> } {
  return { name: 'mongodb', check: async () => (await mongoConnection(url)).db!.admin().ping() };
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
    handler: async ({ data, crawl, deferrals, fingerprint }) => {
      const label = sinkLabel(crawl.sink, ctx.env.mongoUrl);
      // A store that never answers holds the job's slot: say which, once a minute has passed.
      const watched = <T>(what: string, step: Promise<T>): Promise<T> => {
        const timer = setTimeout(() => ctx.log.warn({ crawlId: data.crawlId, url: data.url, waitingFor: what, afterMs: SLOW_WRITE_MS }, 'a write job is still waiting'), SLOW_WRITE_MS);
        timer.unref();
        return step.finally(() => clearTimeout(timer));
      };
      let archivedUri: string | undefined;
      try {
        const sink = await watched('its sinks to open', sinks.get(crawl));
        // A capture whose crawl has no archive (it was seeded again without --warc) is not archived.
        const archive = data.capture && sink.archive;
        // Every store's write settles before the job decides: a job parked because the WARC output is
        // busy (another writer holds it) leaves no write of its items still running behind it.
        const settled = await Promise.allSettled([
          data.items.length > 0 ? watched('the item store', sink.items.write(data.items)) : undefined,
          archive ? watched('the WARC output', archive.write(exchangeOf(data.capture!))) : undefined,
          data.page && sink.pages ? watched('the pages store', sink.pages.write([data.page])) : undefined,
        ]);
        const failed = settled.find((r): r is PromiseRejectedResult => r.status === 'rejected');
        if (failed) throw failed.reason;
        if (archive) archivedUri = data.capture!.targetUri;
      } catch (err) {
        // The store refused some of this page's items: the job goes to the dead-letter set with the
        // reason; the rest of the batch, including this page's other items, is stored.
        if (err instanceof ItemsRejectedError) throw new NonRetryableError(err.code, err.message, { url: data.url }, { cause: err });
        // Another writer process holds the sink's file: wait for it without spending an attempt.
        if (err instanceof SinkBusyError) throw new DeferError(err.waitMs, err.message);
        if (isSinkUnavailable(err)) {
          const waitMs = outageWaitMs(deferrals);
          outages.unavailable(label, err, waitMs);
          throw new DeferError(waitMs, `the item store is unavailable: ${(err as Error).message}`);
        }
        throw err;
      }
      outages.available(label);
      // A write that only archives or records the page (a 404's answer, a page without items) leaves
      // the URL where its fetch or parse left it: a dead-lettered fetch stays replayable as before.
      const stays = data.items.length === 0 ? { url: { fingerprint, state: 'd' } } : {};
      return { counters: { written: data.items.length, ...(archivedUri ? { archived: 1 } : {}) }, ...(archivedUri ? { archivedUri } : {}), ...stays };
    },
  });
  return runningStage('write', worker, async () => {
    await sinks.closeAll();
    await closeMongoConnections();
  });
}
