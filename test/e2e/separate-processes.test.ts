import { join } from 'node:path';
import { catalogueSpider, groundTruth, startCatalogueSite } from '../fixtures/catalogue-site.mjs';
import { comparable, dropPrefix, readJsonl, runCli, spawnCli, tempDir, testEnv, uniquePrefix, writeJson } from '../helpers/cli.js';

describe('the fleet as separate processes', () => {
  test('seed, 2 fetchers, 2 parsers and 1 writer, then wait: the identical item set, no page fetched twice', async () => {
    const site = await startCatalogueSite();
    const prefix = uniquePrefix('fleet');
    const dir = tempDir('fleet');
    const env = testEnv(prefix);
    const workers: ReturnType<typeof spawnCli>[] = [];
    try {
      const spider = writeJson(dir, 'catalogue.json', catalogueSpider(site.url));
      const out = join(dir, 'items.jsonl');
      const seeded = await runCli(['seed', spider, '--sink', out], { env });
      expect(seeded.code).toBe(0);
      const crawlId = seeded.stdout.trim().split('\n').pop()!;
      expect(crawlId).toMatch(/^catalogue-\d{4}-\d\d-\d\dT\d\d-\d\d-\d\dZ$/);

      for (const [stage, n] of [
        ['fetcher', 2],
        ['parser', 2],
        ['writer', 1],
      ] as const) {
        for (let i = 0; i < n; i++) workers.push(spawnCli(['worker', stage, '--concurrency', '8'], { env }));
      }
      const waited = await runCli(['wait', '--crawl-id', crawlId, '--timeout', '150'], { env, timeoutMs: 160_000 });
      expect(waited.code).toBe(0);

      const truth = groundTruth(site.url);
      const items = readJsonl(out);
      const fields = ['type', 'url', 'link', 'title', 'price', 'sku', 'category', 'tags'];
      expect(comparable(items, fields)).toEqual(comparable([...truth.products, ...truth.listings], fields));
      const counts = site.counts();
      expect(new Set(counts.keys())).toEqual(truth.paths);
      expect(Math.max(...counts.values())).toBe(1);

      const status = JSON.parse((await runCli(['status', '--crawl-id', crawlId, '--json'], { env })).stdout);
      expect(status.state).toBe('done');
      expect(status.counters).toMatchObject({ seen: truth.paths.size, fetched: truth.paths.size, written: items.length, failed: 1 });

      // Every worker hands back or finishes its work on SIGTERM and exits 0.
      for (const w of workers) w.kill('SIGTERM');
      const results = await Promise.all(workers.map((w) => w.result));
      expect(results.map((r) => r.code)).toEqual(workers.map(() => 0));
    } finally {
      for (const w of workers) if (w.exitCode === null) w.kill('SIGKILL');
      await site.close();
      await dropPrefix(prefix);
    }
  });
});
