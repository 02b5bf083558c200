import { STAGES, runScript, type CrawlKeys, type Keys, type Stage, type RedisClient } from '@crawlfleet/core';
import { countersFromHash, type Counters } from './counters.js';
import type { CrawlState } from './registry.js';

export interface QueueCounts {
  waiting: number;
  active: number;
  delayed: number;
  failed: number;
}

export interface CrawlStatus {
  crawlId: string;
  spider: string;
  state: CrawlState;
  counters: Counters;
  /**
   * this crawl's jobs in each queue; `failed` counts its dead letters from that stage. The fetch
   * stage's `waiting` includes the URLs still in the frontier.
   */
  queues: Record<Stage, QueueCounts>;
  /** URLs admitted and waiting in the frontier, not yet fetch jobs (an extension of the contract) */
  frontier: number;
  /** a code spider's module: its path and the hash of its source (an extension of the contract) */
  spiderModule?: { path: string; hash: string };
  /** a sample of why items were counted invalid, most frequent first (an extension of the contract) */
  invalidReasons?: Array<{ reason: string; count: number }>;
  startedAt: string;
  finishedAt: string | null;
}

/** The status object of CONTRACT.md, read in one round trip. */
export async function getStatus(redis: RedisClient, keys: Keys, crawlId: string): Promise<CrawlStatus | undefined> {
  const k = keys.crawl(crawlId);
  const pipe = redis.pipeline();
  pipe.hmget(k.meta, 'spiderName', 'state', 'startedAt', 'finishedAt', 'module');
  pipe.hgetall(k.counters);
  for (const stage of STAGES) pipe.scard(k.pending[stage]).scard(k.active[stage]).scard(k.delayed[stage]);
  pipe.llen(k.frontier);
  pipe.hgetall(k.invalidReasons);
  const results = (await pipe.exec()) ?? [];
  for (const [err] of results) if (err) throw err;
  const [spiderName, state, startedAt, finishedAt, module] = results[0]![1] as (string | null)[];
  if (!state) return undefined;
  const counterHash = results[1]![1] as Record<string, string>;
  const frontier = Number(results[2 + STAGES.length * 3]![1]);
  // Only a running or paused crawl will take its frontier: a cancelled or failed crawl's leftovers
  // (links a parser admitted as the crawl ended) wait for nothing.
  const frontierWaiting = state === 'running' || state === 'paused' ? frontier : 0;
  const queues = {} as Record<Stage, QueueCounts>;
  STAGES.forEach((stage, i) => {
    const [pending, active, delayed] = [2, 3, 4].map((o) => Number(results[o + i * 3]![1]));
    queues[stage] = {
      waiting: Math.max(0, pending! - active! - delayed!) + (stage === 'fetch' ? frontierWaiting : 0),
      active: active!,
      delayed: delayed!,
      failed: Number(counterHash[`dead.${stage}`] ?? 0),
    };
  });
  return {
    crawlId,
    spider: spiderName ?? '',
    state: state as CrawlState,
    counters: countersFromHash(counterHash),
    queues,
    frontier,
    ...(module ? { spiderModule: JSON.parse(module) as { path: string; hash: string } } : {}),
    ...invalidReasonsOf(results[3 + STAGES.length * 3]![1] as Record<string, string>),
    startedAt: startedAt ?? '',
    finishedAt: finishedAt ?? null,
  };
}

/** Pure: the invalid-reasons hash as a list, most frequent first; nothing when there are none. */
function invalidReasonsOf(hash: Record<string, string>): Pick<CrawlStatus, 'invalidReasons'> {
  const entries = Object.entries(hash);
  if (entries.length === 0) return {};
  return { invalidReasons: entries.map(([reason, count]) => ({ reason, count: Number(count) })).sort((a, b) => b.count - a.count || a.reason.localeCompare(b.reason)) };
}

/** Reasons kept per crawl: a sample for the author, not a log. */
export const MAX_INVALID_REASONS = 20;

/** Counts why items of a crawl were dropped, keeping at most MAX_INVALID_REASONS distinct reasons (noteInvalid-1.lua). */
export async function noteInvalidReasons(redis: RedisClient, keys: Keys, crawlId: string, reasons: readonly string[]): Promise<void> {
  if (reasons.length === 0) return;
  await runScript(redis, 'noteInvalid', [keys.crawl(crawlId).invalidReasons], [MAX_INVALID_REASONS, ...reasons]);
}

/**
 * URLs waiting in the frontiers of the running crawls, fleet-wide (one pipelined round trip): the
 * fetch backlog beyond the jobs in BullMQ, which hold only each crawl's window.
 */
export function frontierBacklog(redis: RedisClient, keys: Keys): Promise<number> {
  return sumOverCrawls(redis, keys, 'running', (k) => ['llen', k.frontier]);
}

/**
 * A count summed over every registered crawl in `state`, fleet-wide: `count` names the command (and
 * key) that gives one crawl's count. One pipelined round trip per crawl, all sent at once: a crawl's
 * keys share its slot, and on Redis Cluster two crawls' keys may not.
 */
export async function sumOverCrawls(redis: RedisClient, keys: Keys, state: CrawlState, count: (k: CrawlKeys) => ['llen' | 'scard', string]): Promise<number> {
  const ids = await redis.smembers(keys.crawlIndex());
  const counts = await Promise.all(
    ids.map(async (id) => {
      const [command, key] = count(keys.crawl(id));
      const results = (await redis.pipeline().hget(keys.crawl(id).meta, 'state')[command](key).exec()) ?? [];
      return results[0]?.[1] === state ? Number(results[1]?.[1]) : 0;
    }),
  );
  return counts.reduce((a, b) => a + b, 0);
}

/** The dead-letter set of a crawl: job id -> record. */
export async function getDeadLetters(redis: RedisClient, keys: Keys, crawlId: string): Promise<Record<string, import('./lifecycle.js').DeadLetter>> {
  const raw = await redis.hgetall(keys.crawl(crawlId).dead);
  return Object.fromEntries(Object.entries(raw).map(([id, json]) => [id, JSON.parse(json)]));
}
