import type { Redis } from 'ioredis';
import { STAGES, type CrawlKeys, type Keys, type Stage } from '@crawlfleet/core';
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
  startedAt: string;
  finishedAt: string | null;
}

/** The status object of CONTRACT.md, read in one round trip. */
export async function getStatus(redis: Redis, keys: Keys, crawlId: string): Promise<CrawlStatus | undefined> {
  const k = keys.crawl(crawlId);
  const pipe = redis.pipeline();
  pipe.hmget(k.meta, 'spiderName', 'state', 'startedAt', 'finishedAt');
  pipe.hgetall(k.counters);
  for (const stage of STAGES) pipe.scard(k.pending[stage]).scard(k.active[stage]).scard(k.delayed[stage]);
  pipe.llen(k.frontier);
  const results = (await pipe.exec()) ?? [];
  for (const [err] of results) if (err) throw err;
  const [spiderName, state, startedAt, finishedAt] = results[0]![1] as (string | null)[];
  if (!state) return undefined;
  const counterHash = results[1]![1] as Record<string, string>;
  const frontier = Number(results[2 + STAGES.length * 3]![1]);
  const queues = {} as Record<Stage, QueueCounts>;
  STAGES.forEach((stage, i) => {
    const [pending, active, delayed] = [2, 3, 4].map((o) => Number(results[o + i * 3]![1]));
    queues[stage] = {
      waiting: Math.max(0, pending! - active! - delayed!) + (stage === 'fetch' ? frontier : 0),
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
    startedAt: startedAt ?? '',
    finishedAt: finishedAt ?? null,
  };
}

/**
 * URLs waiting in the frontiers of the running crawls, fleet-wide (one pipelined round trip): the
 * fetch backlog beyond the jobs in BullMQ, which hold only each crawl's window.
 */
export function frontierBacklog(redis: Redis, keys: Keys): Promise<number> {
  return sumOverCrawls(redis, keys, 'running', (k) => ['llen', k.frontier]);
}

/**
 * A count summed over every registered crawl in `state`, fleet-wide, in one pipelined round trip:
 * `count` names the command (and key) that gives one crawl's count.
 */
export async function sumOverCrawls(redis: Redis, keys: Keys, state: CrawlState, count: (k: CrawlKeys) => ['llen' | 'scard', string]): Promise<number> {
  const ids = await redis.smembers(keys.crawlIndex());
  if (ids.length === 0) return 0;
  const pipeline = redis.pipeline();
  for (const id of ids) {
    const [command, key] = count(keys.crawl(id));
    pipeline.hget(keys.crawl(id).meta, 'state')[command](key);
  }
  const results = ((await pipeline.exec()) ?? []).map((r) => r[1]);
  let total = 0;
  for (let i = 0; i < ids.length; i++) if (results[2 * i] === state) total += Number(results[2 * i + 1]);
  return total;
}

/** The dead-letter set of a crawl: job id -> record. */
export async function getDeadLetters(redis: Redis, keys: Keys, crawlId: string): Promise<Record<string, import('./lifecycle.js').DeadLetter>> {
  const raw = await redis.hgetall(keys.crawl(crawlId).dead);
  return Object.fromEntries(Object.entries(raw).map(([id, json]) => [id, JSON.parse(json)]));
}
