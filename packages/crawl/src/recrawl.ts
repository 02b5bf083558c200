import { createHash } from 'node:crypto';
import type { KnownPage, PageRecord, Spider } from '@crawlfleet/core';

/** What a visit found against the last one: a URL seen for the first time, a body that changed or not, or a 304. */
export type VisitOutcome = 'new' | 'changed' | 'unchanged' | 'notModified';

export type RecrawlSettings = NonNullable<Spider['recrawl']>;

/** The body's hash a page record keeps: SHA-1, hex, of the body with its Content-Encoding undone. */
export function bodyHash(body: Buffer): string {
  return createHash('sha1').update(body).digest('hex');
}

/** Pure: a visit's outcome, from its status and body hash against what the last visit learnt. */
export function visitOutcome(known: KnownPage | undefined, status: number, hash: string | undefined): VisitOutcome {
  if (!known) return 'new';
  if (status === 304) return 'notModified';
  return hash === known.hash ? 'unchanged' : 'changed';
}

/**
 * Pure: a URL's next recrawl interval. A page that changed is looked at twice as often, one that did
 * not half as often (as StormCrawler's adaptive scheduler and Heritrix's WaitEvaluator do), within
 * the spider's bounds; a new URL starts at `intervalHours`.
 */
export function nextIntervalS(outcome: VisitOutcome, previousS: number | undefined, settings: RecrawlSettings): number {
  const min = Math.round(settings.minIntervalHours * 3600);
  const max = Math.round(settings.maxIntervalHours * 3600);
  if (outcome === 'new' || previousS === undefined) return Math.round(settings.intervalHours * 3600);
  const next = outcome === 'changed' ? Math.floor(previousS / 2) : previousS * 2;
  return Math.min(max, Math.max(min, next));
}

export interface Visit {
  url: string;
  depth: number;
  status: number;
  etag?: string | undefined;
  lastModified?: string | undefined;
  /** the body's hash; a 304 has none (the last visit's stands) */
  hash?: string | undefined;
  at: Date;
  lastmod?: string | undefined;
}

/**
 * Pure: the URL's record after a visit. A 304 keeps the last visit's hash and validators (a new ETag
 * or Last-Modified it sends replaces the old), and when it last changed; so does an unchanged body.
 */
export function pageRecordAfter(visit: Visit, known: KnownPage | undefined, settings: RecrawlSettings): { record: PageRecord; outcome: VisitOutcome } {
  const outcome = visitOutcome(known, visit.status, visit.hash);
  const intervalS = nextIntervalS(outcome, known?.intervalS, settings);
  const kept = outcome === 'notModified' || outcome === 'unchanged';
  const etag = visit.etag ?? (outcome === 'notModified' ? known?.etag : undefined);
  const lastModified = visit.lastModified ?? (outcome === 'notModified' ? known?.lastModified : undefined);
  const record: PageRecord = {
    url: visit.url,
    depth: visit.depth,
    status: outcome === 'notModified' ? 200 : visit.status,
    ...(etag ? { etag } : {}),
    ...(lastModified ? { lastModified } : {}),
    hash: (outcome === 'notModified' ? known?.hash : visit.hash) ?? bodyHash(Buffer.alloc(0)),
    lastSeenAt: visit.at.toISOString(),
    changedAt: kept && known ? known.changedAt : visit.at.toISOString(),
    intervalS,
    dueAt: new Date(visit.at.getTime() + intervalS * 1000).toISOString(),
    ...(visit.lastmod ? { lastmod: visit.lastmod } : {}),
  };
  return { record, outcome };
}

/** Pure: what a recrawl's fetch job carries of a URL's record. */
export function knownPageOf(record: PageRecord): KnownPage {
  return {
    ...(record.etag ? { etag: record.etag } : {}),
    ...(record.lastModified ? { lastModified: record.lastModified } : {}),
    hash: record.hash,
    changedAt: record.changedAt,
    intervalS: record.intervalS,
  };
}

/**
 * Pure: whether a recrawl with `--due` takes the URL now: its interval has passed, or its sitemap
 * says it changed after the last visit (a `<lastmod>` read by this recrawl, newer than lastSeenAt).
 */
export function isDue(record: PageRecord, now: Date, sitemapLastmod?: string): boolean {
  if (sitemapLastmod && Date.parse(sitemapLastmod) > Date.parse(record.lastSeenAt)) return true;
  if (sitemapLastmod && Date.parse(sitemapLastmod) <= Date.parse(record.lastSeenAt)) return false;
  return Date.parse(record.dueAt) <= now.getTime();
}

/** Pure: conditional request headers from what the last visit learnt. */
export function conditionalHeaders(known: KnownPage | undefined): Record<string, string> {
  if (!known) return {};
  return { ...(known.etag ? { 'if-none-match': known.etag } : {}), ...(known.lastModified ? { 'if-modified-since': known.lastModified } : {}) };
}
