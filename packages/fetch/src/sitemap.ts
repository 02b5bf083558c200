import { gunzipSync } from 'node:zlib';
import { load } from 'cheerio';
import { NonRetryableError, type Logger } from '@crawlfleet/core';
import { fetchPage, type FetchSettings } from './http-client.js';
import type { Lookup } from './address-guard.js';

/** The sitemaps protocol's own limits: 50,000 URLs and 50 MB (uncompressed) per file. */
export const SITEMAP_MAX_BYTES = 50 * 1024 * 1024;
/** Index nesting beyond this is refused: a sitemap index must list sitemaps, not indexes of indexes of... */
const MAX_INDEX_DEPTH = 3;

export type SitemapDocument = { kind: 'index'; sitemaps: string[] } | { kind: 'urlset'; urls: string[] } | { kind: 'robots'; sitemaps: string[] };

/** Pure: a sitemap body as fetched (gzip or not) to its text, capped. */
export function sitemapText(body: Buffer): string {
  const gzipped = body.length > 2 && body[0] === 0x1f && body[1] === 0x8b;
  return (gzipped ? gunzipSync(body, { maxOutputLength: SITEMAP_MAX_BYTES }) : body).toString('utf8');
}

/**
 * Pure: what a sitemap document lists. A `<sitemapindex>` lists sitemaps, a `<urlset>` lists page
 * URLs, and a robots.txt lists sitemaps in its `Sitemap:` lines.
 */
export function parseSitemap(text: string, url: string): SitemapDocument {
  if (new URL(url).pathname === '/robots.txt') {
    const sitemaps = [...text.matchAll(/^\s*sitemap\s*:\s*(\S+)/gim)].map((m) => m[1]!);
    return { kind: 'robots', sitemaps };
  }
  const $ = load(text, { xml: true });
  const locs = (selector: string) =>
    $(selector)
      .map((_, el) => $(el).text().trim())
      .get()
      .filter((s) => s.length > 0);
  if ($('sitemapindex').length > 0) return { kind: 'index', sitemaps: locs('sitemapindex > sitemap > loc') };
  if ($('urlset').length > 0) return { kind: 'urlset', urls: locs('urlset > url > loc') };
  throw new NonRetryableError('ERR_SITEMAP', `${url} is neither a sitemap index nor a urlset`);
}

export interface SitemapOptions {
  spider: FetchSettings;
  userAgent: string;
  lookup?: Lookup;
  log?: Logger;
}

/**
 * Every page URL reachable from these sitemaps (sitemap indexes, gzip, and the `Sitemap:` lines of a
 * robots.txt given as a sitemap URL), in order, each once. A sitemap that cannot be fetched or read
 * is an error naming it: a seed source that silently yields nothing would look like an empty site.
 */
export async function collectSitemapUrls(sources: string[], options: SitemapOptions): Promise<string[]> {
  const urls = new Set<string>();
  const visited = new Set<string>();
  const limits = { ...options.spider.limits, maxResponseBytes: SITEMAP_MAX_BYTES };
  const visit = async (url: string, depth: number): Promise<void> => {
    if (visited.has(url)) return;
    visited.add(url);
    if (depth > MAX_INDEX_DEPTH) throw new NonRetryableError('ERR_SITEMAP', `${url}: sitemap indexes nested deeper than ${MAX_INDEX_DEPTH}`);
    const page = await fetchPage(url, { ...options.spider, limits }, { userAgent: options.userAgent, ...(options.lookup ? { lookup: options.lookup } : {}) });
    if (page.status < 200 || page.status >= 300) throw new NonRetryableError('ERR_SITEMAP', `${url}: HTTP ${page.status}`);
    const doc = parseSitemap(sitemapText(page.body), page.url);
    if (doc.kind === 'urlset') {
      for (const u of doc.urls) urls.add(u);
      options.log?.info({ sitemap: url, urls: doc.urls.length, total: urls.size }, 'sitemap read');
      return;
    }
    for (const child of doc.sitemaps) await visit(new URL(child, page.url).href, doc.kind === 'robots' ? depth : depth + 1);
  };
  for (const source of sources) await visit(source, 0);
  return [...urls];
}
