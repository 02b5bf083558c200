import { STAGES, stageQueues, runScript, type Keys, type Queues, type RedisClient } from '@crawlfleet/core';
import { forgetLegacyCrawl, forgetPartitions, type Forgotten } from './forget.js';
import { getStatus } from './status.js';
import { summaryFields } from './summary.js';

/**
 * Retention: a crawl that finished (done, failed or cancelled) before the cutoff leaves Redis, all
 * but a summary of a few hundred bytes that `status` still shows. With `noeviction`, state that
 * only grows stops the fleet one day (DESIGN.md, "Redis"); and every status, scrape and reconciler
 * round reads every crawl of the crawl index, so the index must hold live crawls, not history.
 *
 * Collecting a crawl:
 * 1. its status is read (the counters summed over its partitions) and made into a summary;
 * 2. collectCrawl-2.lua replaces its meta by the summary, only if the crawl is still finished before
 *    the cutoff, no seed or replay opened meanwhile (gen), none is open; the meta keeps `gcParts`;
 * 3. its jobs leave BullMQ (queued ones, and its dead letters' failed jobs), and every key of every
 *    partition and of its own slot but the meta is unlinked, in batches (forget.ts);
 * 4. `gcParts` goes, and the crawl moves from the crawl index to the collected index.
 * Then each queue's event stream (BullMQ's job history: added, active, completed, ...; capped at
 * about 10,000 entries a queue, nothing in the fleet reads it) loses its entries older than the
 * cutoff too: the history of the jobs of collected crawls.
 * A gc cut short after step 2 is finished by the next (the crawl is still in the crawl index, with
 * `gcParts`); two at once do the same work twice, harmlessly.
 */

/** The collected index: the crawls of which only a summary is left. */
export async function listCollectedCrawlIds(redis: RedisClient, keys: Keys): Promise<string[]> {
  return (await redis.smembers(keys.collectedCrawlIndex())).sort();
}

export async function isCollected(redis: RedisClient, keys: Keys, crawlId: string): Promise<boolean> {
  return (await redis.hexists(keys.crawl(crawlId).meta, 'collectedAt')) === 1;
}

/** What gc does with a crawl: collect it; resume or finish a collection cut short; leave it (too recent, or live). */
export type GcVerdict = 'collect' | 'resume' | 'finish' | 'recent' | 'live';

/** A meta field as HMGET reads it: absent fields are null. */
type Field = string | null | undefined;

export interface GcMeta {
  state: Field;
  finishedAt: Field;
  startedAt: Field;
  collectedAt: Field;
  gcParts: Field;
}

/** Pure: gc's verdict on a crawl from its meta and the cutoff (ISO 8601, UTC: compared as text, as the script does). */
export function gcVerdict(meta: GcMeta, cutoff: string): GcVerdict {
  if (meta.collectedAt) return meta.gcParts != null ? 'resume' : 'finish';
  if (meta.state !== 'done' && meta.state !== 'failed' && meta.state !== 'cancelled') return 'live';
  const finished = meta.finishedAt || meta.startedAt || '';
  return finished !== '' && finished <= cutoff ? 'collect' : 'recent';
}

export interface CollectedCrawl {
  crawlId: string;
  state: string;
  finishedAt: string | null;
  /** BullMQ jobs removed: queued ones and the dead letters' failed jobs */
  jobs: number;
  /** keys unlinked */
  keys: number;
}

export interface GcOptions {
  /** collect the crawls that finished at or before this moment */
  finishedBefore: Date;
  /** only say which crawls would be collected */
  dryRun?: boolean;
  /** at most this many crawls, the oldest first (a reconciler's round) */
  limit?: number;
  /** after each crawl collected: the crawl, how many are done, how many there are */
  onCollected?: (crawl: CollectedCrawl, done: number, total: number) => void;
}

export interface GcReport {
  finishedBefore: string;
  dryRun: boolean;
  /** collected (or, in a dry run, to be collected), the oldest first */
  collected: CollectedCrawl[];
  /** finished crawls younger than the cutoff, kept */
  recent: number;
  /** running or paused crawls */
  live: number;
  /** entries older than the cutoff removed from the queues' event streams */
  events: number;
}

