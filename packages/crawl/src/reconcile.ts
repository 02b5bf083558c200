import { STAGES, fingerprintOfJob, getStageJob, stageQueues, jobId, runScript, type Keys, type Logger, type PartKeys, type Queues, type Stage, type RedisClient } from '@crawlfleet/core';
import { decodeRequest, hostOfUrl } from '@crawlfleet/frontier';
import { deadLetterData, finishInPartition, finishJob, type DeadLetter } from './lifecycle.js';
import { enqueueFetch, fetchJobData } from './fetch-jobs.js';
import type { Queue } from 'bullmq';
import { allPartKeys, type CrawlLayout } from './layout.js';
import type { CrawlRecord } from './registry.js';

/**
 * The reconciler: every id in a stage's pending set must have a live BullMQ job behind it, or the
 * crawl never ends. Ids lose their job when BullMQ fails a job that stalled too often (our processor
 * never ran, so nothing dead-lettered it), when a job is removed by hand (Bull Board, `clean`), when
 * a process dies between marking a job pending and adding it, or when Redis restarts from an AOF that
 * misses its last second. Each such id becomes a job again (rebuilt from the URL's request) or a dead
 * letter with a reason.
 */

/** What BullMQ holds for a pending id. */
export type JobPresence = 'live' | 'missing' | 'completed' | 'failed';

export type OrphanAction =
  | { kind: 'keep' } // a live job carries it, or it was not seen lost for long enough yet
  | { kind: 'suspect' } // lost now: record when, act if it still is after the grace period
  | { kind: 'rebuild' } // its URL goes back to the fetch stage
  | { kind: 'dead-letter'; code: 'ERR_STALLED' | 'ERR_JOB_FAILED'; reason: string };

/** BullMQ's own reason for a job that stalled more than maxStalledCount times. */
const STALLED_REASON = /stalled more than allowable limit/i;

/**
 * Pure: what to do with one pending id. A failed job is a final failure (our own dead letters record
 * theirs before they fail, so this one ended without its finish: a stall or a crash outside the
 * handler); a missing or completed one lost its effects and is redone.
 */
export function decideOrphan(input: { presence: JobPresence; failedReason?: string | null; firstSeenMs?: number; nowMs: number; graceMs: number }): OrphanAction {
  const { presence, firstSeenMs, nowMs, graceMs } = input;
  if (presence === 'live') return { kind: 'keep' };
  if (firstSeenMs === undefined) return { kind: 'suspect' };
  if (nowMs - firstSeenMs < graceMs) return { kind: 'keep' };
  if (presence !== 'failed') return { kind: 'rebuild' };
  return { kind: 'dead-letter', ...classifyFinalFailure(input.failedReason) };
}

/** Pure: the dead-letter code and reason of a job BullMQ failed on its own. */
export function classifyFinalFailure(failedReason: string | null | undefined): { code: 'ERR_STALLED' | 'ERR_JOB_FAILED'; reason: string } {
  const reason = failedReason || 'failed without a recorded reason';
  return STALLED_REASON.test(reason) ? { code: 'ERR_STALLED', reason: `${reason}: its worker died or hung on it every time (maxStalledCount)` } : { code: 'ERR_JOB_FAILED', reason };
}

export interface ReconcileReport {
  checked: number;
  suspects: number;
  rebuilt: number;
  deadLettered: number;
}

export interface ReconcileOptions {
  graceMs: number;
  /** rebuilds of one URL before it is dead-lettered (ERR_JOB_LOST): a job removed again and again */
  maxRebuilds?: number;
  log?: Logger;
  nowMs?: number;
}

const SCAN_COUNT = 1000;

/** Checks every pending id of a crawl, in every partition and stage, and repairs the lost ones. */
export async function reconcileCrawl(redis: RedisClient, keys: Keys, queues: Queues, crawl: CrawlRecord, options: ReconcileOptions): Promise<ReconcileReport> {
  const report: ReconcileReport = { checked: 0, suspects: 0, rebuilt: 0, deadLettered: 0 };
  for (const k of allPartKeys(keys, crawl)) {
    for (const stage of STAGES) {
      let cursor = '0';
      do {
        const [next, ids] = await redis.sscan(k.pending[stage], cursor, 'COUNT', SCAN_COUNT);
        cursor = next;
        if (ids.length > 0) await reconcileIds(redis, keys, queues, crawl, k, stage, ids, options, report);
      } while (cursor !== '0');
    }
  }
  return report;
}

