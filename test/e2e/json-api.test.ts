import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { PRODUCTS, groundTruth, jsonApiSpider, startJsonApiSite } from '../fixtures/json-api-site.mjs';
import { ROOT, comparable, dropPrefix, readJsonl, runCli, tempDir, testEnv, uniquePrefix, writeJson } from '../helpers/cli.js';

const PRODUCT_FIELDS = ['type', 'url', 'id', 'name', 'price', 'currency', 'tags', 'stock', 'warehouse'];
const LISTING_FIELDS = ['type', 'url', 'id', 'name', 'price'];

describe('crawlfleet crawl of a JSON API with a declarative spider', () => {
  let site: Awaited<ReturnType<typeof startJsonApiSite>>;
  const prefix = uniquePrefix('jsonapi');
  const dir = tempDir('jsonapi');
  const env = testEnv(prefix);

  beforeAll(async () => {
    site = await startJsonApiSite();
  });
  afterAll(async () => {
    await site.close();
    await dropPrefix(prefix);
  });

  test('examples/json-api.json yields exactly the ground truth from list and detail pages, fetching every page once, and reports done', async () => {
    // The example spider is this fixture's spider, on 127.0.0.1:8080.
    const example = JSON.parse(readFileSync(join(ROOT, 'examples', 'json-api.json'), 'utf8').replaceAll('127.0.0.1:8080', new URL(site.url).host));
    expect(example).toEqual(jsonApiSpider(site.url));
    const spider = writeJson(dir, 'json-api.json', example);
    const out = join(dir, 'items.jsonl');
    const run = await runCli(['crawl', spider, '--crawl-id', 'api-one', '--out', out, '--json', '--concurrency', '8'], { env });
    expect(run.stderr).not.toMatch(/"level":"(error|fatal)"/);
    expect(run.code).toBe(0);

    const truth = groundTruth(site.url);
    const items = readJsonl(out);
    const products = items.filter((i) => i.type === 'product');
    const listings = items.filter((i) => i.type === 'listing');
    expect(comparable(products, PRODUCT_FIELDS)).toEqual(comparable(truth.products, PRODUCT_FIELDS));
    expect(comparable(listings, LISTING_FIELDS)).toEqual(comparable(truth.listings, LISTING_FIELDS));
    expect(products).toHaveLength(PRODUCTS - 1);
    expect(listings).toHaveLength(PRODUCTS);
    expect(items).toHaveLength(truth.products.length + truth.listings.length);
    for (const item of items) {
      expect(Object.keys(item).sort()).toEqual([...(item.type === 'product' ? PRODUCT_FIELDS : LISTING_FIELDS), 'spider', 'crawlId', 'fetchedAt'].sort());
      expect(item).toMatchObject({ spider: 'json-api', crawlId: 'api-one' });
      expect(new Date(item.fetchedAt as string).toISOString()).toBe(item.fetchedAt);
    }

    // JSON types survive: numbers stay numbers (12.5 is not "12.5"), a stock of 0 is 0, no tags is [].
    const byId = new Map(products.map((p) => [p.id, p]));
    expect(byId.get(1)).toMatchObject({ id: 1, price: 3.62, stock: 7, tags: ['cat-1', 'odd'] });
    expect(byId.get(20)).toMatchObject({ stock: 0, tags: ['cat-0', 'even', 'sale'] });
    expect(byId.get(30)).toMatchObject({ tags: [] });
    // Not ASCII, decoded intact; products 5 (application/vnd.api+json), 6 (text/json) and 7 (a BOM) parsed.
    expect(byId.get(3)).toMatchObject({ name: 'Café Crème', currency: 'USD' });
    expect(byId.get(12)).toMatchObject({ name: '東京 Tea Set' });
    expect(byId.get(29)).toMatchObject({ name: 'Zürich “Deluxe” Ñandú' });
    expect(listings.find((l) => l.id === 12)).toMatchObject({ name: '東京 Tea Set' });
    for (const id of [5, 6, 7]) expect(byId.get(id)).toMatchObject({ id, name: `Product ${id}` });
    // The product without a price is an invalid product, and a listing with a null price.
    expect(byId.has(17)).toBe(false);
    expect(listings.find((l) => l.id === 17)).toMatchObject({ price: null });

    // Every page exactly once, and nothing else; the unknown related id is the one 404.
    const counts = site.counts();
    expect(new Set(counts.keys())).toEqual(truth.paths);
    expect([...counts.values()].every((n) => n === 1)).toBe(true);
    expect(site.requests.filter((r) => r.status === 404).map((r) => r.path)).toEqual(truth.failedPaths);

    const final = JSON.parse(run.stdout.trim().split('\n').pop()!);
    const pages = truth.paths.size;
    expect(final).toMatchObject({
      crawlId: 'api-one',
      spider: 'json-api',
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
        skipped: 0,
      },
      queues: {
        fetch: { waiting: 0, active: 0, delayed: 0, failed: 1 },
        parse: { waiting: 0, active: 0, delayed: 0, failed: 0 },
        write: { waiting: 0, active: 0, delayed: 0, failed: 0 },
      },
      invalidReasons: [{ reason: 'product: missing required field "price"', count: truth.invalid }],
    });

    const dead = JSON.parse((await runCli(['dead-letters', '--crawl-id', 'api-one', '--json'], { env })).stdout) as Record<string, unknown>[];
    expect(dead).toEqual([expect.objectContaining({ url: `${site.url}/api/products/999`, stage: 'fetch', code: 'ERR_HTTP_STATUS', reason: 'HTTP 404' })]);
  });

  test('a code spider (examples/json-api.ts, page.json() in its parse hook) yields exactly the same items and counters', async () => {
    const source = readFileSync(join(ROOT, 'examples', 'json-api.ts'), 'utf8').replaceAll('127.0.0.1:8080', new URL(site.url).host);
    const spider = join(dir, 'json-api.ts');
    writeFileSync(spider, source);
    const out = join(dir, 'code-items.jsonl');
    const run = await runCli(['crawl', spider, '--crawl-id', 'api-code', '--out', out, '--json', '--concurrency', '8'], { env });
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
    const pages = truth.paths.size;
    const final = JSON.parse(run.stdout.trim().split('\n').pop()!);
    expect(final).toMatchObject({
      state: 'done',
      counters: { seen: pages, fetched: pages, parsed: pages - truth.failedPaths.length, items: items.length, written: items.length, invalid: truth.invalid, failed: truth.failedPaths.length },
      invalidReasons: [{ reason: 'product: price: Invalid input: expected number, received null', count: 1 }],
    });
  });

  test('a JSON page whose body is not JSON is dead-lettered ERR_PARSE with its reason, and the crawl ends done', async () => {
    const before = site.requests.length;
    const spider = writeJson(dir, 'broken.json', jsonApiSpider(site.url, { startUrls: [`${site.url}/api/broken`, `${site.url}/api/products/3`], follow: [] }));
    const out = join(dir, 'broken.jsonl');
    const run = await runCli(['crawl', spider, '--crawl-id', 'api-broken', '--out', out, '--json'], { env });
    expect(run.stderr).not.toMatch(/"level":"fatal"/);
    expect(run.code).toBe(0);

    // The other page's item is written: the worker went on.
    expect(comparable(readJsonl(out), PRODUCT_FIELDS)).toEqual(
      comparable(
        groundTruth(site.url).products.filter((p) => p.id === 3),
        PRODUCT_FIELDS,
      ),
    );
    // Parsing again could not help: one fetch, one parse attempt.
    expect(
      site.requests
        .slice(before)
        .map((r) => r.path)
        .sort(),
    ).toEqual(['/api/broken', '/api/products/3']);

    const final = JSON.parse(run.stdout.trim().split('\n').pop()!);
    expect(final).toMatchObject({
      state: 'done',
      counters: { seen: 2, fetched: 2, parsed: 1, items: 1, written: 1, invalid: 0, failed: 1, retries: 0 },
      queues: { fetch: { failed: 0 }, parse: { waiting: 0, active: 0, delayed: 0, failed: 1 } },
    });

    const dead = JSON.parse((await runCli(['dead-letters', '--crawl-id', 'api-broken', '--json'], { env })).stdout) as Record<string, unknown>[];
    expect(dead).toEqual([
      expect.objectContaining({
        url: `${site.url}/api/broken`,
        stage: 'parse',
        code: 'ERR_PARSE',
        attempts: 1,
        reason: expect.stringMatching(/^not valid JSON \(application\/json; charset=utf-8\): .*JSON/),
      }),
    ]);
    expect(run.stderr).toMatch(/"code":"ERR_PARSE"/);
  });
});
