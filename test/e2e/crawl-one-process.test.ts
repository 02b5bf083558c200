import { join } from 'node:path';
import { Redis } from 'ioredis';
import { Keys } from '@crawlfleet/core';
import { readFileSync } from 'node:fs';
import { parse as parseCsv } from 'csv-parse/sync';
import { catalogueSpider, groundTruth, siteShape, startCatalogueSite } from '../fixtures/catalogue-site.mjs';
import { REDIS_URL, comparable, dropPrefix, readJsonl, runCli, tempDir, testEnv, uniquePrefix, writeJson } from '../helpers/cli.js';

const PRODUCT_FIELDS = ['type', 'url', 'title', 'price', 'sku', 'category', 'tags'];
const LISTING_FIELDS = ['type', 'link', 'title', 'price'];

describe('crawlfleet crawl: every stage in one process', () => {
  let site: Awaited<ReturnType<typeof startCatalogueSite>>;
  const prefix = uniquePrefix('one');
  const dir = tempDir('one');

  beforeAll(async () => {
    site = await startCatalogueSite();
  });
  afterAll(async () => {
    await site.close();
    await dropPrefix(prefix);
  });

  test('yields exactly the ground truth, fetching every page once, and reports done', async () => {
    const spider = writeJson(dir, 'catalogue.json', catalogueSpider(site.url));
    const out = join(dir, 'items.jsonl');
    const env = testEnv(prefix, { USER_AGENTS: 'crawlfleet-test/1\ncrawlfleet-test/2' });
    const run = await runCli(['crawl', spider, '--crawl-id', 'cat-one', '--out', out, '--json', '--concurrency', '16'], { env });
    expect(run.stderr).not.toMatch(/"level":"(error|fatal)"/);
    expect(run.code).toBe(0);

    const truth = groundTruth(site.url);
    const items = readJsonl(out);
    expect(
      comparable(
        items.filter((i) => i.type === 'product'),
        PRODUCT_FIELDS,
      ),
    ).toEqual(comparable(truth.products, PRODUCT_FIELDS));
    expect(
      comparable(
        items.filter((i) => i.type === 'listing'),
        LISTING_FIELDS,
      ),
    ).toEqual(comparable(truth.listings, LISTING_FIELDS));
    expect(items).toHaveLength(truth.products.length + truth.listings.length);
    for (const item of items) {
      expect(item).toMatchObject({ spider: 'catalogue', crawlId: 'cat-one' });
      expect(new Date(item.fetchedAt as string).toISOString()).toBe(item.fetchedAt);
    }

    // Every page exactly once, and nothing else (fragments, case and dot segments were one URL).
    const counts = site.counts();
    expect(new Set(counts.keys())).toEqual(truth.paths);
    expect([...counts.values()].every((n) => n === 1)).toBe(true);

    // User agents come from USER_AGENTS. The host's session keeps the one it began with for up to
    // sessions.maxUses (100) requests, and the next session takes whichever the rotation gives its
    // job: one of them, or both, may appear (sessions.test.ts counts a session's requests exactly).
    const agents = new Set(site.requests.map((r) => r.userAgent));
    expect([...agents].filter((a) => a !== 'crawlfleet-test/1' && a !== 'crawlfleet-test/2')).toEqual([]);
    expect(agents.size).toBeLessThanOrEqual(Math.ceil(site.requests.length / 100));
    // One session's requests keep its User-Agent: in arrival order it changes near a session's end
    // (up to 22 sessions here, each change blurred by the requests in flight), not every other
    // request as a rotation per request does (about half of 2,162).
    const switches = site.requests.filter((r, i) => i > 0 && r.userAgent !== site.requests[i - 1]!.userAgent).length;
    expect(switches).toBeLessThan(site.requests.length / 5);

    const final = JSON.parse(run.stdout.trim().split('\n').pop()!);
    const pages = truth.paths.size;
    expect(final).toMatchObject({
      crawlId: 'cat-one',
      spider: 'catalogue',
      state: 'done',
      counters: {
        seen: pages,
        fetched: pages,
        parsed: pages - truth.failedPaths.length,
        items: items.length,
        written: items.length,
        invalid: truth.invalid,
        failed: truth.failedPaths.length,
        blocked: 0,
        retries: 0,
        skipped: 1,
      },
      queues: {
        fetch: { waiting: 0, active: 0, delayed: 0, failed: 1 },
        parse: { waiting: 0, active: 0, delayed: 0, failed: 0 },
        write: { waiting: 0, active: 0, delayed: 0, failed: 0 },
      },
      finishedAt: expect.any(String),
      // every product without a SKU, with the field it lacks
      invalidReasons: [{ reason: 'product: missing required field "sku"', count: truth.invalid }],
    });

    const status = await runCli(['status', '--crawl-id', 'cat-one', '--json'], { env });
    expect(status.code).toBe(0);
    expect(JSON.parse(status.stdout)).toEqual(final);

    // A finished crawl run again is resumed: nothing is fetched again and nothing is written twice.
    const again = await runCli(['crawl', spider, '--crawl-id', 'cat-one', '--out', out, '--json', '--quiet'], { env });
    expect(again.code).toBe(0);
    expect(site.requests).toHaveLength(pages);
    expect(readJsonl(out)).toHaveLength(items.length);
  });

  test('a crawl larger than its frontier window gives the same items, with never more than the window of fetch jobs in Redis', async () => {
    const shape = siteShape(300, 20);
    const small = await startCatalogueSite(shape);
    const windowPrefix = uniquePrefix('window');
    const redis = new Redis(REDIS_URL);
    const pending = new Keys(windowPrefix).part('cat-window', 0, 1).pending.fetch;
    let most = 0;
    const watch = setInterval(() => {
      redis.scard(pending).then(
        (n) => (most = Math.max(most, n)),
        () => undefined,
      );
    }, 5);
    try {
      const spider = writeJson(dir, 'window.json', catalogueSpider(small.url));
      const out = join(dir, 'window.jsonl');
      const run = await runCli(['crawl', spider, '--crawl-id', 'cat-window', '--out', out, '--json', '--quiet', '--concurrency', '8'], {
        env: testEnv(windowPrefix, { FRONTIER_WINDOW: '8', FRONTIER_PARTITIONS: '1' }),
      });
      expect(run.code).toBe(0);
      const truth = groundTruth(small.url, shape);
      const items = readJsonl(out);
      expect(
        comparable(
          items.filter((i) => i.type === 'product'),
          PRODUCT_FIELDS,
        ),
      ).toEqual(comparable(truth.products, PRODUCT_FIELDS));
      expect(items).toHaveLength(truth.products.length + truth.listings.length);
      expect(new Set(small.counts().keys())).toEqual(truth.paths);
      expect([...small.counts().values()].every((n) => n === 1)).toBe(true);
      const final = JSON.parse(run.stdout.trim().split('\n').pop()!);
      expect(final).toMatchObject({ state: 'done', frontier: 0, counters: { seen: truth.paths.size, fetched: truth.paths.size, reconciled: 0 } });
      // The window (8): every other URL waited in its host's queue.
      expect(most).toBeGreaterThan(1);
      expect(most).toBeLessThanOrEqual(8);
    } finally {
      clearInterval(watch);
      redis.disconnect();
      await small.close();
      await dropPrefix(windowPrefix);
    }
  });

  test('writes CSV with a header row, RFC 4180 quoting and arrays joined with |', async () => {
    const small = await startCatalogueSite(siteShape(60, 20));
    try {
      const spider = writeJson(dir, 'small.json', catalogueSpider(small.url));
      const out = join(dir, 'items.csv');
      const run = await runCli(['crawl', spider, '--crawl-id', 'cat-csv', '--out', out, '--quiet'], { env: testEnv(prefix) });
      expect(run.code).toBe(0);
      const text = readFileSync(out, 'utf8');
      expect(text.split('\r\n')[0]).toBe('type,url,title,price,sku,category,tags,link,spider,crawlId,fetchedAt');
      const rows = parseCsv(text, { columns: true }) as Record<string, string>[];
      const truth = groundTruth(small.url, siteShape(60, 20));
      expect(rows).toHaveLength(truth.products.length + truth.listings.length);
      const p7 = rows.find((r) => r.sku === 'SKU-00007')!;
      expect(p7).toMatchObject({ type: 'product', title: 'Product 7 "tools" & co', tags: 'tools|odd', category: 'tools', crawlId: 'cat-csv' });
      expect(text).toContain('"Product 7 ""tools"" & co"');
    } finally {
      await small.close();
    }
  });
});
