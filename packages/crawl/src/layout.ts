import { ConfigError, partitionOfHost, type Keys, type PartKeys, type RedisClient, type Spider } from '@crawlfleet/core';
import { frontierTake, hostOfUrl, type FrontierTake } from '@crawlfleet/frontier';

/**
 * Where a crawl's state lives: its own slot `{crawlId}` (meta, seeding, invalid reasons) and
 * `parts` partitions, each in a slot of its own, holding the URLs of the hosts that hash to it (its
 * host queues, seen-URL index, requests, pending sets, dead letters, counters). `parts` is fixed
 * when the crawl is registered.
 */
export interface CrawlLayout {
  crawlId: string;
  parts: number;
  /**
   * The run the caller works for: the crawl's startedAt, new at each registration after a reset.
   * Admissions and finishes of another run change nothing (a job that ran across a reset); absent,
   * any run is taken.
   */
  startedAt?: string;
}

/** Pure: the partition that holds a URL (by its host). */
export function partOfUrl(layout: CrawlLayout, url: string): number {
  return partitionOfHost(hostOfUrl(url), layout.parts);
}

/** Pure: every partition index of a crawl. */
export function partIndexes(layout: CrawlLayout): number[] {
  return Array.from({ length: layout.parts }, (_, i) => i);
}

/** The keys of the partition that holds `url`. */
export function partKeysOfUrl(keys: Keys, layout: CrawlLayout, url: string): PartKeys {
  return keys.part(layout.crawlId, partOfUrl(layout, url), layout.parts);
}

/** The keys of every partition of a crawl. */
export function allPartKeys(keys: Keys, layout: CrawlLayout): PartKeys[] {
  return partIndexes(layout).map((p) => keys.part(layout.crawlId, p, layout.parts));
}

/** A crawl registered by a fleet older than partitions (no `parts` in its meta): it must be drained by that fleet. */
export class LegacyCrawlError extends ConfigError {
  constructor(readonly crawlId: string) {
    super(
      `crawl ${crawlId} was registered by a crawlfleet older than its partitioned frontier (before 0.2): finish it with the fleet that started it, or \`crawlfleet reset --crawl-id ${crawlId}\` (docs/operations.md, "Upgrading")`,
    );
  }
}

/** A collected crawl's id is refused for a new crawl: its URLs' index is gone, so it cannot be resumed. */
export class CollectedCrawlError extends ConfigError {
  constructor(
    readonly crawlId: string,
    collectedAt: string,
  ) {
    super(
      `crawl ${crawlId} was collected by gc at ${collectedAt}: only its summary is left (crawlfleet status --crawl-id ${crawlId}). Choose another crawl id, or \`crawlfleet reset --crawl-id ${crawlId}\` to forget it and crawl it again from scratch`,
    );
  }
}

/** Pure: the layout of a crawl from its meta fields; undefined for an unknown crawl. */
export function layoutOf(crawlId: string, meta: { parts?: string | null | undefined; state?: string | null | undefined }): CrawlLayout | 'legacy' | undefined {
  if (!meta.state) return undefined;
  const parts = Number(meta.parts);
  return Number.isInteger(parts) && parts >= 1 ? { crawlId, parts } : 'legacy';
}

/** Reads a crawl's layout; undefined for an unknown crawl. A legacy crawl throws LegacyCrawlError. */
export async function loadLayout(redis: RedisClient, keys: Keys, crawlId: string): Promise<CrawlLayout | undefined> {
  const [state, parts] = await redis.hmget(keys.crawl(crawlId).meta, 'state', 'parts');
  const layout = layoutOf(crawlId, { state, parts });
  if (layout === 'legacy') throw new LegacyCrawlError(crawlId);
  return layout;
}

/**
 * Pure: the take of each partition of a crawl: FRONTIER_WINDOW shared by its partitions, never
 * below the most any one host of the spider may have in flight.
 */
export function crawlTake(window: number, layout: CrawlLayout, spider: Pick<Spider, 'politeness' | 'hosts'>): FrontierTake {
  const widest = Math.max(spider.politeness.concurrencyPerHost, ...Object.values(spider.hosts).map((h) => h.concurrencyPerHost ?? 0));
  return frontierTake(window, layout.parts, widest);
}

/**
 * The crawls still running or paused that a fleet older than partitions registered. This fleet's
 * workers cannot run their jobs (their keys and scripts are the old ones), so a worker refuses to
 * start beside them: they must be finished by the old fleet, or reset (docs/operations.md).
 */
export async function unfinishedLegacyCrawls(redis: RedisClient, keys: Keys): Promise<string[]> {
  const ids = await redis.smembers(keys.crawlIndex());
  const metas = await Promise.all(ids.map((id) => redis.hmget(keys.crawl(id).meta, 'state', 'parts')));
  return ids.filter((id, i) => {
    const [state, parts] = metas[i]!;
    return (state === 'running' || state === 'paused') && layoutOf(id, { state, parts }) === 'legacy';
  });
}