/** Collects the finished crawls past the cutoff (see the top of this file). */
export async function collectFinishedCrawls(redis: RedisClient, keys: Keys, queues: Queues, options: GcOptions): Promise<GcReport> {
  const cutoff = options.finishedBefore.toISOString();
  const ids = await redis.smembers(keys.crawlIndex());
  const metas = await Promise.all(ids.map((id) => redis.hmget(keys.crawl(id).meta, 'state', 'finishedAt', 'startedAt', 'collectedAt', 'gcParts')));
  const readings = ids.map((crawlId, i) => {
    const [state, finishedAt, startedAt, collectedAt, gcParts] = metas[i]!;
    const meta = { state, finishedAt, startedAt, collectedAt, gcParts };
    return { crawlId, meta, verdict: gcVerdict(meta, cutoff) };
  });
  const count = (verdict: GcVerdict) => readings.filter((r) => r.verdict === verdict).length;
  const due = readings
    .filter((r) => r.verdict === 'collect' || r.verdict === 'resume' || r.verdict === 'finish')
    .sort((a, b) => (a.meta.finishedAt ?? '').localeCompare(b.meta.finishedAt ?? '') || a.crawlId.localeCompare(b.crawlId))
    .slice(0, options.limit ?? Number.POSITIVE_INFINITY);
  const report: GcReport = { finishedBefore: cutoff, dryRun: options.dryRun === true, collected: [], recent: count('recent'), live: count('live'), events: 0 };
  for (const { crawlId, meta } of due) {
    const collected = options.dryRun ? { crawlId, state: meta.state ?? '', finishedAt: meta.finishedAt ?? null, jobs: 0, keys: 0 } : await collectCrawl(redis, keys, queues, crawlId, cutoff);
    if (!collected) continue;
    report.collected.push(collected);
    options.onCollected?.(collected, report.collected.length, due.length);
  }
  if (!options.dryRun) report.events = await trimQueueEvents(redis, queues, options.finishedBefore.getTime());
  return report;
}

/** Removes the entries older than `beforeMs` from each queue's event stream (stream ids are Redis's ms); returns how many. */
export async function trimQueueEvents(redis: RedisClient, queues: Queues, beforeMs: number): Promise<number> {
  const trimmed = await Promise.all(STAGES.flatMap((stage) => stageQueues(queues, stage)).map((queue) => redis.xtrim(queue.toKey('events'), 'MINID', String(Math.max(0, Math.floor(beforeMs))))));
  return trimmed.reduce((a, b) => a + b, 0);
}

/**
 * Collects one crawl finished at or before `cutoff` (ISO 8601), or finishes its collection; undefined
 * when it is not to be collected (any more: a seed or replay ran it again meanwhile).
 */
export async function collectCrawl(redis: RedisClient, keys: Keys, queues: Queues, crawlId: string, cutoff: string): Promise<CollectedCrawl | undefined> {
  const k = keys.crawl(crawlId);
  const [state, finishedAt, gen, sink, collectedAt, gcParts] = await redis.hmget(k.meta, 'state', 'finishedAt', 'gen', 'sink', 'collectedAt', 'gcParts');
  let parts = gcParts ?? null;
  if (!collectedAt) {
    const status = await getStatus(redis, keys, crawlId);
    if (!status) return undefined;
    const summary = Object.entries(summaryFields(status, sink ?? null)).flat();
    const claimed = await runScript<number>(redis, 'collectCrawl', [k.meta, k.seeding], [cutoff, gen ?? '0', new Date().toISOString(), ...summary]);
    if (claimed < 0) return undefined;
    parts = String(claimed);
  }
  const forgotten = parts !== null ? await forgetCrawlState(redis, keys, queues, crawlId, Number(parts)) : { queuedJobs: 0, deadJobs: 0, keys: 0 };
  if (parts !== null) await redis.hdel(k.meta, 'gcParts');
  await redis.sadd(keys.collectedCrawlIndex(), crawlId);
  await redis.srem(keys.crawlIndex(), crawlId);
  return { crawlId, state: state ?? '', finishedAt: finishedAt ?? null, jobs: forgotten.queuedJobs + forgotten.deadJobs, keys: forgotten.keys };
}

/** Everything of the crawl but its meta: its jobs in BullMQ, its partitions, its own keys (a file sink's index among them). */
async function forgetCrawlState(redis: RedisClient, keys: Keys, queues: Queues, crawlId: string, parts: number): Promise<Forgotten> {
  if (parts === 0) return forgetLegacyCrawl(redis, keys, queues, crawlId, true);
  const forgotten = await forgetPartitions(redis, keys, queues, { crawlId, parts });
  const meta = keys.crawl(crawlId).meta;
  forgotten.keys += await redis.unlink(...keys.crawlOwnKeys(crawlId).filter((name) => name !== meta));
  return forgotten;
}

/** `reset` of a collected crawl: what a collection cut short left, then the summary, go. */
export async function forgetCollectedCrawl(redis: RedisClient, keys: Keys, queues: Queues, crawlId: string): Promise<Forgotten> {
  const meta = keys.crawl(crawlId).meta;
  const parts = await redis.hget(meta, 'gcParts');
  const forgotten = parts !== null ? await forgetCrawlState(redis, keys, queues, crawlId, Number(parts)) : { queuedJobs: 0, deadJobs: 0, keys: 0 };
  forgotten.keys += await redis.unlink(meta);
  await redis.srem(keys.collectedCrawlIndex(), crawlId);
  await redis.srem(keys.crawlIndex(), crawlId);
  return forgotten;
}
