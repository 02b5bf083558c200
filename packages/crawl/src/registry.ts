import { createHash } from 'node:crypto';
import { ConfigError, runScript, storableSinkSpec, validateSpider, type Keys, type SinkSpec, type Spider, type SpiderModuleRef, type RedisClient } from '@crawlfleet/core';
import { CollectedCrawlError, LegacyCrawlError, allPartKeys, layoutOf, type CrawlLayout } from './layout.js';

export { assertCrawlId } from '@crawlfleet/core';

/** How long an injection's lease lasts unless renewed: a seeder or replay that died lets go after this. */
export const INJECTION_LEASE_MS = 60_000;

export const CRAWL_STATES = ['running', 'paused', 'done', 'failed', 'cancelled'] as const;
export type CrawlState = (typeof CRAWL_STATES)[number];

export interface CrawlRecord extends CrawlLayout {
  crawlId: string;
  spider: Spider;
  /** a code spider's module: every fetcher and parser loads it from this path and checks its hash */
  module?: SpiderModuleRef;
  version: string;
  sink: SinkSpec;
  state: CrawlState;
  startedAt: string;
  finishedAt: string | null;
}

/** `books-2026-12-02T10-00-00Z`: the spider's name and the start time, usable as a key and a folder. */
export function newCrawlId(spiderName: string, now = new Date()): string {
  return `${spiderName}-${now
    .toISOString()
    .replace(/\.\d{3}Z$/, 'Z')
    .replace(/:/g, '-')}`;
}

/**
 * What a crawl's workers must reload when it changes: the spider, its code, and the sink (a crawl
 * seeded again with another `--sink` moves its writers to it).
 */
export function spiderVersion(spider: Spider, module?: SpiderModuleRef, sink?: SinkSpec): string {
  const hash = createHash('sha1').update(JSON.stringify(spider));
  if (module) hash.update('\0').update(JSON.stringify(module));
  if (sink) hash.update('\0sink\0').update(JSON.stringify(storableSinkSpec(sink)));
  return hash.digest('hex').slice(0, 12);
}

/**
 * Stores the crawl (or resumes it, taking the new spider and sink), and copies its state, version
 * and start into each partition, where a job's begin reads them. A new crawl gets `parts`
 * partitions, 1 when the spider sets maxPages (its budget is one counter every admission reads);
 * a resumed one keeps its own. The sink is stored without credentials: writers take them from
 * their own environment. `injection`: a seeding run's injection id, opened in the same step
 * (registerCrawl-2.lua says why); the run then goes on with whileInjecting(..., { opened: true }).
 */
export async function registerCrawl(
  redis: RedisClient,
  keys: Keys,
  crawlId: string,
  spider: Spider,
  sink: SinkSpec,
  module?: SpiderModuleRef,
  parts = 1,
  injection?: string,
): Promise<{ created: boolean; layout: CrawlLayout }> {
  const existingParts = Number(await redis.hget(keys.crawl(crawlId).meta, 'parts'));
  if (spider.maxPages && existingParts > 1) {
    throw new ConfigError(`crawl ${crawlId} has ${existingParts} partitions, and maxPages needs a crawl of one (its budget is one counter): seed it without maxPages, or reset it first`);
  }
  const [created, keptParts, state, version, startedAt, gen] = await runScript<[number, number, string, string, string, number]>(
    redis,
    'registerCrawl',
    [keys.crawl(crawlId).meta, keys.crawl(crawlId).seeding],
    [
      JSON.stringify(spider),
      spiderVersion(spider, module, sink),
      JSON.stringify(storableSinkSpec(sink)),
      new Date().toISOString(),
      spider.name,
      module ? JSON.stringify({ path: module.path, hash: module.hash }) : '',
      spider.maxPages ? 1 : parts,
      injection ?? '',
      INJECTION_LEASE_MS,
    ],
  );
  if (created === -1) {
    // A meta without partitions: a crawl of the older layout, or one gc collected (its summary).
    const collectedAt = await redis.hget(keys.crawl(crawlId).meta, 'collectedAt');
    throw collectedAt ? new CollectedCrawlError(crawlId, collectedAt) : new LegacyCrawlError(crawlId);
  }
  const layout = { crawlId, parts: keptParts, startedAt };
  await copyStateToPartitions(redis, keys, layout, { state, version, startedAt, gen });
  await redis.sadd(keys.crawlIndex(), crawlId);
  return { created: created === 1, layout };
}

