import { join } from 'node:path';
import { catalogueSpider, groundTruth, startCatalogueSite } from '../fixtures/catalogue-site.mjs';
import { comparable, dropPrefix, readJsonl, runCli, spawnCli, tempDir, testEnv, uniquePrefix, waitFor, writeJson } from '../helpers/cli.js';

describe('interrupt and resume', () => {
  test('SIGINT half-way, then the same crawl id again: the full item set, only in-flight URLs fetched twice', async () => {
    const site = await startCatalogueSite();
    const prefix = uniquePrefix('resume');
    const dir = tempDir('resume');
    const env = testEnv(prefix);
    const concurrency = 8;
    try {
      const spider = writeJson(dir, 'catalogue.json', catalogueSpider(site.url));
      const out = join(dir, 'items.jsonl');
      const args = ['crawl', spider, '--crawl-id', 'cat-resume', '--out', out, '--quiet', '--concurrency', String(concurrency)];
      const first = spawnCli(args, { env });
      const truth = groundTruth(site.url);
      await waitFor(() => site.requests.length >= truth.paths.size / 2, 60_000, 'half the pages');
      first.kill('SIGINT');
      const interrupted = await first.result;
      expect(interrupted.code).toBe(130);
      const servedBefore = site.requests.length;
      expect(servedBefore).toBeLessThan(truth.paths.size);
      const itemsBefore = readJsonl(out).length;
      expect(itemsBefore).toBeLessThan(truth.products.length + truth.listings.length);

      const second = await runCli([...args, '--json'], { env });
      expect(second.code).toBe(0);
      const items = readJsonl(out);
      const fields = ['type', 'url', 'link', 'title', 'price', 'sku', 'category', 'tags'];
      expect(comparable(items, fields)).toEqual(comparable([...truth.products, ...truth.listings], fields));

      const counts = site.counts();
      expect(new Set(counts.keys())).toEqual(truth.paths);
      const twice = [...counts.entries()].filter(([, n]) => n === 2);
      expect(Math.max(...counts.values())).toBeLessThanOrEqual(2);
      // Only what was in flight at the interrupt can be fetched again: at most one per fetch slot.
      expect(twice.length).toBeLessThanOrEqual(concurrency);
      expect(JSON.parse(second.stdout.trim().split('\n').pop()!).counters.fetched).toBe(truth.paths.size);
    } finally {
      await site.close();
      await dropPrefix(prefix);
    }
  });
});
