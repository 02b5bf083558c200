import type { LoadedSpiderModule, ParseJob } from '@crawlfleet/core';
import { type SettledUrls, admitAndEnqueue, crawlTake, noteInvalidReasons, type CrawlRecord } from '@crawlfleet/crawl';
import { extractResponse, runPageHooks, type PageLink, type PageOutput } from '@crawlfleet/extract';
import { decodePage } from '@crawlfleet/fetch';
import { allowedHosts, scopeVerdict } from '@crawlfleet/frontier';
import { writeHandOver, type FleetContext, type HandOver } from '@crawlfleet/runtime';

/** A fetched page as the parse needs it: the parse job's fields, with the body as bytes. */
export type FetchedPage = Omit<ParseJob, 'body'> & { body: Buffer };

export interface ParsePageInput {
  page: FetchedPage;
  crawl: CrawlRecord;
  fingerprint: string;
  incarnation: string;
  spiderModule?: LoadedSpiderModule;
  /** links this process saw settled in the crawl's frontier: not offered to Redis again */
  settledUrls: SettledUrls;
}

export interface ParsedPage {
  counters: { parsed: number; items: number; invalid: number; skipped: number };
  /** the page's write job, when it has items, an exchange to archive or a page record */
  handOver?: HandOver;
}

/**
 * Parse one fetched page: decode it as a browser would (a JSON page as JSON), apply the spider's
 * rules for its kind and then its code hooks, and send its new links to the frontier. The write job
 * is returned, for the finish of the job that parsed the page to hand over: the parse stage's job,
 * or a fetch job when the fetchers parse (PARSE_IN_FETCHER).
 */
export async function parsePage(ctx: FleetContext, input: ParsePageInput): Promise<ParsedPage> {
  const { page: data, crawl } = input;
  const { maxLinksPerPage } = crawl.spider.limits;
  const page = await runSpider(input);
  const { links, overflow } = capLinks(page.links, maxLinksPerPage);
  const handOver = writeJobOf(ctx, input, page.items, links);
  await noteInvalidReasons(ctx.redis, ctx.keys, data.crawlId, page.invalidReasons);
  if (overflow > 0) ctx.log.info({ url: data.finalUrl, links: page.links.length, maxLinksPerPage, skipped: overflow }, 'page has more links than limits.maxLinksPerPage: the rest are skipped');
  await admitLinks(ctx, input, links);
  return { counters: { parsed: 1, items: page.items.length, invalid: page.invalid, skipped: overflow }, ...(handOver ? { handOver } : {}) };
}

/** Decodes the page as a browser would, applies the spider's rules for its kind, then its code hooks. */
async function runSpider({ page: data, crawl, spiderModule }: ParsePageInput): Promise<PageOutput> {
  const { spider } = crawl;
  const text = decodePage(data.body, data.contentType);
  const rules = extractResponse({ body: text, contentType: data.contentType, url: data.finalUrl }, spider, { crawlId: data.crawlId, fetchedAt: data.fetchedAt });
  return runPageHooks(
    spiderModule,
    {
      url: data.finalUrl,
      requestedUrl: data.url,
      status: data.status,
      headers: data.headers ?? { 'content-type': data.contentType },
      contentType: data.contentType,
      text,
      doc: rules.doc,
      crawlId: data.crawlId,
      fetchedAt: data.fetchedAt,
      depth: data.depth,
      meta: data.meta ?? {},
    },
    spider,
    rules,
  );
}

/** Pure: the page's first `maxLinksPerPage` links, and how many past them are skipped. */
export function capLinks(all: PageLink[], maxLinksPerPage: number): { links: PageLink[]; overflow: number } {
  const links = all.length > maxLinksPerPage ? all.slice(0, maxLinksPerPage) : all;
  return { links, overflow: all.length - links.length };
}

/** The page's write job, when it has items, an exchange to archive or a page record. */
function writeJobOf(ctx: FleetContext, { page: data, fingerprint }: ParsePageInput, items: PageOutput['items'], links: PageLink[]): HandOver | undefined {
  // A crawl with WARC output archives every page, with its outlinks, whether it has items or not.
  const capture = data.capture ? { ...data.capture, outlinks: links.map((l) => l.url) } : undefined;
  // So does a crawl that keeps page records (recrawl): the URL's record goes to the pages store.
  // The write job names the URL the page was requested as, not where it landed (a redirect the
  // browser followed, a script that navigated): its partition is that URL's, where this job's finish
  // makes it pending. The items carry the final URL.
  return items.length > 0 || capture || data.page
    ? writeHandOver(ctx, fingerprint, { crawlId: data.crawlId, url: data.url, items, ...(capture ? { capture } : {}), ...(data.page ? { page: data.page } : {}) })
    : undefined;
}

/** Sends the page's links, each with its scope verdict, to the crawl's frontier. */
async function admitLinks(ctx: FleetContext, { page: data, crawl, incarnation, settledUrls }: ParsePageInput, links: PageLink[]): Promise<void> {
  const { spider } = crawl;
  const allowed = allowedHosts(spider);
  const candidates = links.map(({ url, depth, meta }) => ({ url, depth, verdict: scopeVerdict(url, depth, spider, allowed), ...(meta ? { meta } : {}) }));
  ctx.metrics.count(
    await admitAndEnqueue(ctx.redis, ctx.keys, ctx.queues, crawl, candidates, {
      referer: data.url,
      take: crawlTake(ctx.env.frontierWindow, crawl, spider),
      settled: { urls: settledUrls, scope: incarnation },
    }),
  );
}
