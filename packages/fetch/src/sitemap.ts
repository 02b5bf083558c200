import { NonRetryableError, type Logger, type Spider } from '@crawlfleet/core';
import { fetchPage, type FetchSettings } from './http-client.js';
import type { Lookup } from './address-guard.js';
import { SITEMAP_MAX_BYTES, readSitemap, slices } from './sitemap-reader.js';

export { SITEMAP_MAX_BYTES, readSitemap, sitemapLastmod, type SitemapItem } from './sitemap-reader.js';

/** The spider's limits that bound a sitemap walk (issue #19). */
export type SitemapBound = 'maxSitemapDepth' | 'maxSitemapFiles' | 'maxSitemapUrls';

/** What a walk needs of a spider: how to fetch, and its sitemap bounds. */
export interface SitemapSettings extends FetchSettings {
  limits: FetchSettings['limits'] & Pick<Spider['limits'], SitemapBound>;
}

/** A page URL a sitemap lists, with its `<lastmod>` (ISO 8601, UTC) when it gave a valid one. */
export interface SitemapEntry {
  url: string;
  lastmod?: string;
}

/** How far a walk got: files fetched, page URLs taken, and what each bound left out. */
export interface SitemapWalkStats {
  files: number;
  urls: number;
  /** sitemaps not read, or page URLs not taken, because of each bound: the crawl counts them skipped */
  skipped: Record<SitemapBound, number>;
}

export function newSitemapWalkStats(): SitemapWalkStats {
  return { files: 0, urls: 0, skipped: { maxSitemapDepth: 0, maxSitemapFiles: 0, maxSitemapUrls: 0 } };
}

/** Pure: everything a walk's bounds left out. */
export function sitemapSkipped(stats: SitemapWalkStats): number {
  return stats.skipped.maxSitemapDepth + stats.skipped.maxSitemapFiles + stats.skipped.maxSitemapUrls;
}

export interface SitemapOptions {
  spider: SitemapSettings;
  userAgent: string;
  lookup?: Lookup;
  log?: Logger;
  /** filled in as the walk goes */
  stats?: SitemapWalkStats;
}

const BOUND_WHAT: Record<SitemapBound, string> = {
  maxSitemapDepth: 'a sitemap listed deeper than',
  maxSitemapFiles: 'a sitemap listed past',
  maxSitemapUrls: 'sitemaps and their URLs past',
};

/**
 * Streams the page URLs reachable from these sitemaps (sitemap indexes, gzip, text sitemaps and the
 * `Sitemap:` lines of a robots.txt given as a sitemap URL), in document order, each sitemap read once.
 * Three bounds end a runaway: `limits.maxSitemapDepth` (an index's child, or a robots.txt's sitemap,
 * is one level deeper than what lists it), `limits.maxSitemapFiles` and `limits.maxSitemapUrls`.
 * What goes past one is counted in `stats.skipped` (a sitemap not read counts one; the rest of the file
 * being read when the URL bound is reached count one each) and logged once as a warning naming the
 * bound. A sitemap that cannot be fetched or read is an error naming it: a seed source that silently
 * yields nothing would look like an empty site.
 */
export async function* sitemapEntries(sources: string[], options: SitemapOptions): AsyncGenerator<SitemapEntry> {
  const { spider, log } = options;
  const bounds = spider.limits;
  const stats = options.stats ?? newSitemapWalkStats();
  const fetchSettings = { ...spider, limits: { ...spider.limits, maxResponseBytes: SITEMAP_MAX_BYTES } };
  const warned = new Set<SitemapBound>();
  const skip = (bound: SitemapBound, sitemap: string) => {
    stats.skipped[bound]++;
    if (warned.has(bound)) return;
    warned.add(bound);
    log?.warn({ sitemap, bound: `limits.${bound}`, limit: bounds[bound] }, `${BOUND_WHAT[bound]} limits.${bound} (${bounds[bound]}) is skipped`);
  };
  // Every sitemap planned is read once; a file's place is taken when it is listed, so that a deep
  // chain cannot use up the files of sitemaps listed before it.
  const planned = new Set<string>();
  const plan = (url: string, depth: number): { url: string; depth: number }[] => {
    if (planned.has(url)) return [];
    const past = depth > bounds.maxSitemapDepth ? 'maxSitemapDepth' : planned.size >= bounds.maxSitemapFiles ? 'maxSitemapFiles' : undefined;
    if (past) {
      skip(past, url);
      return [];
    }
    planned.add(url);
    return [{ url, depth }];
  };
  const stack = sources.flatMap((url) => plan(url, 0)).reverse();
  while (stack.length > 0) {
    const { url, depth } = stack.pop()!;
    if (stats.urls >= bounds.maxSitemapUrls) {
      skip('maxSitemapUrls', url);
      continue;
    }
    stats.files++;
    const page = await fetchPage(url, fetchSettings, { userAgent: options.userAgent, ...(options.lookup ? { lookup: options.lookup } : {}) });
    if (page.status < 200 || page.status >= 300) throw new NonRetryableError('ERR_SITEMAP', `${url}: HTTP ${page.status}`, { url });
    const children: { url: string; depth: number }[] = [];
    let urls = 0;
    for await (const item of readSitemap(slices(page.body), page.url)) {
      if (item.kind === 'sitemap') {
        const child = childUrl(item.url, page.url);
        if (child) children.push(...plan(child, depth + 1));
      } else if (stats.urls < bounds.maxSitemapUrls) {
        stats.urls++;
        urls++;
        yield item.lastmod ? { url: item.url, lastmod: item.lastmod } : { url: item.url };
      } else skip('maxSitemapUrls', url);
    }
    log?.info({ sitemap: url, depth, urls, sitemaps: children.length, total: stats.urls }, 'sitemap read');
    stack.push(...children.reverse());
  }
  if (sitemapSkipped(stats) > 0)
    log?.warn({ files: stats.files, urls: stats.urls, skipped: stats.skipped }, 'sitemaps cut short by their bounds (limits.maxSitemapDepth, maxSitemapFiles, maxSitemapUrls)');
}

/** Pure: a listed sitemap's absolute http(s) URL, resolved against the file that lists it; undefined for anything else. */
function childUrl(listed: string, base: string): string | undefined {
  try {
    const url = new URL(listed, base);
    return url.protocol === 'http:' || url.protocol === 'https:' ? url.href : undefined;
  } catch {
    return undefined;
  }
}
