import { jobId } from '@crawlfleet/core';
import { admitAndEnqueue, enqueueJobs } from '@crawlfleet/crawl';
import { extractPage } from '@crawlfleet/extract';
import { decodeBody } from '@crawlfleet/fetch';
import { allowedHosts, scopeVerdict } from '@crawlfleet/frontier';
import { createStageWorker, runningStage, watchBackpressure, type FleetContext, type RunningStage } from '@crawlfleet/runtime';

export interface ParserOptions {
  concurrency: number;
}

/** The parse stage: apply the spider's rules, send items to the writers and new links to the frontier. */
export function startParser(ctx: FleetContext, options: ParserOptions): RunningStage {
  const worker = createStageWorker(ctx, {
    stage: 'parse',
    concurrency: options.concurrency,
    defaultAttempts: 3,
    handler: async ({ data, crawl, fingerprint }) => {
      const { spider } = crawl;
      const html = decodeBody(data.body, spider.limits.maxResponseBytes);
      const page = extractPage(html, data.finalUrl, spider, { crawlId: data.crawlId, fetchedAt: data.fetchedAt });
      const depth = data.depth + 1;
      const allowed = allowedHosts(spider);
      const candidates = page.links.map((url) => ({ url, depth, verdict: scopeVerdict(url, depth, spider, allowed) }));
      await admitAndEnqueue(ctx.redis, ctx.keys, ctx.queues, data.crawlId, spider, candidates, data.url);
      if (page.items.length > 0) {
        await enqueueJobs(ctx.redis, ctx.keys, ctx.queues, 'write', data.crawlId, [
          { id: jobId('write', fingerprint), data: { crawlId: data.crawlId, url: data.finalUrl, items: page.items }, opts: { attempts: 10, backoff: { type: 'crawlfleet' } } },
        ]);
      }
      return { counters: { parsed: 1, items: page.items.length, invalid: page.invalid } };
    },
  });
  const stopWatching = watchBackpressure(worker, ctx.queues.write, ctx.env.writeHighWater, ctx.log);
  return runningStage('parse', worker, stopWatching);
}
