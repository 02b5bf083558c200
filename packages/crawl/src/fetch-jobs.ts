import type { Redis } from 'ioredis';
import type { Keys, Queues, Spider } from '@crawlfleet/core';
import { admitUrls, type Candidate } from '@crawlfleet/frontier';
import { enqueueJobs } from './lifecycle.js';

/** Admits URLs to the frontier and enqueues a fetch job for each one to fetch. Returns how many were new. */
export async function admitAndEnqueue(redis: Redis, keys: Keys, queues: Queues, crawlId: string, spider: Spider, candidates: Candidate[], referer?: string): Promise<number> {
  const admitted = await admitUrls(redis, keys, crawlId, candidates, spider.maxPages);
  await enqueueJobs(
    redis,
    keys,
    queues,
    'fetch',
    crawlId,
    admitted.map((a) => ({
      id: a.jobId,
      data: { crawlId, url: a.url, depth: a.depth, ...(referer ? { referer } : {}) },
      opts: { attempts: spider.retry.attempts + 1, backoff: { type: 'crawlfleet' } },
    })),
    true,
  );
  return admitted.filter((a) => a.isNew).length;
}
