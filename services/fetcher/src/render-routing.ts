import type { Keys, RedisClient } from '@crawlfleet/core';
import { autoRoute, pageKindOf, type KindRenderStats } from '@crawlfleet/render';

/** How long a fetcher trusts what it read of a kind's render stats: a few seconds of a crawl's pages. */
const STATS_TTL_MS = 2000;

/**
 * What `render: "auto"` learns of each kind of page (pageKindOf: its host and directory), kept for
 * the crawl in Redis (keys.renderHosts) so that every fetcher of the fleet learns from every page:
 * how many pages of the kind needed a browser and how many did not. Read through a short cache;
 * written once per judged page.
 */
export class RenderRouting {
  private readonly cache = new Map<string, { stats: KindRenderStats; at: number }>();

  constructor(
    private readonly redis: RedisClient,
    private readonly keys: Keys,
  ) {}

  /** Where a URL goes: straight to render (pages of its kind need a browser), or judged from its plain page. */
  async route(crawlId: string, url: string): Promise<'render' | 'judge'> {
    return autoRoute(await this.stats(crawlId, pageKindOf(url)), Math.random());
  }

  async record(crawlId: string, url: string, neededBrowser: boolean): Promise<void> {
    const kind = pageKindOf(url);
    const field = `${kind}:${neededBrowser ? 'r' : 'p'}`;
    await this.redis.hincrby(this.keys.renderHosts(crawlId), field, 1);
    const cached = this.cache.get(`${crawlId} ${kind}`);
    if (cached) cached.stats[neededBrowser ? 'rendered' : 'plain']++;
  }

  private async stats(crawlId: string, kind: string): Promise<KindRenderStats> {
    const key = `${crawlId} ${kind}`;
    const cached = this.cache.get(key);
    if (cached && Date.now() - cached.at < STATS_TTL_MS) return cached.stats;
    const [rendered, plain] = await this.redis.hmget(this.keys.renderHosts(crawlId), `${kind}:r`, `${kind}:p`);
    const stats = { rendered: Number(rendered ?? 0), plain: Number(plain ?? 0) };
    if (this.cache.size > 10_000) this.cache.clear();
    this.cache.set(key, { stats, at: Date.now() });
    return stats;
  }
}
