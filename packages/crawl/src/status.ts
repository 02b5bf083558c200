import { STAGES, runScript, type Keys, type PartKeys, type Stage, type RedisClient } from '@crawlfleet/core';
import type { CrawlStatus, HostBacklog, QueueCounts } from './crawl-status.js';
import type { CrawlState } from './registry.js';
import { countersFromHash } from './counters.js';
import { allPartKeys, layoutOf, type CrawlLayout } from './layout.js';
import { collectedStatus } from './summary.js';

export type { CollectedMark, CrawlStatus, HostBacklog, QueueCounts } from './crawl-status.js';

/** Hosts `status` lists. */
export const STATUS_HOSTS = 20;

interface PartReading {
  counters: Record<string, string>;
  pending: number[];
  active: number[];
  delayed: number[];
  waiting: number;
  busiest: { host: string; waiting: number }[];
}

/** One partition's counts and busiest hosts, in one round trip. */
async function readPartition(redis: RedisClient, k: PartKeys): Promise<PartReading> {
  const pipe = redis.pipeline();
  pipe.hgetall(k.counters);
  for (const stage of STAGES) pipe.scard(k.pending[stage]).scard(k.active[stage]).scard(k.delayed[stage]);
  pipe.hget(k.part, 'q');
  pipe.zrevrange(k.backlog, 0, STATUS_HOSTS - 1, 'WITHSCORES');
  const results = (await pipe.exec()) ?? [];
  for (const [err] of results) if (err) throw err;
  const at = (i: number) => results[i]![1];
  const counts = STAGES.map((_, i) => [1, 2, 3].map((o) => Number(at(o + i * 3))));
  const flat = at(1 + STAGES.length * 3 + 1) as string[];
  const busiest: { host: string; waiting: number }[] = [];
  for (let i = 0; i + 1 < flat.length; i += 2) busiest.push({ host: flat[i]!, waiting: Number(flat[i + 1]) });
  return {
    counters: at(0) as Record<string, string>,
    pending: counts.map((c) => c[0]!),
    active: counts.map((c) => c[1]!),
    delayed: counts.map((c) => c[2]!),
    waiting: Number(at(1 + STAGES.length * 3) ?? 0),
    busiest,
  };
}

/** Pure: a host's entry from its packed frontier state (hosts.lua: "i:c:g:n:h:a") and the time now. */
export function hostBacklog(host: string, waiting: number, packed: string | null, nowMs: number): HostBacklog {
  const [i, c, g, n, h] = (packed ?? '0:1:0:0:0:0').split(':').map(Number) as [number, number, number, number, number];
  return { host, waiting, inFlight: i, concurrency: c, delayMs: g, nextTurnInMs: i >= c ? null : Math.max(0, Math.max(n, h) - nowMs) };
}

/**
 * The status object of CONTRACT.md, read in one round trip per partition (all at once) and one for
 * the crawl; a collected crawl's from its summary alone.
 */
