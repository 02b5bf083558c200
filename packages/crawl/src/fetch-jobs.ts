import type { Redis } from 'ioredis';
import type { Keys, Queues, Spider } from '@crawlfleet/core';
import { admitUrls, uniqueCandidates, type Candidate } from '@crawlfleet/frontier';
import { enqueueJobs } from './lifecycle.js';

/**
 * URLs per admission script call and per addBulk. One script call holds Redis for every client while
 * it runs; 1,000 URLs keep that to a millisecond or two, where a page's 100,000 links in one call
 * would stall the whole fleet (and overflow the call's argument list).
 */
export const ADMIT_CHUNK = 1000;

/** What an admission changed in the crawl's counters: URLs newly seen, and the change to skipped. */
export type AdmissionCounts = { seen: number; skipped: number };

/** Admits URLs to the frontier and enqueues a fetch job for each one to fetch, a chunk at a time. */
export async function admitAndEnqueue(redis: Redis, keys: Keys, queues: Queues, crawlId: string, spider: Spider, candidates: Candidate[], referer?: string): Promise<AdmissionCounts> {
  const unique = uniqueCandidates(candidates);
  const counts = { seen: 0, skipped: 0 };
  for (let i = 0; i < unique.length; i += ADMIT_CHUNK) {
    const { admitted, skipped } = await admitUrls(redis, keys, crawlId, unique.slice(i, i + ADMIT_CHUNK), spider.maxPages);
    await enqueueJobs(
      redis,
      keys,
      queues,
      'fetch',
      crawlId,
      admitted.map((a) => ({
        id: a.jobId,
        data: { crawlId, url: a.url, depth: a.depth, ...(referer ? { referer } : {}), ...(a.redirects ? { redirects: a.redirects } : {}) },
        opts: { attempts: spider.retry.attempts + 1, backoff: { type: 'crawlfleet' } },
      })),
      true,
    );
    counts.seen += admitted.filter((a) => a.isNew).length;
    counts.skipped += skipped;
  }
  return counts;
}
