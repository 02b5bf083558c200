import { join } from 'node:path';
import { catalogueSpider, groundTruth, siteShape, startCatalogueSite } from '../fixtures/catalogue-site.mjs';
import { comparable, dropPrefix, readJsonl, runCli, tempDir, testEnv, uniquePrefix, writeJson } from '../helpers/cli.js';

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
