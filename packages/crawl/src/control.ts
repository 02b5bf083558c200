import { KEEP_COMPLETED_FETCH_JOBS, STAGES, ConfigError, type Keys, type Queues, type Stage, type RedisClient } from '@crawlfleet/core';
import { checkDone } from './lifecycle.js';
import { getCrawlState, loadCrawl, type CrawlState } from './registry.js';
import { takeFromFrontier } from './fetch-jobs.js';
import { sumOverCrawls } from './status.js';
import type { FrontierTake } from '@crawlfleet/frontier';

async function requireState(redis: RedisClient, keys: Keys, crawlId: string): Promise<CrawlState> {
  const state = await getCrawlState(redis, keys, crawlId);
  if (!state) throw new ConfigError(`no crawl with id ${JSON.stringify(crawlId)} (crawlfleet status lists them)`);
  return state;
}

/** Workers park the jobs of a paused crawl (the stages' parked sets); resume promotes them back. */
export async function pauseCrawl(redis: RedisClient, keys: Keys, crawlId: string): Promise<CrawlState> {
  const state = await requireState(redis, keys, crawlId);
  if (state === 'running') await redis.hset(keys.crawl(crawlId).meta, 'state', 'paused');
  return state === 'running' ? 'paused' : state;
}

/** Resumes a paused crawl: its parked jobs run, and its frontier feeds the fetch stage again (`take`). */
export async function resumeCrawl(redis: RedisClient, keys: Keys, queues: Queues, crawlId: string, take: FrontierTake): Promise<CrawlState> {
  const state = await requireState(redis, keys, crawlId);
  if (state !== 'paused') return state;
  const k = keys.crawl(crawlId);
  await redis.hset(k.meta, 'state', 'running');
  await promoteParked(redis, keys, queues, crawlId);
  const crawl = await loadCrawl(redis, keys, crawlId);
  if (crawl) await takeFromFrontier(redis, keys, queues, crawlId, crawl.spider, take);
  return (await checkDone(redis, keys, crawlId)) ? 'done' : 'running';
}

/**
 * The jobs parked while the crawl was paused run now. Returns how many were promoted. Ids leave the
 * set as they are promoted, so a resume that dies half-way leaves the rest for the reconciler.
 */
export async function promoteParked(redis: RedisClient, keys: Keys, queues: Queues, crawlId: string): Promise<number> {
  const k = keys.crawl(crawlId);
  let promoted = 0;
  for (const stage of STAGES) {
    for (;;) {
      const ids = await redis.srandmember(k.parked[stage], 500);
      if (ids.length === 0) break;
      for (const id of ids) {
        const job = await queues[stage].getJob(id);
        if (job && (await job.isDelayed())) {
          await job.promote().catch(() => undefined);
          promoted++;
        }
      }
      await redis.srem(k.parked[stage], ...ids);
    }
  }
  return promoted;
}

/** How many jobs of a stage the paused crawls have parked (one round trip for every crawl). */
export function parkedJobs(redis: RedisClient, keys: Keys, stage: Stage): Promise<number> {
  return sumOverCrawls(redis, keys, 'paused', (k) => ['scard', k.parked[stage]]);
}

/** The crawl's waiting jobs (retries, waits for a host or proxy, a pause) run now. */
async function promoteDelayed(redis: RedisClient, keys: Keys, queues: Queues, crawlId: string): Promise<void> {
  const k = keys.crawl(crawlId);
  for (const stage of STAGES) {
    for (const id of await redis.smembers(k.delayed[stage])) {
      const job = await queues[stage].getJob(id);
      if (job && (await job.isDelayed())) await job.promote().catch(() => undefined);
    }
  }
}

/** Workers drop a cancelled crawl's jobs as they take them; its parked jobs are taken at once. */
export async function cancelCrawl(redis: RedisClient, keys: Keys, queues: Queues, crawlId: string): Promise<CrawlState> {
  const state = await requireState(redis, keys, crawlId);
  if (state === 'running' || state === 'paused') {
    await redis.hset(keys.crawl(crawlId).meta, 'state', 'cancelled', 'finishedAt', new Date().toISOString());
    await promoteDelayed(redis, keys, queues, crawlId);
    const k = keys.crawl(crawlId);
    await redis.del(...STAGES.map((s) => k.parked[s]));
    return 'cancelled';
  }
  return state;
}

/**
 * Forgets the crawl's queued jobs, frontier, dead letters (and their failed jobs in BullMQ, whose ids
 * would otherwise block the same URLs when the crawl runs again) and counters; stored items stay.
 */
export async function resetCrawl(redis: RedisClient, keys: Keys, queues: Queues, crawlId: string): Promise<{ removedJobs: number }> {
  await requireState(redis, keys, crawlId);
  const k = keys.crawl(crawlId);
  // Cancel first, so that workers drop this crawl's jobs while we remove them.
  await redis.hset(k.meta, 'state', 'cancelled');
  let removedJobs = 0;
  for (const stage of STAGES) {
    for (const id of await redis.smembers(k.pending[stage])) {
      const removed = await queues[stage].remove(id).catch(() => 0);
      removedJobs += removed;
    }
  }
  for (const id of await redis.hkeys(k.dead)) {
    for (const stage of STAGES) await queues[stage].remove(id).catch(() => 0);
  }
  // Completed fetch jobs stay a while for Bull Board (JOB_HISTORY): the crawl's own go too, or its
  // next run would find their ids taken.
  for (const job of await queues.fetch.getCompleted(0, KEEP_COMPLETED_FETCH_JOBS)) {
    if (job?.data?.crawlId === crawlId) await job.remove().catch(() => undefined);
  }
  await redis.unlink(...keys.allCrawlKeys(crawlId));
  await redis.srem(keys.crawlIndex(), crawlId);
  return { removedJobs };
}
