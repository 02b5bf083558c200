import { RetryableError, type FetchJob } from '@crawlfleet/core';
import { partKeysOfUrl } from '@crawlfleet/crawl';
import type { ResponseVerdict } from '@crawlfleet/fetch';
import { GiveUpError, type StageResult } from '@crawlfleet/runtime';
import { toWriters, visitRecord, type Answer } from './answer.js';
import { followRedirect } from './redirect.js';

/** What a page's verdict makes of its job (responseStep). */
export type ResponseStep =
  | { kind: 'notModified' }
  | { kind: 'blocked'; reason: string }
  | { kind: 'redirect'; location: string }
  | { kind: 'retry'; reason: string }
  | { kind: 'giveUp'; reason: string }
  | { kind: 'ok' };

export interface ResponseFacts {
  status: number;
  /** the spider recrawls (`recrawl`) */
  recrawls: boolean;
  /** the job knows the URL's last visit (a recrawl's `known`) */
  known: boolean;
  /** no retry follows this attempt */
  isLastAttempt: boolean;
}

/**
 * Pure: what the job does with its page, from the verdict (classifyResponse) and the job's facts. A
 * recrawl's 304 is the page as it was, whatever the verdict; a retry status on the last attempt gives
 * up, as a failure does; an `ok` page goes on to be recorded and parsed.
 */
export function responseStep(verdict: ResponseVerdict, facts: ResponseFacts): ResponseStep {
  if (facts.recrawls && facts.known && facts.status === 304) return { kind: 'notModified' };
  switch (verdict.kind) {
    case 'blocked':
      return { kind: 'blocked', reason: verdict.reason };
    case 'redirect':
      return { kind: 'redirect', location: verdict.location };
    case 'retry':
      return facts.isLastAttempt ? { kind: 'giveUp', reason: verdict.reason } : { kind: 'retry', reason: verdict.reason };
    case 'fail':
      return { kind: 'giveUp', reason: verdict.reason };
    case 'ok':
      return { kind: 'ok' };
  }
}

/**
 * Classify: the end the verdict gives the job (a recrawl's 304, a block, a redirect to another
 * origin, a retry, a give-up), or undefined for a page to keep.
 */
export async function settleVerdict(answer: Answer): Promise<StageResult | undefined> {
  const { run, page, fetched, archive } = answer;
  const { data, crawl } = run;
  const step = responseStep(answer.verdict, { status: page.status, recrawls: Boolean(crawl.spider.recrawl), known: Boolean(data.known), isLastAttempt: run.isLastAttempt });
  switch (step.kind) {
    case 'notModified':
      // A recrawl's 304: the page is as it was; its record is refreshed, and it is not parsed again.
      return { ...fetched, counters: { fetched: 1, notModified: 1 }, ...toWriters(answer, visitRecord(answer, crawl.spider.recrawl!, 304).record) };
    case 'blocked':
      return await retryBlocked(answer, step.reason);
    case 'redirect':
      return await followRedirect(answer, step.location);
    case 'retry':
      throw new RetryableError('ERR_HTTP_STATUS', step.reason, { url: data.url }, { retryAfterMs: answer.retryAfterMs });
    case 'giveUp':
      throw new GiveUpError('ERR_HTTP_STATUS', step.reason, { ...fetched, ...archive }, { url: data.url, status: page.status });
    case 'ok':
      return undefined;
  }
}

/** A block: counted, then retried through another proxy (this one avoided), or given up on the last attempt. */
async function retryBlocked(answer: Answer, reason: string): Promise<never> {
  const { stage, run, page, proxy } = answer;
  const { ctx } = stage;
  const { data } = run;
  await ctx.redis.hincrby(partKeysOfUrl(ctx.keys, run.crawl, data.url).counters, 'blocked', 1);
  ctx.metrics.count({ blocked: 1 });
  if (run.isLastAttempt) throw new GiveUpError('ERR_BLOCKED', reason, { ...answer.fetched, ...answer.archive }, { url: data.url, status: page.status, proxy: proxy?.label });
  if (proxy) await run.job.updateData({ ...data, avoidProxies: [...new Set([...(data.avoidProxies ?? []), proxy.id])] } satisfies FetchJob);
  throw new RetryableError('ERR_BLOCKED', reason, { url: data.url, proxy: proxy?.label }, { retryAfterMs: answer.retryAfterMs });
}
