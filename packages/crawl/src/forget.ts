import { STAGES, stageQueues, type Keys, type PartKeys, type Queues, type RedisClient, type Stage } from '@crawlfleet/core';
import { allPartKeys, type CrawlLayout } from './layout.js';

/**
 * Removing a crawl's state from Redis, for `reset` (which forgets everything) and gc (which keeps
 * the meta as its summary). Big sets and hashes are read by SSCAN and HSCAN, keys unlinked (freed
 * off Redis's main thread) in batches; every command names keys of one slot (a partition's, the
 * crawl's or a queue's), so it runs on a Redis Cluster as on one Redis. Each step can run again: a
 * removal cut short is finished by the next.
 */

/** Keys per UNLINK, and members per SSCAN or HSCAN step. */
const BATCH = 500;

export interface Forgotten {
  /** jobs of the crawl still queued in BullMQ, removed */
  queuedJobs: number;
  /** the dead letters' failed jobs in BullMQ, removed */
  deadJobs: number;
  /** keys unlinked */
  keys: number;
}

/** Calls `each` with every batch a SCAN-family command returns, until its cursor comes back to 0. */
async function eachBatch(scan: (cursor: string) => Promise<[string, string[]]>, each: (batch: string[]) => Promise<void>): Promise<void> {
  let cursor = '0';
  do {
    const [next, batch] = await scan(cursor);
    cursor = next;
    if (batch.length > 0) await each(batch);
  } while (cursor !== '0');
}

const removeJob = async (queues: Queues, stage: Stage, id: string) => sum(await Promise.all(stageQueues(queues, stage).map((q) => q.remove(id).catch(() => 0))));
const sum = (ns: number[]) => ns.reduce((a, b) => a + b, 0);

/** Pure: the stage a dead-letter record names; every stage when it names none. */
function stagesOfDeadLetter(record: string): readonly Stage[] {
  try {
    const stage = (JSON.parse(record) as { stage?: string }).stage;
    return STAGES.includes(stage as Stage) ? [stage as Stage] : STAGES;
  } catch {
    return STAGES;
  }
}

/**
 * Removes from BullMQ the crawl's jobs that its pending sets name (jobs still queued, which a later
 * run of the same crawl id would otherwise find in its way) and its dead letters' failed jobs.
 */
async function removeJobs(redis: RedisClient, queues: Queues, pending: Record<Stage, string>, dead: string): Promise<Omit<Forgotten, 'keys'>> {
  let queuedJobs = 0;
  let deadJobs = 0;
  for (const stage of STAGES) {
    await eachBatch(
      (cursor) => redis.sscan(pending[stage], cursor, 'COUNT', BATCH),
      async (ids) => {
        queuedJobs += sum(await Promise.all(ids.map((id) => removeJob(queues, stage, id))));
      },
    );
  }
  await eachBatch(
    (cursor) => redis.hscan(dead, cursor, 'COUNT', BATCH),
    async (flat) => {
      const removals: Promise<number>[] = [];
      for (let i = 0; i + 1 < flat.length; i += 2) for (const stage of stagesOfDeadLetter(flat[i + 1]!)) removals.push(removeJob(queues, stage, flat[i]!));
      deadJobs += sum(await Promise.all(removals));
    },
  );
  return { queuedJobs, deadJobs };
}

/** Unlinks keys of one slot in batches; returns how many existed. */
async function unlinkAll(redis: RedisClient, names: string[]): Promise<number> {
  let unlinked = 0;
  for (let from = 0; from < names.length; from += BATCH) unlinked += await redis.unlink(...names.slice(from, from + BATCH));
  return unlinked;
}

/** A test hook: runs once a partition's index buckets and host queues are unlinked, before its fixed keys. */
export interface ForgetHooks {
  afterIndexGone?: (k: PartKeys) => Promise<void>;
}

/**
 * A partition's run while it is being forgotten: no run's startedAt (an ISO date) ever equals it, so
 * every admission and finish that carries its run (admitUrls-7.lua, finishJob-12.lua) is refused.
 */
const FORGOTTEN_RUN = 'forgotten';

/**
 * Deletes a partition: first it fences the old run out (its `startedAt` replaced), then its index's
 * buckets, its hosts' queues (found in its backlog), then its fixed keys, `part` among them. Fenced
 * before anything goes, an old run's finish or admission arriving meanwhile cannot re-create a
 * bucket or a host queue for the next run to find (a URL seen, a `q` that does not count it); and
 * the index's size is read after the fence, when no admission can split a bucket any more. A
 * removal cut short keeps `part` (and the size) for the next to finish.
 */
