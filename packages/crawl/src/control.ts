import type { Job } from 'bullmq';
import { STAGES, ConfigError, getStageJob, type Keys, type Queues, type Stage, type RedisClient } from '@crawlfleet/core';
import { settleCrawl } from './completion.js';
import { takeFromFrontier } from './fetch-jobs.js';
import { forgetLegacyCrawl, forgetPartitions } from './forget.js';
import { CollectedCrawlError, forgetCollectedCrawl, isCollected } from './gc.js';
import { allPartKeys, crawlTake, layoutOf, partKeysOfUrl, type CrawlLayout } from './layout.js';
import { delayJob } from './lifecycle.js';
import { copyStateToPartitions, loadCrawl, type CrawlState } from './registry.js';
import { sumOverCrawls } from './status.js';

async function requireCrawl(redis: RedisClient, keys: Keys, crawlId: string): Promise<{ state: CrawlState; layout: CrawlLayout | 'legacy' }> {
  const [state, parts, collectedAt] = await redis.hmget(keys.crawl(crawlId).meta, 'state', 'parts', 'collectedAt');
  const layout = layoutOf(crawlId, { state, parts });
  if (!state || !layout) throw new ConfigError(`no crawl with id ${JSON.stringify(crawlId)} (crawlfleet status lists them)`);
  if (collectedAt) throw new CollectedCrawlError(crawlId, collectedAt);
  return { state: state as CrawlState, layout };
}

async function requireLayout(redis: RedisClient, keys: Keys, crawlId: string): Promise<{ state: CrawlState; layout: CrawlLayout }> {
  const { state, layout } = await requireCrawl(redis, keys, crawlId);
  if (layout === 'legacy') throw new ConfigError(`crawl ${crawlId} was registered by a crawlfleet older than its partitioned frontier: control it with that fleet, or reset it`);
  return { state, layout };
}

/** Sets the crawl's state in its meta and in every partition's copy (which a job's begin reads). */
async function setState(redis: RedisClient, keys: Keys, layout: CrawlLayout, state: CrawlState, extra: string[] = []): Promise<void> {
  await redis.hset(keys.crawl(layout.crawlId).meta, 'state', state, ...extra);
  await copyStateToPartitions(redis, keys, layout, { state });
}

/** Workers park the jobs of a paused crawl (the stages' parked sets); resume promotes them back. */
export async function pauseCrawl(redis: RedisClient, keys: Keys, crawlId: string): Promise<CrawlState> {
  const { state, layout } = await requireLayout(redis, keys, crawlId);
  if (state !== 'running') return state;
  await setState(redis, keys, layout, 'paused');
  return 'paused';
}

/** Resumes a paused crawl: its parked jobs run, and its frontier feeds the fetch stage again (`window`: FRONTIER_WINDOW). */
export async function resumeCrawl(redis: RedisClient, keys: Keys, queues: Queues, crawlId: string, window: number): Promise<CrawlState> {
  const { state, layout } = await requireLayout(redis, keys, crawlId);
  if (state !== 'paused') return state;
  await setState(redis, keys, layout, 'running');
  await promoteParked(redis, keys, queues, layout);
  const crawl = await loadCrawl(redis, keys, crawlId);
  if (crawl) await takeFromFrontier(redis, keys, queues, crawl, crawlTake(window, crawl, crawl.spider));
  return (await settleCrawl(redis, keys, layout)) ? 'done' : 'running';
}

/**
 * The jobs parked while the crawl was paused run now. Returns how many were promoted. Ids leave the
 * set as they are promoted, so a resume that dies half-way leaves the rest for the reconciler.
 */
export async function promoteParked(redis: RedisClient, keys: Keys, queues: Queues, layout: CrawlLayout): Promise<number> {
  let promoted = 0;
  for (const k of allPartKeys(keys, layout)) {
    for (const stage of STAGES) {
      for (;;) {
        const ids = await redis.srandmember(k.parked[stage], 500);
        if (ids.length === 0) break;
        for (const id of ids) {
          const job = await getStageJob(queues, stage, id);
          if (job && (await job.isDelayed())) {
            await job.promote().catch(() => undefined);
            promoted++;
          }
        }
        await redis.srem(k.parked[stage], ...ids);
      }
    }
  }
  return promoted;
}

