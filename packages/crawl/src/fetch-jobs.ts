import { runScript, type FetchJob, type Keys, type Queues, type Spider, type RedisClient } from '@crawlfleet/core';
import { admitUrls, takenRequests, uniqueCandidates, type Candidate, type FetchRequest, type FrontierTake, type TakenRequest } from '@crawlfleet/frontier';
import type { JobsOptions } from 'bullmq';
import type { SettledUrls } from './settled-urls.js';

export { frontierTake } from '@crawlfleet/frontier';

/**
 * URLs per admission script call. One script call holds Redis for every client while it runs; 1,000
 * URLs keep that to a millisecond or two, where a page's 100,000 links in one call would stall the
 * whole fleet (and overflow the call's argument list).
 */
export const ADMIT_CHUNK = 1000;

/** What an admission changed in the crawl's counters: URLs newly seen, and the change to skipped. */
export type AdmissionCounts = { seen: number; skipped: number };

/** Pure: a fetch job's payload from the request the frontier kept. */
export function fetchJobData(crawlId: string, r: FetchRequest): FetchJob {
  return { crawlId, url: r.url, depth: r.depth, ...(r.referer ? { referer: r.referer } : {}), ...(r.redirects ? { redirects: r.redirects } : {}), ...(r.meta ? { meta: r.meta } : {}) };
}

/** A fetch job's options: the spider's retries, crawlfleet's backoff. */
export function fetchJobOptions(spider: Spider): JobsOptions {
  return { attempts: spider.retry.attempts + 1, backoff: { type: 'crawlfleet' } };
}

/**
 * Adds the fetch jobs of requests that are pending already (taken from the frontier, or admitted
 * earlier and enqueued again: the job id makes that a no-op unless the job was lost).
 */
export async function enqueueFetches(queues: Queues, crawlId: string, spider: Spider, requests: TakenRequest[]): Promise<void> {
  if (requests.length === 0) return;
  const opts = fetchJobOptions(spider);
  await queues.fetch.addBulk(requests.map((t) => ({ name: 'fetch', data: fetchJobData(crawlId, t.request), opts: { ...opts, jobId: t.jobId } })));
}

/**
 * Admits URLs to the frontier, a chunk at a time, and enqueues what the admission took from the
 * frontier into the fetch stage. URLs beyond the crawl's window wait in the frontier until
 * finished fetch jobs make room (finishJob-11.lua) or the reconciler takes them.
 */
export async function admitAndEnqueue(
  redis: RedisClient,
  keys: Keys,
  queues: Queues,
  crawlId: string,
  spider: Spider,
  candidates: Candidate[],
  options: { take: FrontierTake; referer?: string; settled?: { urls: SettledUrls; scope: string } },
): Promise<AdmissionCounts> {
  const settled = options.settled;
  const unique = settled ? settled.urls.unsettled(settled.scope, uniqueCandidates(candidates)) : uniqueCandidates(candidates);
  const counts = { seen: 0, skipped: 0 };
  const referer = options.referer;
  const admitChunk = async (start: number) => {
    const chunk = unique.slice(start, start + ADMIT_CHUNK).map((c) => (referer ? { ...c, referer } : c));
    const { admitted, taken, skipped } = await admitUrls(redis, keys, crawlId, chunk, spider.maxPages, options.take);
    settled?.urls.settle(settled.scope, chunk);
    const again = admitted
      .filter((a) => !a.isNew)
      .map((a) => ({
        jobId: a.jobId,
        request: { url: a.url, depth: a.depth, ...(a.redirects ? { redirects: a.redirects } : {}), ...(referer ? { referer } : {}), ...(a.meta ? { meta: a.meta } : {}) },
      }));
    await enqueueFetches(queues, crawlId, spider, [...again, ...taken]);
    counts.seen += admitted.filter((a) => a.isNew).length;
    counts.skipped += skipped;
  };
  // Two chunks in flight: this process prepares the next (fingerprints, requests) while Redis runs
  // the last. Each chunk's admission is atomic on its own, so their order does not matter.
  let next = 0;
  const lane = async () => {
    while (next < unique.length) {
      const start = next;
      next += ADMIT_CHUNK;
      await admitChunk(start);
    }
  };
  await Promise.all([lane(), lane()]);
  return counts;
}

/**
 * Takes URLs from a running crawl's frontier into the fetch stage while its window has room, and
 * enqueues them: after a resume, and as the reconciler's backstop. Returns how many.
 */
export async function takeFromFrontier(redis: RedisClient, keys: Keys, queues: Queues, crawlId: string, spider: Spider, take: FrontierTake): Promise<number> {
  const k = keys.crawl(crawlId);
  let total = 0;
  for (;;) {
    const taken = takenRequests(await runScript<string[]>(redis, 'takeFrontier', [k.meta, k.frontier, k.pending.fetch, k.requests], [take.window, take.minBatch]));
    if (taken.length === 0) return total;
    await enqueueFetches(queues, crawlId, spider, taken);
    total += taken.length;
  }
}