async function reconcileIds(
  redis: RedisClient,
  keys: Keys,
  queues: Queues,
  crawl: CrawlRecord,
  k: PartKeys,
  stage: Stage,
  jobs: string[],
  options: ReconcileOptions,
  report: ReconcileReport,
): Promise<void> {
  const nowMs = options.nowMs ?? Date.now();
  report.checked += jobs.length;
  const presences = await jobPresences(redis, queues, stage, jobs);
  const firstSeen = await redis.hmget(k.suspects, ...jobs);
  const cleared: string[] = [];
  const suspected: string[] = [];
  for (let i = 0; i < jobs.length; i++) {
    const id = jobs[i]!;
    const { presence, failedReason } = presences[i]!;
    const seen = firstSeen[i] ? Number(firstSeen[i]) : undefined;
    const action = decideOrphan({ presence, failedReason, ...(seen !== undefined ? { firstSeenMs: seen } : {}), nowMs, graceMs: options.graceMs });
    switch (action.kind) {
      case 'keep':
        if (presence === 'live' && seen !== undefined) cleared.push(id);
        break;
      case 'suspect':
        suspected.push(id);
        break;
      case 'rebuild':
        if (await rebuild(redis, keys, queues, crawl, k, stage, id, options)) report.rebuilt++;
        else report.deadLettered++;
        break;
      case 'dead-letter':
        await deadLetterFailed(redis, keys, queues, crawl, stage, id, action.code, action.reason, k);
        await redis.hdel(k.suspects, id);
        report.deadLettered++;
        options.log?.warn({ crawlId: crawl.crawlId, stage, jobId: id, code: action.code }, 'reconciler: a job BullMQ failed on its own is dead-lettered');
        break;
    }
  }
  if (cleared.length > 0) await redis.hdel(k.suspects, ...cleared);
  if (suspected.length > 0) {
    const marking = redis.pipeline();
    for (const id of suspected) marking.hsetnx(k.suspects, id, String(nowMs));
    await marking.exec();
    report.suspects += suspected.length;
  }
}

/** What BullMQ holds for each id: one pipelined round trip of three reads per id. */
async function jobPresences(redis: RedisClient, queues: Queues, stage: Stage, ids: string[]): Promise<{ presence: JobPresence; failedReason: string | null }[]> {
  const [first, ...others] = await Promise.all(stageQueues(queues, stage).map((queue) => presencesIn(redis, queue, ids)));
  // A fetch-stage id is in the fetch queue or the render queue: what either holds of it counts.
  return first!.map((p, i) => others.reduce((best, o) => (PRESENCE_RANK[o[i]!.presence] > PRESENCE_RANK[best.presence] ? o[i]! : best), p));
}

/** Which of two answers for one id tells more: a live job, then a failed one, a completed one, none. */
const PRESENCE_RANK: Record<JobPresence, number> = { missing: 0, completed: 1, failed: 2, live: 3 };

async function presencesIn(redis: RedisClient, queue: Queue, ids: string[]): Promise<{ presence: JobPresence; failedReason: string | null }[]> {
  const pipeline = redis.pipeline();
  for (const id of ids) {
    pipeline.hget(queue.toKey(id), 'failedReason');
    pipeline.exists(queue.toKey(id));
    pipeline.zscore(queue.toKey('completed'), id);
    pipeline.zscore(queue.toKey('failed'), id);
  }
  const results = (await pipeline.exec()) ?? [];
  return ids.map((_, i) => {
    const [reason, exists, completed, failed] = results.slice(4 * i, 4 * i + 4).map((r) => r[1]);
    const presence: JobPresence = exists === 0 ? 'missing' : failed !== null ? 'failed' : completed !== null ? 'completed' : 'live';
    return { presence, failedReason: (reason as string | null) ?? null };
  });
}

/**
 * Sends a lost job's URL back to fetch and (re)adds its fetch job from the request the frontier kept.
 * Returns false when it dead-lettered it instead (no request kept, or rebuilt too often).
 */
