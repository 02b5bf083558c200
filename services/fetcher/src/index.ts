import { RetryableError, jobId, parseRetryAfter } from '@crawlfleet/core';
import { enqueueJobs } from '@crawlfleet/crawl';
import { UserAgentRotation, classifyResponse, encodeBody, fetchPage, isHtml } from '@crawlfleet/fetch';
import { GiveUpError, createStageWorker, runningStage, watchBackpressure, type FleetContext, type RunningStage } from '@crawlfleet/runtime';

export interface FetcherOptions {
  concurrency: number;
}

/** The fetch stage: download a page, hand its body to the parse stage compressed. */
export function startFetcher(ctx: FleetContext, options: FetcherOptions): RunningStage {
  const userAgents = new UserAgentRotation(ctx.env.userAgents);
  const worker = createStageWorker(ctx, {
    stage: 'fetch',
    concurrency: options.concurrency,
    handler: async ({ data, crawl, fingerprint, isLastAttempt }) => {
      const { spider } = crawl;
      const page = await fetchPage(data.url, spider, { userAgent: userAgents.pick(spider.userAgents) });
      const fetched = { counters: { fetched: 1 }, url: { fingerprint, state: 'd' } };
      const verdict = classifyResponse(page.status, spider);
      if (verdict.kind === 'retry' && !isLastAttempt) {
        const retryAfter = page.headers['retry-after'];
        throw new RetryableError('ERR_HTTP_STATUS', verdict.reason, { url: data.url }, { retryAfterMs: parseRetryAfter(Array.isArray(retryAfter) ? retryAfter[0] : retryAfter) });
      }
      if (verdict.kind !== 'ok') throw new GiveUpError('ERR_HTTP_STATUS', verdict.reason, fetched, { url: data.url, status: page.status });
      if (isHtml(page.contentType, page.body)) {
        await enqueueJobs(ctx.redis, ctx.keys, ctx.queues, 'parse', data.crawlId, [
          {
            id: jobId('parse', fingerprint),
            data: {
              crawlId: data.crawlId,
              url: data.url,
              finalUrl: page.url,
              depth: data.depth,
              status: page.status,
              contentType: page.contentType ?? '',
              fetchedAt: new Date().toISOString(),
              body: encodeBody(page.body),
            },
            opts: { attempts: 3, backoff: { type: 'crawlfleet' } },
          },
        ]);
      }
      return fetched;
    },
  });
  const stopWatching = watchBackpressure(worker, ctx.queues.parse, ctx.env.parseHighWater, ctx.log);
  return runningStage('fetch', worker, stopWatching);
}
