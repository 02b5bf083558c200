import { STAGES, ConfigError, type Keys, type PartKeys, type Queues, type Stage, type RedisClient } from '@crawlfleet/core';
import { settleCrawl } from './completion.js';
import { takeFromFrontier } from './fetch-jobs.js';
import { allPartKeys, crawlTake, layoutOf, type CrawlLayout } from './layout.js';
import { copyStateToPartitions, loadCrawl, type CrawlState } from './registry.js';
import { sumOverCrawls } from './status.js';

async function requireCrawl(redis: RedisClient, keys: Keys, crawlId: string): Promise<{ state: CrawlState; layout: CrawlLayout | 'legacy' }> {
  const [state, parts] = await redis.hmget(keys.crawl(crawlId).meta, 'state', 'parts');
  const layout = layoutOf(crawlId, { state, parts });
  if (!state || !layout) throw new ConfigError(`no crawl with id ${JSON.stringify(crawlId)} (crawlfleet status lists them)`);
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
          const job = await queues[stage].getJob(id);
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

/** How many jobs of a stage the paused crawls have parked (fleet-wide). */
export function parkedJobs(redis: RedisClient, keys: Keys, stage: Stage): Promise<number> {
  return sumOverCrawls(redis, keys, 'paused', (k) => ['scard', k.parked[stage]]);
}

/** The crawl's waiting jobs (retries, waits for a host or proxy, a pause) run now. */
async function promoteDelayed(redis: RedisClient, keys: Keys, queues: Queues, layout: CrawlLayout): Promise<void> {
  for (const k of allPartKeys(keys, layout)) {
    for (const stage of STAGES) {
      for (const id of await redis.smembers(k.delayed[stage])) {
        const job = await queues[stage].getJob(id);
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
 * would otherwise block the same URLs when the crawl runs again) and counters; stored items stay.
 */
export async function resetCrawl(redis: RedisClient, keys: Keys, queues: Queues, crawlId: string): Promise<{ removedJobs: number }> {
  const { layout } = await requireCrawl(redis, keys, crawlId);
  if (layout === 'legacy') return resetLegacyCrawl(redis, keys, queues, crawlId);
  // Cancel first, so that workers drop this crawl's jobs while we remove them.
  await setState(redis, keys, layout, 'cancelled');
  let removedJobs = 0;
  for (const k of allPartKeys(keys, layout)) {
    for (const stage of STAGES) {
      for (const id of await redis.smembers(k.pending[stage])) removedJobs += await queues[stage].remove(id).catch(() => 0);
    }
    for (const id of await redis.hkeys(k.dead)) {
      for (const stage of STAGES) await queues[stage].remove(id).catch(() => 0);
    }
    await unlinkPartition(redis, keys, k);
  }
  await redis.unlink(...keys.crawlOwnKeys(crawlId));
  await redis.srem(keys.crawlIndex(), crawlId);
  return { removedJobs };
}

/** Deletes a partition: its fixed keys, its index's buckets and its hosts' queues. */
async function unlinkPartition(redis: RedisClient, keys: Keys, k: PartKeys): Promise<void> {
  const [level, split] = (await redis.hmget(k.part, 'iL', 'is')).map((v) => Number(v ?? 0)) as [number, number];
  const buckets = 2 ** level + split;
  for (let from = 0; from < buckets; from += 1000) {
    await redis.unlink(...Array.from({ length: Math.min(1000, buckets - from) }, (_, i) => `${k.urlBucket}${from + i}`));
  }
  for (;;) {
    const hosts = await redis.zrange(k.backlog, 0, 999);
    if (hosts.length === 0) break;
    await redis.unlink(...hosts.map((h) => `${k.hostQueue}${h}`));
    await redis.zrem(k.backlog, ...hosts);
  }
  await redis.unlink(...keys.partFixedKeys(k));
}

/** A crawl of the layout before partitions: its keys, which all shared its tag, go. */
async function resetLegacyCrawl(redis: RedisClient, keys: Keys, queues: Queues, crawlId: string): Promise<{ removedJobs: number }> {
  const base = `${keys.prefix}:crawl:{${crawlId}}`;
  let removedJobs = 0;
  for (const stage of STAGES) {
    for (const id of await redis.smembers(`${base}:pending:${stage}`)) removedJobs += await queues[stage].remove(id).catch(() => 0);
  }
  const single = ['meta', 'counters', 'urls', 'frontier', 'dead', 'requests', 'suspects', 'rebuilds', 'seeding', 'invalid-reasons', 'file:identities', 'file:state'];
  const perStage = ['pending', 'active', 'delayed', 'parked'].flatMap((kind) => STAGES.map((stage) => `${kind}:${stage}`));
  await redis.unlink(...[...single, ...perStage].map((name) => `${base}:${name}`));
  await redis.srem(keys.crawlIndex(), crawlId);
  return { removedJobs };
}