async function unlinkPartition(redis: RedisClient, keys: Keys, crawlId: string, k: PartKeys, hooks: ForgetHooks = {}): Promise<number> {
  await redis.hset(k.part, 'startedAt', FORGOTTEN_RUN);
  const [level, split] = (await redis.hmget(k.part, 'iL', 'is')).map((v) => Number(v ?? 0)) as [number, number];
  const buckets = 2 ** level + split;
  let unlinked = 0;
  for (let from = 0; from < buckets; from += BATCH) {
    unlinked += await redis.unlink(...Array.from({ length: Math.min(BATCH, buckets - from) }, (_, i) => `${k.urlBucket}${from + i}`));
  }
  for (;;) {
    const hosts = await redis.zrange(k.backlog, 0, BATCH - 1);
    if (hosts.length === 0) break;
    unlinked += await redis.unlink(...hosts.map((h) => `${k.hostQueue}${h}`));
    await redis.zrem(k.backlog, ...hosts);
  }
  await hooks.afterIndexGone?.(k);
  unlinked += await forgetSessions(redis, keys, crawlId, k.hosts);
  return unlinked + (await unlinkAll(redis, keys.partFixedKeys(k)));
}

/**
 * The crawl's sessions on the partition's hosts (found in its `hosts` hash): each host's sessions
 * hash and its sessions' cookie hashes are unlinked, and the sessions leave their slot's alive set.
 * Each host's keys share a politeness slot; hosts are done a batch at a time, side by side.
 */
async function forgetSessions(redis: RedisClient, keys: Keys, crawlId: string, hostsKey: string): Promise<number> {
  const k = keys.polite();
  let unlinked = 0;
  const forgetHost = async (host: string) => {
    const sessionsKey = k.sessions(host, crawlId);
    const ids = (await redis.hkeys(sessionsKey)).filter((field) => field !== '#v' && !field.includes(':'));
    unlinked += await redis.unlink(sessionsKey, ...ids.map((id) => k.sessionCookies(host, crawlId, id)));
    if (ids.length > 0) await redis.zrem(k.sessionsAlive(host), ...ids.map((id) => `${crawlId} ${host} ${id}`));
  };
  await eachBatch(
    (cursor) => redis.hscan(hostsKey, cursor, 'COUNT', BATCH),
    async (flat) => {
      await Promise.all(flat.filter((_, i) => i % 2 === 0).map(forgetHost));
    },
  );
  return unlinked;
}

/** Removes the crawl's jobs from BullMQ and unlinks every partition's keys (not the crawl's own keys). */
export async function forgetPartitions(redis: RedisClient, keys: Keys, queues: Queues, layout: CrawlLayout, hooks: ForgetHooks = {}): Promise<Forgotten> {
  const total: Forgotten = { queuedJobs: 0, deadJobs: 0, keys: 0 };
  for (const k of allPartKeys(keys, layout)) {
    const jobs = await removeJobs(redis, queues, k.pending, k.dead);
    total.queuedJobs += jobs.queuedJobs;
    total.deadJobs += jobs.deadJobs;
    total.keys += await unlinkPartition(redis, keys, layout.crawlId, k, hooks);
  }
  return total;
}

/** The keys of a crawl of the layout before partitions, all in its slot, its meta first. */
export function legacyCrawlKeys(keys: Keys, crawlId: string): string[] {
  const base = `${keys.prefix}:crawl:{${crawlId}}`;
  const single = ['meta', 'counters', 'urls', 'frontier', 'dead', 'requests', 'suspects', 'rebuilds', 'seeding', 'invalid-reasons', 'file:identities', 'file:state'];
  const perStage = ['pending', 'active', 'delayed', 'parked'].flatMap((kind) => STAGES.map((stage) => `${kind}:${stage}`));
  return [...single, ...perStage].map((name) => `${base}:${name}`);
}

/**
 * A crawl of the layout before partitions: its jobs leave BullMQ and its keys, which all share its
 * tag, are unlinked; its meta too unless `keepMeta` (gc keeps it as the summary).
 */
export async function forgetLegacyCrawl(redis: RedisClient, keys: Keys, queues: Queues, crawlId: string, keepMeta = false): Promise<Forgotten> {
  const base = `${keys.prefix}:crawl:{${crawlId}}`;
  const pending = Object.fromEntries(STAGES.map((stage) => [stage, `${base}:pending:${stage}`])) as Record<Stage, string>;
  const jobs = await removeJobs(redis, queues, pending, `${base}:dead`);
  const names = legacyCrawlKeys(keys, crawlId);
  return { ...jobs, keys: await unlinkAll(redis, keepMeta ? names.slice(1) : names) };
}
