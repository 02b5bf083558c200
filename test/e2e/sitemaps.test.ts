import { join } from 'node:path';
import { gzipSync } from 'node:zlib';
import { Redis } from 'ioredis';
import { Keys, closeQueues, createQueues } from '@crawlfleet/core';
import { catalogueSpider, groundTruth, siteShape, startCatalogueSite } from '../fixtures/catalogue-site.mjs';
import { startServer } from '../fixtures/http-server.mjs';
import { REDIS_URL, comparable, dropPrefix, readJsonl, runCli, tempDir, testEnv, uniquePrefix, writeJson } from '../helpers/cli.js';

const SHAPE = siteShape(120, 20);

describe('sitemaps as a seed source', () => {
  const prefix = uniquePrefix('sitemap');
  const dir = tempDir('sitemap');
  afterAll(() => dropPrefix(prefix));

  test('robots.txt -> sitemap index -> a sitemap and a gzipped one: exactly the listed URLs are fetched, once each, and give the ground truth', async () => {
    const site = await startCatalogueSite(SHAPE, { sitemaps: true });
    try {
      // No follow rules: every page fetched comes from the sitemaps.
      const spider = writeJson(dir, 'sitemap.json', { ...catalogueSpider(site.url), startUrls: [], follow: [], sitemapUrls: [`${site.url}/robots.txt`] });
      const out = join(dir, 'items.jsonl');
      const run = await runCli(['crawl', spider, '--crawl-id', 'from-sitemaps', '--out', out, '--json', '--quiet'], { env: testEnv(prefix) });
      expect(run.code).toBe(0);
      const listed = [...Array.from({ length: SHAPE.catalogPages }, (_, i) => `/catalogue/page-${i + 1}.html`), ...Array.from({ length: SHAPE.products }, (_, i) => `/product/p-${i + 1}.html`)];
      const pages = site.requests.map((r) => r.path).filter((p) => !p.includes('sitemap') && p !== '/robots.txt');
      expect(pages.sort()).toEqual(listed.sort());
      expect(
        site.requests
          .filter((r) => r.path.includes('sitemap'))
          .map((r) => r.path)
          .sort(),
      ).toEqual(['/sitemap_index.xml', '/sitemaps/catalogue.xml', '/sitemaps/products.xml.gz']);
      const truth = groundTruth(site.url, SHAPE);
      const items = readJsonl(out);
      const fields = ['type', 'url', 'sku', 'title', 'price'];
      expect(
        comparable(
          items.filter((i) => i.type === 'product'),
          fields,
        ),
      ).toEqual(comparable(truth.products, fields));
      // The off-site URL in the sitemap is out of scope: skipped, never fetched.
      expect(JSON.parse(run.stdout.trim().split('\n').pop()!).counters).toMatchObject({ seen: listed.length, fetched: listed.length, skipped: 1, failed: 0 });
    } finally {
      await site.close();
    }
  });

  test("seed --sitemap URL admits the sitemap index's URLs; a sitemap that cannot be read fails the seed with its name and registers nothing", async () => {
    const site = await startCatalogueSite(SHAPE, { sitemaps: true });
    try {
      const env = testEnv(prefix);
      const spider = writeJson(dir, 'seed.json', { ...catalogueSpider(site.url), startUrls: [], follow: [] });
      const seeded = await runCli(['seed', spider, '--crawl-id', 'seeded', '--sitemap', `${site.url}/sitemap_index.xml`], { env });
      expect(seeded.code).toBe(0);
      const status = JSON.parse((await runCli(['status', '--crawl-id', 'seeded', '--json'], { env })).stdout);
      expect(status.counters).toMatchObject({ seen: SHAPE.catalogPages + SHAPE.products, skipped: 1 });
      expect(status.queues.fetch.waiting).toBe(SHAPE.catalogPages + SHAPE.products);
      expect((await runCli(['reset', '--crawl-id', 'seeded'], { env })).code).toBe(0);

      const missing = await runCli(['seed', spider, '--crawl-id', 'no-sitemap', '--sitemap', `${site.url}/sitemaps/none.xml`], { env });
      expect(missing.code).toBe(1);
      expect(missing.stderr).toContain(`${site.url}/sitemaps/none.xml: HTTP 404`);
      expect((await runCli(['status', '--crawl-id', 'no-sitemap'], { env })).code).toBe(2);
    } finally {
      await site.close();
    }
  });
});

