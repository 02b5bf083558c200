import { join } from 'node:path';
import { catalogueSpider, groundTruth, startCatalogueSite } from '../fixtures/catalogue-site.mjs';
import { comparable, dropPrefix, readJsonl, runCli, spawnCli, tempDir, testEnv, uniquePrefix, writeJson } from '../helpers/cli.js';

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));
const FIELDS = ['type', 'url', 'link', 'title', 'price', 'sku', 'category', 'tags'];

/** The crawl is done, each of the site's pages counted once: fetched, parsed (all but the 404) and its items. */
async function expectCounters(crawlId: string, env: NodeJS.ProcessEnv, truth: ReturnType<typeof groundTruth>, written: number) {
  const status = JSON.parse((await runCli(['status', '--crawl-id', crawlId, '--json'], { env })).stdout);
  expect(status.state).toBe('done');
  expect(status.counters).toMatchObject({
    seen: truth.paths.size,
    fetched: truth.paths.size,
    parsed: truth.paths.size - 1,
    items: written,
    invalid: truth.invalid,
    written,
    failed: 1,
  });
}

/**
 * PARSE_IN_FETCHER=1: the fetchers parse their pages and hand the items straight to the writers.
 * No parser runs in these tests, so a single parse job handed over would leave the crawl unfinished.
 */
describe('fetchers that parse (PARSE_IN_FETCHER=1)', () => {
  test('2 fetchers and 1 writer, no parser: the identical item set and exact counters', async () => {
    const site = await startCatalogueSite();
    const prefix = uniquePrefix('fused');
    const dir = tempDir('fused');
    const env = testEnv(prefix, { PARSE_IN_FETCHER: '1' });
    const workers: ReturnType<typeof spawnCli>[] = [];
    try {
      const out = join(dir, 'items.jsonl');
      const seeded = await runCli(['seed', writeJson(dir, 'catalogue.json', catalogueSpider(site.url)), '--sink', out], { env });
      expect(seeded.code).toBe(0);
      const crawlId = seeded.stdout.trim().split('\n').pop()!;
      for (const stage of ['fetcher', 'fetcher', 'writer']) workers.push(spawnCli(['worker', stage, '--concurrency', '8'], { env }));
      expect((await runCli(['wait', '--crawl-id', crawlId, '--timeout', '150'], { env, timeoutMs: 160_000 })).code).toBe(0);

      const truth = groundTruth(site.url);
      const items = readJsonl(out);
      expect(comparable(items, FIELDS)).toEqual(comparable([...truth.products, ...truth.listings], FIELDS));
      const counts = site.counts();
      expect(new Set(counts.keys())).toEqual(truth.paths);
      expect(Math.max(...counts.values())).toBe(1);
      // Every page but the missing one (a 404) parsed, once; the products without a SKU counted invalid.
      await expectCounters(crawlId, env, truth, items.length);
      for (const w of workers) w.kill('SIGTERM');
      const results = await Promise.all(workers.map((w) => w.result));
      expect(results.map((r) => r.code)).toEqual([0, 0, 0]);
      // Each fetcher says at start that it parses its pages.
      expect(results.map((r) => /"msg":"worker ready"/.test(r.stderr) && /"parsesPages":true/.test(r.stderr))).toEqual([true, true, false]);
    } finally {
      for (const w of workers) if (w.exitCode === null) w.kill('SIGKILL');
      await site.close();
      await dropPrefix(prefix);
    }
  });

  test('a parsing fetcher killed with SIGKILL mid-crawl, twice: items and counters exact', async () => {
    const site = await startCatalogueSite(undefined, { delayMs: 5 });
    const prefix = uniquePrefix('fused-kill');
    const dir = tempDir('fused-kill');
    const env = testEnv(prefix, { PARSE_IN_FETCHER: '1', LOCK_DURATION_MS: '2000' });
    const workers: ReturnType<typeof spawnCli>[] = [];
    const fetched = () => [...site.counts().values()].reduce((a, b) => a + b, 0);
    try {
      const out = join(dir, 'items.jsonl');
      const seeded = await runCli(['seed', writeJson(dir, 'catalogue.json', catalogueSpider(site.url)), '--sink', out], { env });
      const crawlId = seeded.stdout.trim().split('\n').pop()!;
      workers.push(spawnCli(['worker', 'writer'], { env }));
      let victim = spawnCli(['worker', 'fetcher', '--concurrency', '16'], { env });
      workers.push(victim);
      for (const mark of [400, 1200]) {
        while (fetched() < mark) await sleep(20);
        victim.kill('SIGKILL');
        victim = spawnCli(['worker', 'fetcher', '--concurrency', '16'], { env });
        workers.push(victim);
      }
      expect((await runCli(['wait', '--crawl-id', crawlId, '--timeout', '150'], { env, timeoutMs: 160_000 })).code).toBe(0);

      const truth = groundTruth(site.url);
      const items = readJsonl(out);
      expect(comparable(items, FIELDS)).toEqual(comparable([...truth.products, ...truth.listings], FIELDS));
      expect(new Set(site.counts().keys())).toEqual(truth.paths);
      // Pages the killed fetchers had in hand were fetched again, and counted once.
      await expectCounters(crawlId, env, truth, items.length);
    } finally {
      for (const w of workers) if (w.exitCode === null) w.kill('SIGKILL');
      await site.close();
      await dropPrefix(prefix);
    }
  });
});
