import { join } from 'node:path';
import { MongoClient } from 'mongodb';
import { catalogueSpider, groundTruth, siteShape, startCatalogueSite } from '../fixtures/catalogue-site.mjs';
import { comparable, dropPrefix, readJsonl, runCli, tempDir, testEnv, uniquePrefix, writeJson } from '../helpers/cli.js';
import { startMongo, type MongoServer } from '../helpers/mongo.js';

// Small sites: FerretDB's SQLite handler scans a collection on every update (docs/ferretdb.md).
const SHAPE = siteShape(80, 20);

describe('the MongoDB writer (FerretDB, or MONGO_URL when set)', () => {
  let mongo: MongoServer;
  let client: MongoClient;
  const prefix = uniquePrefix('mongo');
  const dir = tempDir('mongo');

  beforeAll(async () => {
    mongo = await startMongo(`cf_${process.pid}_${Date.now().toString(36)}`);
    client = await MongoClient.connect(mongo.url);
  });
  afterAll(async () => {
    await client?.db().dropDatabase().catch(() => undefined);
    await client?.close();
    await mongo?.stop();
    await dropPrefix(prefix);
  });

  const docs = async (type: string) => client.db().collection(type).find({}).sort({ _id: 1 }).toArray();

  test('the same crawl twice: one document per item; firstSeenAt kept, lastSeenAt moved, nothing changed; then exactly the changed items', async () => {
    const site = await startCatalogueSite(SHAPE);
    const port = site.port;
    const spider = writeJson(dir, 'spider.json', catalogueSpider(site.url));
    try {
      const env = testEnv(prefix);
      const truth = groundTruth(site.url, SHAPE);
      const first = await runCli(['crawl', spider, '--crawl-id', 'm-1', '--mongo', mongo.url, '--json', '--quiet'], { env });
      expect(first.code).toBe(0);
      const products1 = await docs('product');
      const listings1 = await docs('listing');
      expect(comparable(products1, ['type', 'url', 'title', 'price', 'sku', 'category', 'tags'])).toEqual(comparable(truth.products, ['type', 'url', 'title', 'price', 'sku', 'category', 'tags']));
      expect(comparable(listings1, ['type', 'url', 'link', 'title', 'price'])).toEqual(comparable(truth.listings, ['type', 'url', 'link', 'title', 'price']));
      expect(products1.every((d) => d._id === d.sku && d.changes === 0 && d.crawlId === 'm-1')).toBe(true);
      const indexes = await client.db().collection('product').indexes();
      expect(indexes.find((i) => i.name === 'sku_unique')).toMatchObject({ key: { sku: 1 }, unique: true });

      const second = await runCli(['crawl', spider, '--crawl-id', 'm-2', '--mongo', mongo.url, '--json', '--quiet'], { env });
      expect(second.code).toBe(0);
      const products2 = await docs('product');
      expect(products2).toHaveLength(products1.length);
      expect(await docs('listing')).toHaveLength(listings1.length);
      products2.forEach((d, i) => {
        expect(d.firstSeenAt).toEqual(products1[i]!.firstSeenAt);
        expect(d.lastSeenAt.getTime()).toBeGreaterThan(products1[i]!.lastSeenAt.getTime());
        expect(d).toMatchObject({ changes: 0, crawlId: 'm-2' });
        expect(d.changedAt).toBeUndefined();
      });
    } finally {
      await site.close();
    }

    const repriced = [3, 17, 42];
    const changedShape = siteShape(80, 20, repriced);
    // The same site, on the same port, with three products repriced.
    const changedSite = await startCatalogueSite(changedShape, { port });
    try {
      const third = await runCli(['crawl', spider, '--crawl-id', 'm-3', '--mongo', mongo.url, '--json', '--quiet'], { env: testEnv(prefix) });
      expect(third.code).toBe(0);
      const products3 = await docs('product');
      expect(products3.filter((d) => d.changes > 0).map((d) => d.sku).sort()).toEqual(repriced.map((id) => `SKU-${String(id).padStart(5, '0')}`).sort());
      expect(products3.filter((d) => d.changes > 0).every((d) => d.changedAt instanceof Date)).toBe(true);
      // Their listing entries changed too (the price is on the catalogue page), and nothing else did.
      const listings3 = await docs('listing');
      expect(listings3.filter((d) => d.changes > 0).map((d) => d.link).sort()).toEqual(repriced.map((id) => `${changedSite.url}/product/p-${id}.html`).sort());
      expect(products3).toHaveLength(SHAPE.products);
    } finally {
      await changedSite.close();
    }
  });

  test('export gives the same items as the JSONL sink for the same crawl, order aside', async () => {
    const site = await startCatalogueSite(SHAPE);
    try {
      const env = testEnv(prefix);
      const spider = writeJson(dir, 'export.json', catalogueSpider(site.url));
      const viaFile = join(dir, 'file.jsonl');
      expect((await runCli(['crawl', spider, '--crawl-id', 'm-file', '--out', viaFile, '--quiet'], { env })).code).toBe(0);
      expect((await runCli(['crawl', spider, '--crawl-id', 'm-export', '--mongo', mongo.url, '--quiet'], { env })).code).toBe(0);
      const exported = join(dir, 'export.jsonl');
      const run = await runCli(['export', '--crawl-id', 'm-export', '--out', exported, '--mongo', mongo.url], { env });
      expect(run.code).toBe(0);
      const fields = ['type', 'url', 'link', 'title', 'price', 'sku', 'category', 'tags', 'spider'];
      const fromMongo = readJsonl(exported);
      expect(fromMongo.every((i) => i.crawlId === 'm-export' && !('_id' in i) && !('firstSeenAt' in i))).toBe(true);
      expect(comparable(fromMongo, fields)).toEqual(comparable(readJsonl(viaFile), fields));
    } finally {
      await site.close();
    }
  });
});
