import { ItemsRejectedError, SinkBusyError, isSinkUnavailable, type CrawlSinks, type Exchange } from '@crawlfleet/storage';
import { NonRetryableError, type WireCapture, type WriteJob } from '@crawlfleet/core';
import { decodeBody } from '@crawlfleet/fetch';
import { DeferError, type FleetContext, type StageHandlerInput, type StageResult } from '@crawlfleet/runtime';
import type { CrawlRecord } from '@crawlfleet/crawl';
import { outageWaitMs, sinkLabel, type SinkOutages } from './outage.js';

/** A write job still waiting for a store after this long is logged, with the store it waits for. */
const SLOW_WRITE_MS = 60_000;

/** What the write of a page needs of its writer: the fleet, the sinks it has open, its record of outages. */
export interface PageWriter {
  ctx: FleetContext;
  sinks: { get(crawl: CrawlRecord): Promise<CrawlSinks> };
  outages: SinkOutages;
}

/**
 * The write stage's handler: store the page in every store it goes to, tell a store's outage from a
 * fault of the write, and say what the job wrote.
 */
export async function writePage(w: PageWriter, { data, crawl, deferrals, fingerprint }: StageHandlerInput<'write'>): Promise<StageResult> {
  const label = sinkLabel(crawl.sink, w.ctx.env.mongoUrl);
  let archivedUri: string | undefined;
  try {
    archivedUri = await storePage(w, crawl, data);
  } catch (err) {
    throw writeFailure(w.outages, err, data.url, label, deferrals);
  }
  w.outages.available(label);
  return writtenResult(data, fingerprint, archivedUri);
}

/** Writes the page's items, capture and page record, each to its store; returns the archived capture's URI. */
async function storePage(w: PageWriter, crawl: CrawlRecord, data: WriteJob): Promise<string | undefined> {
  const sink = await watched(w.ctx, data, 'its sinks to open', w.sinks.get(crawl));
  // A capture whose crawl has no archive (it was seeded again without --warc) is not archived.
  const archive = data.capture && sink.archive;
  // Every store's write settles before the job decides: a job parked because the WARC output is
  // busy (another writer holds it) leaves no write of its items still running behind it.
  const settled = await Promise.allSettled([
    data.items.length > 0 ? watched(w.ctx, data, 'the item store', sink.items.write(data.items)) : undefined,
    archive ? watched(w.ctx, data, 'the WARC output', archive.write(exchangeOf(data.capture!))) : undefined,
    data.page && sink.pages ? watched(w.ctx, data, 'the pages store', sink.pages.write([data.page])) : undefined,
  ]);
  const failed = settled.find((r): r is PromiseRejectedResult => r.status === 'rejected');
  if (failed) throw failed.reason;
  return archive ? data.capture!.targetUri : undefined;
}

/** A store that never answers holds the job's slot: say which, once a minute has passed. */
function watched<T>(ctx: FleetContext, data: WriteJob, what: string, step: Promise<T>): Promise<T> {
  const timer = setTimeout(() => ctx.log.warn({ crawlId: data.crawlId, url: data.url, waitingFor: what, afterMs: SLOW_WRITE_MS }, 'a write job is still waiting'), SLOW_WRITE_MS);
  timer.unref();
  return step.finally(() => clearTimeout(timer));
}

/** A capture as job data (its body compressed for Redis) to the exchange the archive writes. */
function exchangeOf(capture: WireCapture): Exchange {
  const { body, ...rest } = capture;
  return { ...rest, body: decodeBody(body) };
}

/**
 * The error a failed write ends its job with. A store that is unavailable is recorded as out
 * (`outages`), and the job parked with a growing wait.
 */
function writeFailure(outages: SinkOutages, err: unknown, url: string, label: string, deferrals: number): unknown {
  // The store refused some of this page's items: the job goes to the dead-letter set with the
  // reason; the rest of the batch, including this page's other items, is stored.
  if (err instanceof ItemsRejectedError) return new NonRetryableError(err.code, err.message, { url }, { cause: err });
  // Another writer process holds the sink's file: wait for it without spending an attempt.
  if (err instanceof SinkBusyError) return new DeferError(err.waitMs, err.message);
  if (isSinkUnavailable(err)) {
    const waitMs = outageWaitMs(deferrals);
    outages.unavailable(label, err, waitMs);
    return new DeferError(waitMs, `the item store is unavailable: ${(err as Error).message}`);
  }
  return err;
}

/**
 * Pure: what a stored write job records. A write that only archives or records the page (a 404's
 * answer, a page without items) leaves the URL where its fetch or parse left it: a dead-lettered
 * fetch stays replayable as before.
 */
export function writtenResult(data: Pick<WriteJob, 'items'>, fingerprint: string, archivedUri: string | undefined): StageResult {
  const stays = data.items.length === 0 ? { url: { fingerprint, state: 'd' as const } } : {};
  return { counters: { written: data.items.length, ...(archivedUri ? { archived: 1 } : {}) }, ...(archivedUri ? { archivedUri } : {}), ...stays };
}