/**
 * A paused crawl's job is parked for this long; resume promotes it at once (the stage's parked set),
 * so a paused crawl costs nothing while it waits. The bound is only a backstop.
 */
export const PAUSED_PARK_MS = 24 * 3600_000;

/**
 * Parks a job of a paused crawl (its worker holds it, `token` its lock) until the crawl is resumed.
 * The job moves to BullMQ's delayed set first, and is recorded parked after: a resume
 * (promoteParked) skips a job that is still active, so a job recorded parked before its move could
 * miss the resume and wait the whole PAUSED_PARK_MS. Recorded after, it is either in the parked set
 * while its partition still says paused (the resume comes later and promotes it), or it finds the
 * crawl running again (or cancelled) and promotes itself. `betweenSteps` is a test hook: it runs
 * between the two steps, where a resume may land.
 */
export async function parkForPause(
  redis: RedisClient,
  keys: Keys,
  layout: CrawlLayout,
  stage: Stage,
  job: Job,
  token: string | undefined,
  url: string,
  betweenSteps?: () => Promise<void>,
): Promise<void> {
  await job.moveToDelayed(Date.now() + PAUSED_PARK_MS, token);
  await betweenSteps?.();
  const k = partKeysOfUrl(keys, layout, url);
  await delayJob(redis, keys, layout, stage, job.id!, url, '', true);
  if ((await redis.hget(k.part, 'state')) === 'paused') return;
  // Resumed (or cancelled) while it was being parked: the resume may have looked before it was recorded.
  await redis.srem(k.parked[stage], job.id!);
  await job.promote().catch(() => undefined);
}

/** How many jobs of a stage the paused crawls have parked (fleet-wide). */
export function parkedJobs(redis: RedisClient, keys: Keys, stage: Stage): Promise<number> {
  return sumOverCrawls(redis, keys, 'paused', (k) => ['scard', k.parked[stage]]);
}

/** The crawl's waiting jobs (retries, waits for a host or proxy, a pause) run now. */
async function promoteDelayed(redis: RedisClient, keys: Keys, queues: Queues, layout: CrawlLayout): Promise<void> {
  for (const k of allPartKeys(keys, layout)) {
    for (const stage of STAGES) {
      for (const id of await redis.smembers(k.delayed[stage])) {
        const job = await getStageJob(queues, stage, id);
        if (job && (await job.isDelayed())) await job.promote().catch(() => undefined);
      }
    }
  }
}

/** Workers drop a cancelled crawl's jobs as they take them; its parked jobs are taken at once. */
export async function cancelCrawl(redis: RedisClient, keys: Keys, queues: Queues, crawlId: string): Promise<CrawlState> {
  const { state, layout } = await requireLayout(redis, keys, crawlId);
  if (state !== 'running' && state !== 'paused') return state;
  await setState(redis, keys, layout, 'cancelled', ['finishedAt', new Date().toISOString()]);
  await promoteDelayed(redis, keys, queues, layout);
  await Promise.all(allPartKeys(keys, layout).map((k) => redis.del(...STAGES.map((s) => k.parked[s]))));
  return 'cancelled';
}

/**
 * Forgets the crawl's queued jobs, frontier, dead letters (and their failed jobs in BullMQ, whose ids
 * would otherwise block the same URLs when the crawl runs again) and counters; stored items stay. A
 * collected crawl's summary goes, and its id can be crawled again from scratch.
 */
export async function resetCrawl(redis: RedisClient, keys: Keys, queues: Queues, crawlId: string): Promise<{ removedJobs: number }> {
  if (await isCollected(redis, keys, crawlId)) return { removedJobs: (await forgetCollectedCrawl(redis, keys, queues, crawlId)).queuedJobs };
  const { layout } = await requireCrawl(redis, keys, crawlId);
  if (layout === 'legacy') {
    const { queuedJobs } = await forgetLegacyCrawl(redis, keys, queues, crawlId);
    await redis.srem(keys.crawlIndex(), crawlId);
    return { removedJobs: queuedJobs };
  }
  // Cancel first, so that workers drop this crawl's jobs while we remove them.
  await setState(redis, keys, layout, 'cancelled');
  const { queuedJobs } = await forgetPartitions(redis, keys, queues, layout);
  await redis.unlink(...keys.crawlOwnKeys(crawlId));
  await redis.srem(keys.crawlIndex(), crawlId);
  return { removedJobs: queuedJobs };
}