/** A site whose robots.txt at `?n=k` lists a sitemap `/robots.txt?n=k+1`, without end (issue #19), and one page. */
async function startRunawaySite() {
  const site = await startServer((req, res) => {
    const url = new URL(req.url ?? '/', 'http://x');
    if (url.pathname === '/robots.txt') {
      const n = Number(url.searchParams.get('n') ?? 0);
      res.writeHead(200, { 'content-type': 'text/plain' }).end(`User-agent: *\nAllow: /\nSitemap: http://127.0.0.1:${site.port}/robots.txt?n=${n + 1}\n`);
      return;
    }
    if (url.pathname === '/page.html') {
      res.writeHead(200, { 'content-type': 'text/html' }).end('<html><head><title>page</title></head><body>page</body></html>');
      return;
    }
    res.writeHead(404, { 'content-type': 'text/html' }).end('<html><body>not found</body></html>');
  });
  return Object.assign(site, { chain: () => site.requests.filter((r) => r.path.startsWith('/robots.txt?n=')).map((r) => r.path) });
}

type Route = { type: string; body: string | Buffer; encoding?: string };

/** A site serving these routes (path with query) and, at any /page-*.html, a small HTML page; `{base}` in a body is the site's origin. */
async function startSitemapSite(routes: (base: string) => Record<string, Route>) {
  let table: Record<string, Route> = {};
  const site = await startServer((req, res) => {
    const route = table[req.url ?? '/'];
    if (route) {
      res.writeHead(200, { 'content-type': route.type, ...(route.encoding ? { 'content-encoding': route.encoding } : {}) }).end(route.body);
      return;
    }
    if (/^\/page-[\w-]+\.html$/.test(req.url ?? '')) {
      res.writeHead(200, { 'content-type': 'text/html' }).end(`<html><head><title>${req.url}</title></head><body>${req.url}</body></html>`);
      return;
    }
    res.writeHead(404, { 'content-type': 'text/html' }).end('<html><body>not found</body></html>');
  });
  table = routes(site.url);
  return Object.assign(site, { paths: () => site.requests.map((r) => r.path) });
}

const urlset = (urls: { loc: string; lastmod?: string }[]) =>
  `<?xml version="1.0" encoding="UTF-8"?>\n<urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">${urls.map((u) => `<url><loc>${u.loc}</loc>${u.lastmod ? `<lastmod>${u.lastmod}</lastmod>` : ''}</url>`).join('\n')}</urlset>`;
const sitemapIndex = (locs: string[]) =>
  `<?xml version="1.0" encoding="UTF-8"?>\n<sitemapindex xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">${locs.map((l) => `<sitemap><loc>${l}</loc></sitemap>`).join('')}</sitemapindex>`;
const pages = (base: string, name: string, n: number) => Array.from({ length: n }, (_, i) => `${base}/page-${name}-${i + 1}.html`);

/** Seeds a crawl (which must succeed) and returns what the seeder logged and the crawl's counters. */
async function seedAndCount(env: NodeJS.ProcessEnv, spider: string, crawlId: string, more: string[] = []) {
  const seeded = await runCli(['seed', spider, '--crawl-id', crawlId, ...more], { env, timeoutMs: 60_000 });
  // on failure, the seeder's own words
  expect({ code: seeded.code, stderr: seeded.code === 0 ? '' : seeded.stderr }).toEqual({ code: 0, stderr: '' });
  const status = JSON.parse((await runCli(['status', '--crawl-id', crawlId, '--json'], { env })).stdout);
  return { stderr: seeded.stderr, counters: status.counters };
}

function lastStatus(stdout: string) {
  return JSON.parse(stdout.trim().split('\n').pop()!);
}

