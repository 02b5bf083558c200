import type { PageRecord, WireCapture } from '@crawlfleet/core';
import { pageRecordAfter, type RecrawlSettings } from '@crawlfleet/crawl';
import { captureOf, headerValue, type FetchResult, type ResponseVerdict } from '@crawlfleet/fetch';
import type { HostTurnReport, PoliteFetchOutcome, ProxyEntry } from '@crawlfleet/politeness';
import { writeHandOver, type HandOver } from '@crawlfleet/runtime';
import type { FetchJobInput, FetchStage } from './fetch-context.js';

/** A polite fetch that brought a page back. */
export type PageOutcome = Extract<PoliteFetchOutcome, { kind: 'response' }>;

/** The fetch's own effects on the job's finish: counted fetched (and rendered), its URL done, its host's report. */
export interface Fetched {
  counters: { fetched: number; rendered?: number };
  url: { fingerprint: string; state: string };
  host: HostTurnReport;
}

/** What the writers receive of a page besides items: its write job, when it has a capture or a record. */
export type ToWriters = { handOver?: HandOver };

/** The page a fetch job brought back, as every step after the fetch reads it. */
export interface Answer {
  stage: FetchStage;
  run: FetchJobInput;
  page: FetchResult;
  /** classifyResponse's verdict on the page */
  verdict: ResponseVerdict;
  /** the proxy the page came through; undefined: direct */
  proxy: ProxyEntry | undefined;
  /** the server's Retry-After (capped), for a retry */
  retryAfterMs: number | undefined;
  visitedAt: Date;
  /** visitedAt, as the parse and write jobs carry it */
  fetchedAt: string;
  /** the exchange as on the wire (WARC output) */
  capture: WireCapture | undefined;
  fetched: Fetched;
  /** a page that is not parsed goes straight to the writers to be archived: its write job */
  archive: ToWriters;
}

/**
 * Pure: a rendered page's requests to its own host (scripts, XHR) count against the host as requests
 * of its own would: its next turn comes that many delays later.
 */
export function hostAfterPage(host: HostTurnReport, hostRequests: number | undefined): HostTurnReport {
  return hostRequests ? { ...host, startedAt: host.startedAt + hostRequests * host.delayMs } : host;
}

/** The page as the steps after the fetch read it; the response is counted (metrics) on the way. */
export function answerOf(stage: FetchStage, run: FetchJobInput, outcome: PageOutcome): Answer {
  const { page } = outcome;
  const visitedAt = new Date();
  const fetchedAt = visitedAt.toISOString();
  stage.ctx.metrics.response(page.status, page.elapsedMs / 1000, page.body.length);
  // What goes to the writers besides items: the exchange (WARC output), the URL's record (recrawl).
  const capture = captureOf(page, fetchedAt);
  const host = hostAfterPage(outcome.host, page.hostRequests);
  const fetched = { counters: { fetched: 1, ...(stage.renderer ? { rendered: 1 } : {}) }, url: { fingerprint: run.fingerprint, state: 'd' }, host };
  const { verdict, proxy, retryAfterMs } = outcome;
  const answer = { stage, run, page, verdict, proxy, retryAfterMs, visitedAt, fetchedAt, capture, fetched };
  // A page that is not parsed goes straight to the writers to be archived.
  return { ...answer, archive: toWriters(answer) };
}

/** The write job of a page without items: its exchange (WARC output) and its record (recrawl); none when it has neither. */
export function toWriters(answer: Pick<Answer, 'stage' | 'run' | 'capture'>, record?: PageRecord): ToWriters {
  const { capture } = answer;
  const { data, fingerprint } = answer.run;
  return capture || record
    ? { handOver: writeHandOver(answer.stage.ctx, fingerprint, { crawlId: data.crawlId, url: data.url, items: [], ...(capture ? { capture } : {}), ...(record ? { page: record } : {}) }) }
    : {};
}

/** Pure: the URL's record after this visit of a recrawl, and what the visit found (pageRecordAfter). */
export function visitRecord(answer: Pick<Answer, 'run' | 'page' | 'visitedAt'>, recrawl: RecrawlSettings, status: number, hash?: string): ReturnType<typeof pageRecordAfter> {
  const { data } = answer.run;
  const { headers } = answer.page;
  return pageRecordAfter(
    { url: data.url, depth: data.depth, status, etag: headerValue(headers, 'etag'), lastModified: headerValue(headers, 'last-modified'), hash, at: answer.visitedAt, lastmod: data.lastmod },
    data.known,
    recrawl,
  );
}
