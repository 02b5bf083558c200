import { randomUUID } from 'node:crypto';
import { ConfigError, STAGES, fingerprintOfJob, stageQueues, jobId, runScript, type Keys, type Queues, type Stage, type WriteJob, type RedisClient } from '@crawlfleet/core';
import { encodeRequest, hostOfUrl, type FetchRequest } from '@crawlfleet/frontier';
import { whileInjecting } from './completion.js';
import { enqueueFetch } from './fetch-jobs.js';
import { partKeysOfUrl } from './layout.js';
import type { DeadLetter } from './lifecycle.js';
import type { CrawlRecord } from './registry.js';
import { getDeadLetters } from './status.js';

/** A dead letter with the id of the job it ended. */
export type DeadLetterEntry = DeadLetter & { jobId: string };

export interface DeadLetterFilter {
  code?: string;
  urlRegex?: RegExp;
}

/** Pure: the dead letters a filter selects, in URL order. */
export function selectDeadLetters(entries: DeadLetterEntry[], filter: DeadLetterFilter): DeadLetterEntry[] {
  return entries
    .filter((e) => (filter.code === undefined || e.code === filter.code) && (filter.urlRegex === undefined || filter.urlRegex.test(e.url)))
    .sort((a, b) => a.url.localeCompare(b.url) || a.stage.localeCompare(b.stage));
}

export async function listDeadLetters(redis: RedisClient, keys: Keys, crawlId: string, filter: DeadLetterFilter = {}): Promise<DeadLetterEntry[]> {
  const records = await getDeadLetters(redis, keys, crawlId);
  return selectDeadLetters(
    Object.entries(records).map(([id, record]) => ({ ...record, jobId: id })),
    filter,
  );
}

/**
 * Pure: how a dead letter runs again. A write dead letter still holds its items, so its write job
 * runs again as it was; anything else is fetched again (a parse dead letter kept no page body).
 * Undefined when the record cannot be replayed (a poison job whose payload was never valid).
 */
export function replayPlan(entry: DeadLetterEntry, crawlId: string): { stage: 'fetch'; id: string; request: FetchRequest } | { stage: 'write'; id: string; job: WriteJob } | undefined {
  if (!/^[fpw][0-9a-f]{32}$/.test(entry.jobId)) return undefined;
  const fp = fingerprintOfJob(entry.jobId);
  const data = (entry.data ?? {}) as { url?: unknown; depth?: unknown; items?: unknown; meta?: unknown };
  if (entry.stage === 'write' && Array.isArray(data.items) && data.items.length > 0 && typeof data.url === 'string') {
    return { stage: 'write', id: jobId('write', fp), job: { crawlId, url: data.url, items: data.items as WriteJob['items'] } };
  }
  const url = typeof data.url === 'string' ? data.url : entry.url;
  if (!/^https?:\/\//.test(url)) return undefined;
  const depth = typeof data.depth === 'number' && Number.isInteger(data.depth) && data.depth >= 0 ? data.depth : 0;
  // A code spider's link metadata goes along: the page's hooks read it again.
  const meta = typeof data.meta === 'object' && data.meta !== null && !Array.isArray(data.meta) ? { meta: data.meta as Record<string, unknown> } : {};
  return { stage: 'fetch', id: jobId('fetch', fp), request: { url, depth, ...meta } };
}

export interface ReplayResult {
  replayed: DeadLetterEntry[];
  /** records that cannot run again, with why */
  refused: { entry: DeadLetterEntry; reason: string }[];
}

/**
 * Sends the selected dead letters back to work: each one's old jobs leave BullMQ (a failed or
 * completed job under the same id would turn the new add into a no-op), its record leaves the
 * dead-letter set, and its job is enqueued again. The crawl runs again if it had ended.
 */
export async function replayDeadLetters(redis: RedisClient, keys: Keys, queues: Queues, crawl: CrawlRecord, filter: DeadLetterFilter = {}): Promise<ReplayResult> {
  if (crawl.state === 'cancelled') throw new ConfigError(`crawl ${crawl.crawlId} was cancelled: reset it and seed it again instead of replaying`);
  const result: ReplayResult = { replayed: [], refused: [] };
  const entries = await listDeadLetters(redis, keys, crawl.crawlId, filter);
  if (entries.length === 0) return result;
  // An injection: the crawl runs again, and cannot be marked done until the replayed jobs are pending.
  await whileInjecting(
    redis,
    keys,
    crawl,
    `replay:${randomUUID()}`,
    async () => {
      for (const entry of entries) {
        const plan = replayPlan(entry, crawl.crawlId);
        if (!plan) {
          result.refused.push({ entry, reason: 'its job never had a valid URL' });
          continue;
        }
        if (await replayOne(redis, keys, queues, crawl, entry, plan)) result.replayed.push(entry);
      }
    },
    true,
  );
  return result;
}

/** One dead letter back to work (replayDeadLetter-8.lua, then its job); false when it was replayed already. */
async function replayOne(redis: RedisClient, keys: Keys, queues: Queues, crawl: CrawlRecord, entry: DeadLetterEntry, plan: NonNullable<ReturnType<typeof replayPlan>>): Promise<boolean> {
  const fp = fingerprintOfJob(plan.id);
  const url = plan.stage === 'fetch' ? plan.request.url : plan.job.url;
  const k = partKeysOfUrl(keys, crawl, url);
  // The URL runs from the plan's stage on: no finished or failed job of a later stage may block it.
  for (const stage of STAGES.slice(STAGES.indexOf(plan.stage))) await removeFinishedJob(queues, stage, jobId(stage, fp));
  const applied = await runScript<number>(
    redis,
    'replayDeadLetter',
    [k.dead, k.counters, k.part, k.pending[plan.stage], k.requests, k.rebuilds, k.hosts, k.ready],
    [entry.jobId, entry.stage, plan.id, plan.stage === 'fetch' ? encodeRequest(plan.request) : '', k.urlBucket, plan.stage === 'fetch' ? hostOfUrl(url) : '', k.hostQueue],
  );
  if (applied === 0) return false;
  if (plan.stage === 'fetch') {
    await enqueueFetch(queues, crawl.crawlId, crawl.spider, plan.id, plan.request);
  } else {
    await queues.write.add('write', plan.job, { jobId: plan.id, attempts: 10, backoff: { type: 'crawlfleet' } });
  }
  return true;
}

async function removeFinishedJob(queues: Queues, stage: Stage, id: string): Promise<void> {
  for (const queue of stageQueues(queues, stage)) {
    const job = await queue.getJob(id);
    if (job && ((await job.isFailed()) || (await job.isCompleted()))) await job.remove();
  }
}