describe('sitemaps are bounded (issue #19)', () => {
  const prefix = uniquePrefix('sitemap-bounds');
  const dir = tempDir('sitemap-bounds');
  afterAll(() => dropPrefix(prefix));

  const chainSpider = (url: string, extra: Record<string, unknown> = {}) => ({
    name: 'runaway',
    startUrls: [`${url}/page.html`],
    allowedDomains: [new URL(url).host],
    obeyRobotsTxt: false,
    allowPrivateAddresses: true,
    sitemapUrls: [`${url}/robots.txt?n=0`],
    ...extra,
  });

  test('a robots.txt chain (?n=k lists ?n=k+1) stops at limits.maxSitemapDepth (default 5): 6 files read, the 7th skipped, and the crawl ends', async () => {
    const site = await startRunawaySite();
    try {
      const spider = writeJson(dir, 'runaway.json', chainSpider(site.url));
      const run = await runCli(['crawl', spider, '--crawl-id', 'runaway', '--out', join(dir, 'runaway.jsonl'), '--json', '--quiet'], { env: testEnv(prefix), timeoutMs: 60_000 });
      const chain = site.chain();
      expect({ code: run.code, files: chain.length }).toEqual({ code: 0, files: 6 });
      expect(chain).toEqual([0, 1, 2, 3, 4, 5].map((n) => `/robots.txt?n=${n}`));
      expect(lastStatus(run.stdout)).toMatchObject({ state: 'done', counters: { seen: 1, fetched: 1, skipped: 1, failed: 0 } });
      expect(run.stderr).toContain('limits.maxSitemapDepth');
    } finally {
      await site.close();
    }
  });

  test('limits.maxSitemapFiles bounds the sitemap files read: the same chain with a deep depth bound reads exactly 20 files and skips the 21st', async () => {
    const site = await startRunawaySite();
    try {
      const spider = writeJson(dir, 'files.json', chainSpider(site.url, { limits: { maxSitemapDepth: 100, maxSitemapFiles: 20 } }));
      const { stderr, counters } = await seedAndCount(testEnv(prefix), spider, 'files-bound');
      expect(site.chain()).toEqual(Array.from({ length: 20 }, (_, n) => `/robots.txt?n=${n}`));
      expect(stderr).toContain('limits.maxSitemapFiles');
      expect(counters).toMatchObject({ seen: 1, skipped: 1 });
    } finally {
      await site.close();
    }
  });

  test('limits.maxSitemapUrls bounds the URLs taken: the rest of the file being read, and each sitemap left unread, are counted skipped', async () => {
    const site = await startSitemapSite((base) => ({
      '/sitemap_index.xml': { type: 'application/xml', body: sitemapIndex([`${base}/a.xml`, `${base}/b.xml.gz`, `${base}/c.xml`]) },
      '/a.xml': { type: 'application/xml', body: urlset(pages(base, 'a', 10).map((loc) => ({ loc }))) },
      '/b.xml.gz': { type: 'application/gzip', body: gzipSync(urlset(pages(base, 'b', 10).map((loc) => ({ loc })))) },
      '/c.xml': { type: 'application/xml', body: urlset(pages(base, 'c', 10).map((loc) => ({ loc }))) },
    }));
    try {
      const spider = writeJson(dir, 'urls.json', { name: 'urls', allowedDomains: [new URL(site.url).host], allowPrivateAddresses: true, obeyRobotsTxt: false, limits: { maxSitemapUrls: 15 } });
      const { stderr, counters } = await seedAndCount(testEnv(prefix), spider, 'urls-bound', ['--sitemap', `${site.url}/sitemap_index.xml`]);
      expect(stderr).toContain('limits.maxSitemapUrls');
      expect(site.paths()).toEqual(['/sitemap_index.xml', '/a.xml', '/b.xml.gz']);
      // 10 of a.xml and 5 of b.xml.gz taken; b's other 5 and the unread c.xml skipped
      expect(counters).toMatchObject({ seen: 15, skipped: 6 });
    } finally {
      await site.close();
    }
  });

  test('plain-text sitemaps (one URL per line, gzipped or not) and gzip by Content-Encoding are read, and every URL is fetched', async () => {
    const site = await startSitemapSite((base) => ({
      '/sitemap.txt': { type: 'text/plain; charset=utf-8', body: `\uFEFF${pages(base, 't', 3).join('\r\n')}\r\n\r\n` },
      '/more.txt.gz': { type: 'application/gzip', body: gzipSync(`${pages(base, 'g', 2).join('\n')}\n`) },
      '/encoded.xml': { type: 'application/xml', encoding: 'gzip', body: gzipSync(urlset(pages(base, 'e', 2).map((loc) => ({ loc })))) },
    }));
    try {
      const spider = writeJson(dir, 'text.json', {
        name: 'text',
        allowPrivateAddresses: true,
        obeyRobotsTxt: false,
        sitemapUrls: [`${site.url}/sitemap.txt`, `${site.url}/more.txt.gz`, `${site.url}/encoded.xml`],
      });
      const run = await runCli(['crawl', spider, '--crawl-id', 'text-sitemaps', '--out', join(dir, 'text.jsonl'), '--json', '--quiet'], { env: testEnv(prefix), timeoutMs: 60_000 });
      expect(run.code).toBe(0);
      const listed = [...pages('', 't', 3), ...pages('', 'g', 2), ...pages('', 'e', 2)];
      expect(
        site
          .paths()
          .filter((p) => p.startsWith('/page-'))
          .sort(),
      ).toEqual(listed.sort());
      expect(lastStatus(run.stdout)).toMatchObject({ state: 'done', counters: { seen: 7, fetched: 7, skipped: 0, failed: 0 } });
    } finally {
      await site.close();
    }
  });

  test("a <url>'s lastmod travels with its fetch job (ISO 8601, UTC); a URL without one, or with an invalid one, carries none", async () => {
    const site = await startSitemapSite((base) => ({
      '/sitemap.xml': {
        type: 'application/xml',
        body: urlset([
          { loc: `${base}/page-1.html`, lastmod: '2024-05-01' },
          { loc: `${base}/page-2.html`, lastmod: '2024-05-01T10:30:00+02:00' },
          { loc: `${base}/page-3.html` },
          { loc: `${base}/page-4.html`, lastmod: 'yesterday' },
        ]),
      },
    }));
    const redis = new Redis(REDIS_URL);
    const queues = createQueues(redis, new Keys(prefix));
    try {
      const spider = writeJson(dir, 'lastmod.json', { name: 'lastmod', allowPrivateAddresses: true, obeyRobotsTxt: false, sitemapUrls: [`${site.url}/sitemap.xml`] });
      expect((await runCli(['seed', spider, '--crawl-id', 'lastmod'], { env: testEnv(prefix), timeoutMs: 60_000 })).code).toBe(0);
      const jobs = (await queues.fetch.getJobs(['waiting', 'delayed', 'prioritized'])).filter((j) => j.data.crawlId === 'lastmod');
      const byPath = Object.fromEntries(jobs.map((j) => [new URL(j.data.url).pathname, j.data.lastmod]));
      expect(byPath).toEqual({ '/page-1.html': '2024-05-01T00:00:00.000Z', '/page-2.html': '2024-05-01T08:30:00.000Z', '/page-3.html': undefined, '/page-4.html': undefined });
    } finally {
      await closeQueues(queues);
      redis.disconnect();
      await site.close();
    }
  });

  test('a sitemap that fails after the first 10,000 URLs fails the seed, naming it and the crawl, which keeps what was admitted', async () => {
    const site = await startSitemapSite((base) => ({
      '/index.xml': { type: 'application/xml', body: sitemapIndex([`${base}/big.xml`, `${base}/missing.xml`]) },
      '/big.xml': { type: 'application/xml', body: urlset(pages(base, 'big', 10_001).map((loc) => ({ loc }))) },
    }));
    try {
      const env = testEnv(prefix);
      const spider = writeJson(dir, 'part.json', { name: 'part', allowedDomains: [new URL(site.url).host], allowPrivateAddresses: true, obeyRobotsTxt: false });
      const seeded = await runCli(['seed', spider, '--crawl-id', 'part-way', '--sitemap', `${site.url}/index.xml`], { env, timeoutMs: 60_000 });
      expect(seeded.code).toBe(1);
      expect(seeded.stderr).toContain(`${site.url}/missing.xml: HTTP 404`);
      expect(seeded.stderr).toContain('seed it again with --crawl-id part-way');
      const status = JSON.parse((await runCli(['status', '--crawl-id', 'part-way', '--json'], { env })).stdout);
      // the first batch was admitted; the URL read after it went with the batch the failure cut short
      expect(status.counters).toMatchObject({ seen: 10_000, skipped: 0 });
    } finally {
      await site.close();
    }
  });
});
