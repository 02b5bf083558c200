import type { LoadedSpiderModule, ParseJob } from '@crawlfleet/core';
import { type SettledUrls, admitAndEnqueue, crawlTake, noteInvalidReasons, type CrawlRecord } from '@crawlfleet/crawl';
import { extractResponse, runPageHooks } from '@crawlfleet/extract';
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
  const { page: data, crawl, fingerprint, incarnation, spiderModule, settledUrls } = input;
  const { spider } = crawl;
  const text = decodePage(data.body, data.contentType);
  const rules = extractResponse({ body: text, contentType: data.contentType, url: data.finalUrl }, spider, { crawlId: data.crawlId, fetchedAt: data.fetchedAt });
  const page = await runPageHooks(
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
  const { maxLinksPerPage } = spider.limits;
  const links = page.links.length > maxLinksPerPage ? page.links.slice(0, maxLinksPerPage) : page.links;
  // A crawl with WARC output archives every page, with its outlinks, whether it has items or not.
  const capture = data.capture ? { ...data.capture, outlinks: links.map((l) => l.url) } : undefined;
  // So does a crawl that keeps page records (recrawl): the URL's record goes to the pages store.
  // The write job names the URL the page was requested as, not where it landed (a redirect the
  // browser followed, a script that navigated): its partition is that URL's, where this job's finish
  // makes it pending. The items carry the final URL.
  const handOver =
    page.items.length > 0 || capture || data.page
      ? writeHandOver(ctx, fingerprint, { crawlId: data.crawlId, url: data.url, items: page.items, ...(capture ? { capture } : {}), ...(data.page ? { page: data.page } : {}) })
      : undefined;
  await noteInvalidReasons(ctx.redis, ctx.keys, data.crawlId, page.invalidReasons);
  const overflow = page.links.length - links.length;
  if (overflow > 0) ctx.log.info({ url: data.finalUrl, links: page.links.length, maxLinksPerPage, skipped: overflow }, 'page has more links than limits.maxLinksPerPage: the rest are skipped');
  const allowed = allowedHosts(spider);
  const candidates = links.map(({ url, depth, meta }) => ({ url, depth, verdict: scopeVerdict(url, depth, spider, allowed), ...(meta ? { meta } : {}) }));
  ctx.metrics.count(
    await admitAndEnqueue(ctx.redis, ctx.keys, ctx.queues, crawl, candidates, {
      referer: data.url,
      take: crawlTake(ctx.env.frontierWindow, crawl, spider),
      settled: { urls: settledUrls, scope: incarnation },
    }),
  );
  return { counters: { parsed: 1, items: page.items.length, invalid: page.invalid, skipped: overflow }, ...(handOver ? { handOver } : {}) };
}
