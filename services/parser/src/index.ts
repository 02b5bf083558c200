import { SettledUrls } from '@crawlfleet/crawl';
import { decodeBody } from '@crawlfleet/fetch';
import { CrawlBacklogs, createStageWorker, runningStage, watchBackpressure, type FleetContext, type RunningStage } from '@crawlfleet/runtime';
import { parsePage } from './parse-page.js';

export { parsePage, type FetchedPage, type ParsedPage, type ParsePageInput } from './parse-page.js';

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
      const { body, ...fields } = data;
      const page = { ...fields, body: decodeBody(body, crawl.spider.limits.maxResponseBytes) };
      return parsePage(ctx, { page, crawl, fingerprint, incarnation, spiderModule, settledUrls });
    },
  });
  const stopWatching = watchBackpressure(worker, ctx.queues.write, ctx.env.writeHighWater, ctx.log);
  return runningStage('parse', worker, stopWatching);
}