/**
 * Writes the crawl's state (and its version and start, when given) into every partition's copy.
 * `gen`: the crawl's gen of the step that ran it (again), stamped on the copy, so a late `done` of
 * the run before cannot overwrite it (markPartDone-1.lua).
 */
export async function copyStateToPartitions(redis: RedisClient, keys: Keys, layout: CrawlLayout, fields: { state: string; version?: string; startedAt?: string; gen?: number }): Promise<void> {
  const values: string[] = ['state', fields.state];
  if (fields.gen !== undefined) values.push('stateGen', String(fields.gen));
  if (fields.version !== undefined) values.push('version', fields.version);
  if (fields.startedAt !== undefined) values.push('startedAt', fields.startedAt);
  await Promise.all(allPartKeys(keys, layout).map((k) => redis.hset(k.part, ...values)));
}

export async function listCrawlIds(redis: RedisClient, keys: Keys): Promise<string[]> {
  return (await redis.smembers(keys.crawlIndex())).sort();
}

export async function getCrawlState(redis: RedisClient, keys: Keys, crawlId: string): Promise<CrawlState | undefined> {
  return ((await redis.hget(keys.crawl(crawlId).meta, 'state')) ?? undefined) as CrawlState | undefined;
}

export async function loadCrawl(redis: RedisClient, keys: Keys, crawlId: string): Promise<CrawlRecord | undefined> {
  const meta = await redis.hgetall(keys.crawl(crawlId).meta);
  if (!meta.state || !meta.spider) return undefined;
  const layout = layoutOf(crawlId, meta);
  if (layout === 'legacy') throw new LegacyCrawlError(crawlId);
  return {
    crawlId,
    parts: layout!.parts,
    spider: validateSpider(JSON.parse(meta.spider), `crawl ${crawlId}`),
    ...(meta.module ? { module: JSON.parse(meta.module) as SpiderModuleRef } : {}),
    version: meta.version ?? '',
    sink: JSON.parse(meta.sink ?? '{"kind":"mongo"}') as SinkSpec,
    state: meta.state as CrawlState,
    startedAt: meta.startedAt ?? '',
    finishedAt: meta.finishedAt ?? null,
  };
}

/**
 * Workers serve many crawls; each keeps the crawls it has seen, so a job costs no extra round trip
 * unless the crawl's spider changed or it was reset and registered again (its partitions' copies of
 * the version and start, read by the job's begin, say so).
 */
export class CrawlCache {
  private readonly entries = new Map<string, CrawlRecord>();
  constructor(
    private readonly redis: RedisClient,
    private readonly keys: Keys,
    private readonly maxEntries = 256,
  ) {}

  /** The crawl as this process last saw it, or as Redis holds it. */
  async get(crawlId: string): Promise<CrawlRecord | undefined> {
    return this.entries.get(crawlId) ?? this.reload(crawlId);
  }

  /** The crawl at this version and start: the cached record, or a fresh one when it is another. */
  async current(crawlId: string, version: string, startedAt: string): Promise<CrawlRecord | undefined> {
    const cached = this.entries.get(crawlId);
    if (cached && cached.version === version && cached.startedAt === startedAt) return cached;
    return this.reload(crawlId);
  }

  private async reload(crawlId: string): Promise<CrawlRecord | undefined> {
    const record = await loadCrawl(this.redis, this.keys, crawlId);
    if (!record) {
      this.entries.delete(crawlId);
      return undefined;
    }
    if (!this.entries.has(crawlId) && this.entries.size >= this.maxEntries) this.entries.delete(this.entries.keys().next().value!);
    this.entries.set(crawlId, record);
    return record;
  }
}