async function rebuild(redis: RedisClient, keys: Keys, queues: Queues, crawl: CrawlRecord, k: PartKeys, stage: Stage, id: string, options: ReconcileOptions): Promise<boolean> {
  const fp = fingerprintOfJob(id);
  const maxRebuilds = options.maxRebuilds ?? 5;
  // The write of a dead-lettered fetch only archived its answer: fetching it again would count its
  // failure twice. It ends without its archive (the dead letter stays, and a replay fetches it).
  if (stage === 'write' && (await redis.hexists(k.dead, jobId('fetch', fp))) === 1) {
    await finishInPartition(redis, keys, crawl, k, stage, id, '', {});
    options.log?.warn({ crawlId: crawl.crawlId, stage, jobId: id }, 'reconciler: the lost write of a dead-lettered fetch is dropped (its answer is not archived)');
    return true;
  }
  const request = decodeRequest(await redis.hget(k.requests, fp));
  const verdict = request
    ? await runScript<number>(
        redis,
        'rewindUrl',
        [k.pending[stage], k.pending.fetch, k.rebuilds, k.suspects, k.part, k.active[stage], k.delayed[stage], k.hosts, k.ready],
        [id, maxRebuilds, k.urlBucket, hostOfUrl(request.url), k.hostQueue],
      )
    : -1;
  if (verdict === 0) return true;
  if (verdict === -1 || !request) {
    const reason = request ? `its jobs were lost ${maxRebuilds} times (removed by hand, or lost with Redis)` : 'its job was lost and the URL it was for is not known';
    await finishInPartition(redis, keys, crawl, k, stage, id, request && stage === 'fetch' ? hostOfUrl(request.url) : '', {
      counters: { failed: 1 },
      dead: {
        url: request?.url ?? '',
        stage,
        reason,
        code: 'ERR_JOB_LOST',
        attempts: 0,
        at: new Date().toISOString(),
        ...(request ? { data: fetchJobData(crawl.crawlId, request) } : {}),
      },
    });
    await redis.hdel(k.suspects, id);
    options.log?.warn({ crawlId: crawl.crawlId, stage, jobId: id, url: request?.url }, `reconciler: ${reason}; dead-lettered`);
    return false;
  }
  const fetchId = jobId('fetch', fp);
  // A completed or failed fetch job under this id would turn the add into a no-op.
  for (const queue of stageQueues(queues, 'fetch')) {
    const existing = await queue.getJob(fetchId);
    if (existing && ((await existing.isCompleted()) || (await existing.isFailed()))) await existing.remove().catch(() => undefined);
  }
  await enqueueFetch(queues, crawl.crawlId, crawl.spider, fetchId, request);
  await redis.hincrby(k.counters, 'reconciled', 1);
  options.log?.warn({ crawlId: crawl.crawlId, stage, jobId: id, url: request.url }, 'reconciler: a pending job had no live job behind it; its URL is fetched again');
  return true;
}

/** Dead-letters a job BullMQ failed without our processor finishing it (a stall, a crash before the handler). */
export async function deadLetterFailed(
  redis: RedisClient,
  keys: Keys,
  queues: Queues,
  layout: CrawlLayout,
  stage: Stage,
  id: string,
  code: string,
  reason: string,
  /** the partition the job is pending in, when known (a job with no URL left is finished there) */
  part?: PartKeys,
): Promise<'already' | 'finished' | 'crawl-done'> {
  const job = await getStageJob(queues, stage, id);
  const data = (job?.data ?? {}) as { url?: unknown };
  const jobUrl = typeof data.url === 'string' ? data.url : undefined;
  // Without the job, its URL is in its partition's requests; which partition is unknown, so every one is read.
  const request = jobUrl ? undefined : await findRequest(redis, keys, layout, fingerprintOfJob(id));
  const url = jobUrl ?? request?.url;
  const dead: DeadLetter = {
    url: url ?? '',
    stage,
    reason,
    code,
    attempts: job?.attemptsMade ?? 0,
    at: new Date().toISOString(),
    ...(job ? { data: deadLetterData(stage, job.data) } : {}),
  };
  const input = { counters: { failed: 1 }, dead };
  if (url) return finishJob(redis, keys, layout, stage, id, url, input);
  if (!part) return 'already';
  return (await finishInPartition(redis, keys, layout, part, stage, id, '', input)).outcome;
}

async function findRequest(redis: RedisClient, keys: Keys, layout: CrawlLayout, fp: string) {
  const found = await Promise.all(allPartKeys(keys, layout).map((k) => redis.hget(k.requests, fp)));
  return decodeRequest(found.find((r) => r !== null));
}
