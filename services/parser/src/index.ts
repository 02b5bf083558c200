import { SettledUrls, admitAndEnqueue, crawlTake, noteInvalidReasons } from '@crawlfleet/crawl';
import { extractResponse, runPageHooks } from '@crawlfleet/extract';
import { decodeBody, decodePage } from '@crawlfleet/fetch';
import { allowedHosts, scopeVerdict } from '@crawlfleet/frontier';
import { CrawlBacklogs, createStageWorker, runningStage, watchBackpressure, writeHandOver, type FleetContext, type RunningStage } from '@crawlfleet/runtime';

export interface ParserOptions {
  concurrency: number;
}

/**
 * The parse stage: decode the page as a browser would (a JSON page as JSON), apply the spider's
 * rules for its kind (css rules to HTML, json rules to JSON; a body that is not JSON is dead-lettered
 * ERR_PARSE) and then its code hooks, send items to the writers and then new links to the frontier,
 * so a page's items never wait on its links.
 */
export function startParser(ctx: FleetContext, options: ParserOptions): RunningStage {
  // Links this parser saw settled in a crawl's frontier are not offered to Redis again.
  const settledUrls = new SettledUrls();
  const worker = createStageWorker(ctx, {
    stage: 'parse',
    concurrency: options.concurrency,
    holdBack: new CrawlBacklogs(ctx.redis, ctx.keys, 'write', ctx.env.writeHighWater),
    defaultAttempts: 3,
    runsHooks: true,
    handler: async ({ data, crawl, fingerprint, incarnation, spiderModule }) => {
      const { spider } = crawl;
      const text = decodePage(decodeBody(data.body, spider.limits.maxResponseBytes), data.contentType);
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
      // The write job: made pending by this job's finish, then added (the harness).
      // So does a crawl that keeps page records (recrawl): the URL's record goes to the pages store.
      const handOver =
        page.items.length > 0 || capture || data.page
          ? writeHandOver(ctx, fingerprint, { crawlId: data.crawlId, url: data.finalUrl, items: page.items, ...(capture ? { capture } : {}), ...(data.page ? { page: data.page } : {}) })
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
    },
  });
  const stopWatching = watchBackpressure(worker, ctx.queues.write, ctx.env.writeHighWater, ctx.log);
  return runningStage('parse', worker, stopWatching);
}
