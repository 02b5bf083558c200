import type { Spider } from '@crawlfleet/core';
import { hostOf } from './canonical.js';

export type ScopeVerdict = 'admit' | 'out-of-scope' | 'too-deep';

type ScopeSource = Pick<Spider, 'allowedDomains' | 'startUrls' | 'sitemapUrls'>;
const allowedCache = new WeakMap<ScopeSource, string[]>();

/** The hosts a crawl may visit: `allowedDomains`, or the hosts of its start URLs (worked out once per spider). */
export function allowedHosts(spider: ScopeSource): string[] {
  let hosts = allowedCache.get(spider);
  if (!hosts) {
    hosts =
      spider.allowedDomains && spider.allowedDomains.length > 0
        ? spider.allowedDomains.map((d) => d.toLowerCase())
        : [...new Set([...spider.startUrls, ...(spider.sitemapUrls ?? [])].map((u) => hostOf(u).host))];
    allowedCache.set(spider, hosts);
  }
  return hosts;
}

/**
 * Whether a host is in scope. An entry `host:port` matches that host and port only; an entry `host`
 * matches the host on any port and its subdomains (as Scrapy's allowed_domains does).
 */
export function hostAllowed(url: string, allowed: readonly string[]): boolean {
  const { hostname, host } = hostOf(url);
  return allowed.some((entry) => {
    if (entry.includes(':') && !entry.startsWith('[')) return entry === host;
    if (entry.startsWith('[')) return entry === host || entry === `[${hostname.replace(/^\[|\]$/g, '')}]`;
    return hostname === entry || hostname.endsWith(`.${entry}`);
  });
}

/** Pure decision: may this discovered URL enter the frontier at this depth? */
export function scopeVerdict(url: string, depth: number, spider: Pick<Spider, 'maxDepth'>, allowed: readonly string[]): ScopeVerdict {
  if (!hostAllowed(url, allowed)) return 'out-of-scope';
  if (spider.maxDepth !== undefined && depth > spider.maxDepth) return 'too-deep';
  return 'admit';
}

/** A follow rule's allow/deny filter: match one `allow` (when any) and no `deny`. */
export function passesAllowDeny(url: string, allow: readonly RegExp[], deny: readonly RegExp[]): boolean {
  if (allow.length > 0 && !allow.some((r) => r.test(url))) return false;
  return !deny.some((r) => r.test(url));
}
