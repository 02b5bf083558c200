import { createRequire } from 'node:module';
import type { Keys, RedisClient } from '@crawlfleet/core';

interface ParsedRobotsTxt {
  isAllowed(url: string, ua?: string): boolean | undefined;
  getCrawlDelay(ua?: string): number | undefined;
  getSitemaps(): string[];
}
// robots-parser is CommonJS and its typings do not describe the default export under NodeNext.
const robotsParser = createRequire(import.meta.url)('robots-parser') as (url: string, text: string) => ParsedRobotsTxt;

/** The robots.txt product token crawlfleet obeys (besides `*`). */
export const ROBOTS_AGENT = 'crawlfleet';
/** Google reads the first 500 KiB of a robots.txt; so do we. */
export const ROBOTS_MAX_BYTES = 500 * 1024;
/** A robots.txt larger than this is not fetched at all (a hostile server): the host's rules stay unknown. */
export const ROBOTS_FETCH_MAX_BYTES = 5 * 1024 * 1024;

export interface RobotsRules {
  isAllowed(url: string): boolean;
  /** Crawl-delay in ms, when robots.txt sets one */
  crawlDelayMs: number | undefined;
  sitemaps: string[];
}

/** What was fetched for an origin's robots.txt: an HTTP status and body, or `unavailable`. */
export type RobotsFetch = { status: number; body: string } | { unavailable: string };

/**
 * Pure: the rules a robots.txt fetch gives (RFC 9309). A 2xx is parsed; any 4xx means no rules
 * (everything allowed). A 5xx or a network error means the rules are unknown: `undefined`, and the
 * caller must not crawl the host yet.
 */
export function robotsRules(origin: string, fetched: RobotsFetch): RobotsRules | undefined {
  if ('unavailable' in fetched || fetched.status >= 500) return undefined;
  const text = fetched.status >= 200 && fetched.status < 300 ? fetched.body.slice(0, ROBOTS_MAX_BYTES) : '';
  const robots = robotsParser(`${origin}/robots.txt`, text);
  const delay = robots.getCrawlDelay(ROBOTS_AGENT);
  return {
    isAllowed: (url) => robots.isAllowed(url, ROBOTS_AGENT) !== false,
    crawlDelayMs: typeof delay === 'number' && Number.isFinite(delay) && delay > 0 ? Math.round(delay * 1000) : undefined,
    sitemaps: robots.getSitemaps(),
  };
}

export type RobotsLookup = { rules: RobotsRules } | { unavailable: string } | 'missing';

/** How long this process trusts its own copy before it reads Redis again. */
const LOCAL_MS = 30_000;

/**
 * robots.txt, fetched once per origin for the whole fleet and cached in Redis with a TTL; parsed
 * copies are kept in memory for a short while so most URLs cost no round trip. An origin whose
 * robots.txt was unavailable is remembered briefly, so the fleet does not hammer a failing server.
 */
export class RobotsCache {
  private readonly local = new Map<string, { lookup: Exclude<RobotsLookup, 'missing'>; until: number }>();

  constructor(
    private readonly redis: RedisClient,
    private readonly keys: Keys,
    private readonly ttlSeconds: number,
    private readonly unavailableSeconds = 30,
  ) {}

  async lookup(origin: string): Promise<RobotsLookup> {
    const now = Date.now();
    const mine = this.local.get(origin);
    if (mine && mine.until > now) return mine.lookup;
    const raw = await this.redis.get(this.keys.polite().robots(origin));
    if (raw === null) return 'missing';
    const lookup = this.remember(origin, JSON.parse(raw) as RobotsFetch);
    return lookup;
  }

  /** Only one fetcher in the fleet fetches an origin's robots.txt at a time. */
  async lock(origin: string, ms = 30_000): Promise<boolean> {
    return (await this.redis.set(this.keys.polite().robotsLock(origin), '1', 'PX', ms, 'NX')) === 'OK';
  }

  async store(origin: string, fetched: RobotsFetch): Promise<Exclude<RobotsLookup, 'missing'>> {
    const ttl = robotsRules(origin, fetched) ? this.ttlSeconds : this.unavailableSeconds;
    await this.redis.multi().set(this.keys.polite().robots(origin), JSON.stringify(fetched), 'EX', ttl).del(this.keys.polite().robotsLock(origin)).exec();
    return this.remember(origin, fetched);
  }

  async unlock(origin: string): Promise<void> {
    await this.redis.del(this.keys.polite().robotsLock(origin));
  }

  private remember(origin: string, fetched: RobotsFetch): Exclude<RobotsLookup, 'missing'> {
    const rules = robotsRules(origin, fetched);
    const lookup = rules ? { rules } : { unavailable: 'unavailable' in fetched ? fetched.unavailable : `HTTP ${fetched.status}` };
    this.local.set(origin, { lookup, until: Date.now() + (rules ? LOCAL_MS : 2000) });
    return lookup;
  }
}
