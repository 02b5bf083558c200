import { createHash } from 'node:crypto';
import { runScript, storableSinkSpec, validateSpider, type Keys, type SinkSpec, type Spider, type SpiderModuleRef, type RedisClient } from '@crawlfleet/core';

export { assertCrawlId } from '@crawlfleet/core';

export const CRAWL_STATES = ['running', 'paused', 'done', 'failed', 'cancelled'] as const;
export type CrawlState = (typeof CRAWL_STATES)[number];

export interface CrawlRecord {
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

export function spiderVersion(spider: Spider, module?: SpiderModuleRef): string {
  const hash = createHash('sha1').update(JSON.stringify(spider));
  if (module) hash.update('\0').update(JSON.stringify(module));
  return hash.digest('hex').slice(0, 12);
}

/**
 * Stores the crawl (or resumes it, taking the new spider and sink). Returns whether it is new.
 * The sink is stored without credentials: writers take them from their own environment.
 */
export async function registerCrawl(redis: RedisClient, keys: Keys, crawlId: string, spider: Spider, sink: SinkSpec, module?: SpiderModuleRef): Promise<boolean> {
  const created = await runScript<number>(
    redis,
    'registerCrawl',
    [keys.crawl(crawlId).meta],
    [
      JSON.stringify(spider),
      spiderVersion(spider, module),
      JSON.stringify(storableSinkSpec(sink)),
      new Date().toISOString(),
      spider.name,
      module ? JSON.stringify({ path: module.path, hash: module.hash }) : '',
    ],
  );
  await redis.sadd(keys.crawlIndex(), crawlId);
  return created === 1;
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
  return {
    crawlId,
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
 * Workers serve many crawls; each keeps the crawls it has seen, keyed by spider version, so a job
 * costs no extra round trip unless the crawl's spider changed.
 */
export class CrawlCache {
  private readonly entries = new Map<string, CrawlRecord>();
  constructor(
    private readonly redis: RedisClient,
    private readonly keys: Keys,
    private readonly maxEntries = 256,
  ) {}

  async get(crawlId: string, version: string): Promise<CrawlRecord | undefined> {
    const cached = this.entries.get(crawlId);
    if (cached && cached.version === version) return cached;
    const record = await loadCrawl(this.redis, this.keys, crawlId);
    if (!record) return undefined;
    if (this.entries.size >= this.maxEntries) this.entries.delete(this.entries.keys().next().value!);
    this.entries.set(crawlId, record);
    return record;
  }
}
