import type { Job } from 'bullmq';
import { STAGES, ConfigError, getStageJob, stageQueues, type Keys, type Queues, type Stage, type RedisClient } from '@crawlfleet/core';
import { settleCrawl } from './completion.js';
import { takeFromFrontier } from './fetch-jobs.js';
import { forgetLegacyCrawl, forgetPartitions } from './forget.js';
import { forgetCollectedCrawl, isCollected } from './gc.js';
import { CollectedCrawlError, allPartKeys, crawlTake, layoutOf, partKeysOfUrl, type CrawlLayout } from './layout.js';
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
  const k = partKeysOfUrl(keys, layout, url);
  try {
    await betweenSteps?.();
    await delayJob(redis, keys, layout, stage, job.id!, url, '', true);
    if ((await redis.hget(k.part, 'state')) === 'paused') return;
  } catch (err) {
    // Moved for a day but maybe not recorded parked (a Redis error, a failover of the partition's
    // master): no resume would promote it. It runs again now (and parks again if still paused); if
    // even this fails, the reconciler promotes a running crawl's jobs delayed past any legitimate
    // delay (STRANDED_DELAY_MS).
    await job.promote().catch(() => undefined);
    throw err;
  }
  // Resumed (or cancelled) while it was being parked: the resume may have looked before it was recorded.
  await redis.srem(k.parked[stage], job.id!);
  await job.promote().catch(() => undefined);
}

/**
 * The longest a job of a running crawl may legitimately wait in BullMQ's delayed set, unless its
 * spider obeys a longer Retry-After. The delays that exist: a retry's backoff (at most 60 s, or the
 * Retry-After it obeys, capped by the spider's retry.maxRetryAfterMs, 5 min by default), a host's
 * turn or hold (the host's delay, a robots.txt crawl-delay, a Retry-After hold, also capped by
 * maxRetryAfterMs), a hold-back (at most 30 s), a writer's wait for its store (at most 30 s), a job
 * waiting for its spider's deploy (a few seconds a try), an early job (1 s). Only a pause parks a
 * job longer (PAUSED_PARK_MS), and in a running crawl such a job was stranded by a park that failed
 * half-way. A job promoted early is safe anyway: it begins again, finds its wait (the host's turn,
 * the hold) not over, and waits again; exactly-once rests on the pending sets, not on the delay.
 */
export const STRANDED_DELAY_MS = 2 * 3600_000;

/**
 * A crawl's bound: STRANDED_DELAY_MS, or its spider's longest Retry-After and 10 minutes more. A
 * spider that obeys a Retry-After of nearly a day has no backstop but the day itself.
 */
export function strandedDelayBound(spider: { retry: { maxRetryAfterMs: number } }): number {
  return Math.max(STRANDED_DELAY_MS, spider.retry.maxRetryAfterMs + 10 * 60_000);
}

/**
 * Promotes the jobs of a running crawl that BullMQ keeps delayed until later than `boundMs` from
 * `nowMs` (Redis's clock): jobs a park for a pause moved for a day and then failed to record parked
 * (parkForPause), which no resume would promote. Returns how many.
 */
export async function promoteStranded(redis: RedisClient, keys: Keys, queues: Queues, layout: CrawlLayout, boundMs: number, nowMs: number): Promise<number> {
  let promoted = 0;
  for (const k of allPartKeys(keys, layout)) {
    for (const stage of STAGES) {
      let cursor = '0';
      do {
        const [next, ids] = await redis.sscan(k.delayed[stage], cursor, 'COUNT', 1000);
        cursor = next;
        if (ids.length === 0) continue;
        for (const queue of stageQueues(queues, stage)) {
          // One key (the queue's delayed set): one slot, so one pipeline on a cluster too.
          const pipeline = redis.pipeline();
          for (const id of ids) pipeline.zscore(queue.toKey('delayed'), id);
          const scores = ((await pipeline.exec()) ?? []).map(([, score]) => (typeof score === 'string' ? Number(score) : undefined));
          for (let i = 0; i < ids.length; i++) {
            // BullMQ's score of a delayed job: the time it is due (ms) times 0x1000, plus a counter.
            const score = scores[i];
            if (score === undefined || Math.floor(score / 0x1000) - nowMs <= boundMs) continue;
            const job = await queue.getJob(ids[i]!);
            if (
              job &&
              (await job.promote().then(
                () => true,
                () => false,
              ))
            )
              promoted++;
          }
        }
      } while (cursor !== '0');
    }
  }
  return promoted;
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