export async function getStatus(redis: RedisClient, keys: Keys, crawlId: string): Promise<CrawlStatus | undefined> {
  const k = keys.crawl(crawlId);
  const pipe = redis.pipeline();
  pipe.hmget(k.meta, 'spiderName', 'state', 'startedAt', 'finishedAt', 'module', 'parts', 'collectedAt');
  pipe.hgetall(k.counters);
  pipe.hgetall(k.invalidReasons);
  pipe.time();
  const results = (await pipe.exec()) ?? [];
  for (const [err] of results) if (err) throw err;
  const [spiderName, state, startedAt, finishedAt, module, parts, collectedAt] = results[0]![1] as (string | null)[];
  if (!state) return undefined;
  if (collectedAt) return collectedStatus(crawlId, await redis.hgetall(k.meta));
  const layout = layoutOf(crawlId, { state, parts });
  const [seconds, micros] = results[3]![1] as [string, string];
  const nowMs = Number(seconds) * 1000 + Math.floor(Number(micros) / 1000);
  const readings = layout === 'legacy' || layout === undefined ? [] : await Promise.all(allPartKeys(keys, layout).map((pk) => readPartition(redis, pk)));
  const counterHash = sumHashes([results[1]![1] as Record<string, string>, ...readings.map((r) => r.counters)]);
  const frontier = readings.reduce((n, r) => n + r.waiting, 0);
  // Only a running or paused crawl will take its frontier: a cancelled or failed crawl's leftovers
  // (links a parser admitted as the crawl ended) wait for nothing.
  const frontierWaiting = state === 'running' || state === 'paused' ? frontier : 0;
  const queues = {} as Record<Stage, QueueCounts>;
  STAGES.forEach((stage, i) => {
    const sum = (pick: (r: PartReading) => number[]) => readings.reduce((n, r) => n + pick(r)[i]!, 0);
    const [pending, active, delayed] = [sum((r) => r.pending), sum((r) => r.active), sum((r) => r.delayed)];
    queues[stage] = {
      waiting: Math.max(0, pending - active - delayed) + (stage === 'fetch' ? frontierWaiting : 0),
      active,
      delayed,
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
    hosts: layout === 'legacy' || layout === undefined ? [] : await busiestHosts(redis, keys, layout, readings, nowMs),
    partitions: layout === 'legacy' || layout === undefined ? 0 : layout.parts,
    ...(module ? { spiderModule: JSON.parse(module) as { path: string; hash: string } } : {}),
    ...invalidReasonsOf(results[2]![1] as Record<string, string>),
    startedAt: startedAt ?? '',
    finishedAt: finishedAt ?? null,
  };
}

/** The STATUS_HOSTS hosts with the most URLs waiting over every partition, with their turns. */
async function busiestHosts(redis: RedisClient, keys: Keys, layout: CrawlLayout, readings: PartReading[], nowMs: number): Promise<HostBacklog[]> {
  const parts = allPartKeys(keys, layout);
  const top = readings
    .flatMap((r, p) => r.busiest.map((b) => ({ ...b, p })))
    .sort((a, b) => b.waiting - a.waiting || a.host.localeCompare(b.host))
    .slice(0, STATUS_HOSTS);
  const packed = await Promise.all(top.map((t) => redis.hget(parts[t.p]!.hosts, t.host)));
  return top.map((t, i) => hostBacklog(t.host, t.waiting, packed[i] ?? null, nowMs));
}

/** Pure: counter hashes added up field by field. */
export function sumHashes(hashes: Record<string, string>[]): Record<string, string> {
  const out: Record<string, number> = {};
  for (const h of hashes) for (const [name, value] of Object.entries(h)) out[name] = (out[name] ?? 0) + Number(value);
  return Object.fromEntries(Object.entries(out).map(([n, v]) => [n, String(v)]));
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
 * URLs waiting in the frontiers of the running crawls, fleet-wide: the fetch backlog beyond the jobs
 * in BullMQ, which hold only each crawl's window.
 */
export function frontierBacklog(redis: RedisClient, keys: Keys): Promise<number> {
  return sumOverCrawls(redis, keys, 'running', (k) => ['hget', k.part, 'q']);
}

/**
 * The hosts of running crawls that may be handed a URL now: each has URLs waiting, room in flight,
 * and its turn come (no delay, Crawl-delay or Retry-After hold ahead of it). What fetchers can start
 * at once, as opposed to the frontier's whole backlog.
 */
export async function readyFrontierHosts(redis: RedisClient, keys: Keys): Promise<number> {
  const [seconds, micros] = await redis.time();
  const nowMs = Number(seconds) * 1000 + Math.floor(Number(micros) / 1000);
  return sumOverCrawls(redis, keys, 'running', (k) => ['zcount', k.ready, String(nowMs)]);
}

/**
 * A count summed over every partition of every registered crawl in `state`, fleet-wide: `count`
 * names the command (and key) that gives one partition's count. One round trip per crawl and one
 * per partition, all sent at once: on Redis Cluster two partitions' keys may be on two shards.
 */
export async function sumOverCrawls(
  redis: RedisClient,
  keys: Keys,
  state: CrawlState,
  count: (k: PartKeys) => ['scard', string] | ['hget', string, string] | ['zcount', string, string],
): Promise<number> {
  const ids = await redis.smembers(keys.crawlIndex());
  const counts = await Promise.all(
    ids.map(async (id) => {
      const [crawlState, parts] = await redis.hmget(keys.crawl(id).meta, 'state', 'parts');
      const layout = layoutOf(id, { state: crawlState, parts });
      if (crawlState !== state || layout === 'legacy' || layout === undefined) return 0;
      const each = await Promise.all(
        allPartKeys(keys, layout).map((k) => {
          const [command, key, arg] = count(k);
          if (command === 'zcount') return redis.zcount(key, '-inf', arg);
          return command === 'scard' ? redis.scard(key) : redis.hget(key, arg!);
        }),
      );
      return each.reduce<number>((n, v) => n + Number(v ?? 0), 0);
    }),
  );
  return counts.reduce((a, b) => a + b, 0);
}

/** The dead-letter sets of a crawl, every partition's: job id -> record. */
export async function getDeadLetters(redis: RedisClient, keys: Keys, crawlId: string): Promise<Record<string, import('./lifecycle.js').DeadLetter>> {
  const [state, parts] = await redis.hmget(keys.crawl(crawlId).meta, 'state', 'parts');
  const layout = layoutOf(crawlId, { state, parts });
  if (layout === 'legacy' || layout === undefined) return {};
  const raws = await Promise.all(allPartKeys(keys, layout).map((k) => redis.hgetall(k.dead)));
  return Object.fromEntries(raws.flatMap((raw) => Object.entries(raw).map(([id, json]) => [id, JSON.parse(json)])));
}
