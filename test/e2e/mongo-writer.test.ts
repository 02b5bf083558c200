import type { Socket } from 'node:net';
import { join } from 'node:path';
import { Redis } from 'ioredis';
import { MongoClient } from 'mongodb';
import mongoose from 'mongoose';
import { type Logger, validateSpider } from '@crawlfleet/core';
import { type ItemsRejectedError, MongoSink, closeMongoConnections, mongoAnsweredAt, mongoConnection } from '@crawlfleet/storage';
import { catalogueSpider, groundTruth, siteShape, startCatalogueSite } from '../fixtures/catalogue-site.mjs';
import { startServer } from '../fixtures/http-server.mjs';
import { REDIS_URL, comparable, dropPrefix, readJsonl, resultWithin, runCli, spawnCli, tempDir, testEnv, uniquePrefix, waitFor, writeJson, deadLetters } from '../helpers/cli.js';
import { startMongo, type MongoServer } from '../helpers/mongo.js';
import { mongoReadiness } from '@crawlfleet/writer';

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
    // The sinks opened in this process share a pooled connection, which would keep Jest from exiting.
    await closeMongoConnections();
    await client
      ?.db()
      .dropDatabase()
      .catch(() => undefined);
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
      expect(
        products3
          .filter((d) => d.changes > 0)
          .map((d) => d.sku)
          .sort(),
      ).toEqual(repriced.map((id) => `SKU-${String(id).padStart(5, '0')}`).sort());
      expect(products3.filter((d) => d.changes > 0).every((d) => d.changedAt instanceof Date)).toBe(true);
      // Their listing entries changed too (the price is on the catalogue page), and nothing else did.
      const listings3 = await docs('listing');
      expect(
        listings3
          .filter((d) => d.changes > 0)
          .map((d) => d.link)
          .sort(),
      ).toEqual(repriced.map((id) => `${changedSite.url}/product/p-${id}.html`).sort());
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

  test('a MongoDB outage mid-crawl: the writer holds its batch and retries, and the documents end exactly right', async () => {
    if (!mongo.controllable) return; // an external MONGO_URL cannot be stopped by the test
    const shape = siteShape(200, 20);
    const site = await startCatalogueSite(shape, { delayMs: 50 });
    try {
      const env = testEnv(prefix, { WRITE_BATCH_SIZE: '20' });
      const db = `${new URL(mongo.url).pathname.slice(1)}_outage`;
      const url = mongo.url.replace(/\/[^/]*$/, `/${db}`);
      const spider = writeJson(dir, 'outage.json', catalogueSpider(site.url));
      const crawl = spawnCli(['crawl', spider, '--crawl-id', 'm-outage', '--mongo', url, '--json', '--quiet', '--concurrency', '2'], { env });
      await waitFor(
        async () =>
          (await client
            .db(db)
            .collection('listing')
            .countDocuments()
            .catch(() => 0)) > 0,
        60_000,
        'the first documents',
      );
      // Readiness: a flush of this process's own, just before the outage, keeps a writer ready
      // through a slow or briefly absent store; without one it asks the server, which is down.
      const readyUrl = mongo.url.replace(/\/[^/]*$/, `/${db}_ready`);
      const readySink = await MongoSink.open(readyUrl, validateSpider({ name: 'r', items: [{ type: 'book', key: 'upc', fields: { upc: { css: 'x' } } }] }), { batch: { maxItems: 1, maxWaitMs: 10 } });
      await readySink.write([{ type: 'book', url: 'http://h/1', upc: 'u1', crawlId: 'c', fetchedAt: 't', spider: 'r' }]);
      await readySink.close();
      // A batch whose every item the cast refused asked the server nothing: it proves nothing.
      const refusedUrl = mongo.url.replace(/\/[^/]*$/, `/${db}_refused`);
      const refusedSink = await MongoSink.open(refusedUrl, validateSpider({ name: 'r', items: [{ type: 'book', key: 'upc', fields: { upc: { css: 'x' } } }] }), {
        batch: { maxItems: 1, maxWaitMs: 10 },
      });
      await expect(refusedSink.write([{ type: 'no-such-type', url: 'http://h/2', upc: 'u2', crawlId: 'c', fetchedAt: 't', spider: 'r' }])).rejects.toThrow(/no item rule/);
      await refusedSink.close();
      expect(mongoAnsweredAt(refusedUrl)).toBeUndefined();
      expect(mongoAnsweredAt(readyUrl)).toBeDefined();
      await mongo.stop();
      // Longer than the driver's 5 s server selection, so the writer sees the outage and retries.
      const outage = new Promise((r) => setTimeout(r, 8000));
      await expect(mongoReadiness(readyUrl).check()).resolves.toBeUndefined();
      await expect(mongoReadiness(readyUrl, () => performance.now() + 31_000).check()).rejects.toThrow();
      await outage;
      await mongo.start();
      // This test's own client went through the restart too; a new one cannot have a wedged monitor.
      await client.close();
      client = await MongoClient.connect(mongo.url);
      const outageDb = client.db(db);
      const result = await resultWithin(crawl, 120_000, 'the crawl through the MongoDB outage');
      expect(result.code).toBe(0);
      expect(result.stderr).toContain('MongoDB unavailable: holding the batch and retrying');
      // Nothing dead-lettered but the site's one broken link: an outage refuses no item.
      const redis = new Redis(REDIS_URL);
      const dead = (await deadLetters(redis, prefix, 'm-outage')).map((d) => d.reason);
      redis.disconnect();
      expect(dead).toEqual(['HTTP 404']);
      const truth = groundTruth(site.url, shape);
      const products = await outageDb.collection('product').find({}).toArray();
      const listings = await outageDb.collection('listing').find({}).toArray();
      expect(comparable(products, ['sku', 'title', 'price'])).toEqual(comparable(truth.products, ['sku', 'title', 'price']));
      expect(comparable(listings, ['link', 'title', 'price'])).toEqual(comparable(truth.listings, ['link', 'title', 'price']));
      expect(JSON.parse(result.stdout.trim().split('\n').pop()!).counters.written).toBe(products.length + listings.length);
      await outageDb.dropDatabase();
      await client.db(`${db}_ready`).dropDatabase();
    } finally {
      await site.close();
    }
  });

  test('a client whose server monitor wedged across a restart is replaced, and the held batch is stored', async () => {
    if (!mongo.controllable) return; // an external MONGO_URL cannot be stopped by the test
    const db = `${new URL(mongo.url).pathname.slice(1)}_wedged`;
    const url = mongo.url.replace(/\/[^/]*$/, `/${db}`);
    const spider = validateSpider({ name: 'w', items: [{ type: 'book', key: 'upc', fields: { upc: { css: 'x' } } }] });
    const said: string[] = [];
    const log = { warn: (_: unknown, msg: string) => said.push(msg), info: (_: unknown, msg: string) => said.push(msg), debug: () => undefined } as unknown as Logger;
    // Held longer than the client takes to be replaced: without the replacement the write fails.
    const sink = await MongoSink.open(url, spider, { batch: { maxItems: 10, maxWaitMs: 10 }, maxHoldMs: 60_000, log });
    const book = (upc: string) => ({ type: 'book', url: `http://h/${upc}`, upc, crawlId: 'c', fetchedAt: 't', spider: 'w' });
    await sink.write([book('before')]);
    // The driver's bug, set up: the monitor's socket is destroyed while its connection never learns
    // of the close, as when a server's close lands between a heartbeat's check and its write. The
    // next heartbeat (the restart's errors ask for one) then waits for a 'drain' that never comes.
    const topology = (await mongoConnection(url)).getClient() as unknown as { topology: { s: { servers: Map<string, { monitor: { connection: { socket: Socket } | null } }> } } };
    for (const server of topology.topology.s.servers.values()) {
      const socket = server.monitor.connection!.socket;
      socket.removeAllListeners('close');
      socket.destroy();
    }
    await mongo.stop();
    const held = sink.write([book('during')]);
    await new Promise((r) => setTimeout(r, 3000));
    await mongo.start();
    await held;
    await sink.close();
    expect(said).toEqual(['MongoDB unavailable: holding the batch and retrying', 'MongoDB unavailable for a while: replacing the client', 'MongoDB available again: batches are stored']);
    const check = await MongoClient.connect(mongo.url);
    expect((await check.db(db).collection('book').find({}).sort({ _id: 1 }).toArray()).map((d) => d._id)).toEqual(['before', 'during']);
    await check.db(db).dropDatabase();
    await check.close();
  });

  test('the writer killed with SIGKILL mid-crawl: a new writer finishes, with no loss and no duplicates', async () => {
    const shape = siteShape(200, 20);
    const site = await startCatalogueSite(shape, { delayMs: 20 });
    const db = `${new URL(mongo.url).pathname.slice(1)}_kill`;
    const url = mongo.url.replace(/\/[^/]*$/, `/${db}`);
    const env = testEnv(prefix, { MONGO_URL: url, WRITE_BATCH_SIZE: '20' });
    const workers = [spawnCli(['worker', 'fetcher', '--concurrency', '4'], { env }), spawnCli(['worker', 'parser'], { env })];
    try {
      const spider = writeJson(dir, 'kill.json', catalogueSpider(site.url));
      const seeded = await runCli(['seed', spider, '--crawl-id', 'm-kill', '--sink', 'mongo'], { env });
      expect(seeded.code).toBe(0);
      const first = spawnCli(['worker', 'writer'], { env });
      const killDb = client.db(db);
      await waitFor(
        async () =>
          (await killDb
            .collection('listing')
            .countDocuments()
            .catch(() => 0)) > 0,
        60_000,
        'the first documents',
      );
      first.kill('SIGKILL');
      expect((await first.result).signal).toBe('SIGKILL');
      workers.push(spawnCli(['worker', 'writer'], { env }));
      const waited = await runCli(['wait', '--crawl-id', 'm-kill', '--timeout', '120'], { env, timeoutMs: 130_000 });
      expect(waited.code).toBe(0);
      const truth = groundTruth(site.url, shape);
      const products = await killDb.collection('product').find({}).toArray();
      const listings = await killDb.collection('listing').find({}).toArray();
      expect(comparable(products, ['sku', 'title', 'price'])).toEqual(comparable(truth.products, ['sku', 'title', 'price']));
      expect(comparable(listings, ['link', 'title', 'price'])).toEqual(comparable(truth.listings, ['link', 'title', 'price']));
      expect(new Set(listings.map((l) => l.link)).size).toBe(listings.length);
      await killDb.dropDatabase();
    } finally {
      for (const w of workers) w.kill('SIGTERM');
      await Promise.all(workers.map((w) => w.result));
      await site.close();
    }
  });

  test('a document MongoDB cannot take goes to the dead-letter set with its reason; the rest of its batch is stored', async () => {
    const huge = 'x'.repeat(17 * 1024 * 1024);
    const site = await startServer((req, res) => {
      const notes = req.url === '/big.html' ? ['small one', huge, 'small two'] : ['plain'];
      res.writeHead(200, { 'content-type': 'text/html' });
      res.end(
        `<title>${req.url}</title>${req.url === '/' ? '<a href="/big.html">b</a><a href="/other.html">o</a>' : ''}${notes.map((n, i) => `<div class="note"><b>${req.url}#${i}</b><i>${n}</i></div>`).join('')}`,
      );
    });
    const redis = new Redis(REDIS_URL);
    try {
      const db = `${new URL(mongo.url).pathname.slice(1)}_big`;
      const url = mongo.url.replace(/\/[^/]*$/, `/${db}`);
      const spider = writeJson(dir, 'big.json', {
        name: 'big',
        startUrls: [`${site.url}/`],
        allowPrivateAddresses: true,
        obeyRobotsTxt: false,
        follow: [{ css: 'a' }],
        items: [{ type: 'note', each: 'div.note', key: 'id', fields: { id: { css: 'b', required: true }, text: { css: 'i' } } }],
        limits: { maxResponseBytes: 64 * 1024 * 1024 },
      });
      const run = await runCli(['crawl', spider, '--crawl-id', 'm-big', '--mongo', url, '--json', '--quiet'], { env: testEnv(prefix), timeoutMs: 120_000 });
      expect(run.code).toBe(0);
      const stored = await client.db(db).collection('note').find({}).project({ _id: 1 }).toArray();
      expect(stored.map((d) => d._id).sort()).toEqual(['/#0', '/big.html#0', '/big.html#2', '/other.html#0']);
      const dead = await deadLetters(redis, prefix, 'm-big');
      expect(dead).toHaveLength(1);
      expect(dead[0]).toMatchObject({ stage: 'write', url: `${site.url}/big.html`, code: 'ERR_ITEM_REJECTED', reason: expect.stringMatching(/document too large for MongoDB: \d+ bytes > 16777216/) });
      expect(JSON.parse(run.stdout.trim().split('\n').pop()!).counters).toMatchObject({ failed: 1, written: 2 });
      await client.db(db).dropDatabase();
    } finally {
      redis.disconnect();
      await site.close();
    }
  });

  test("the writes go through the item type's mongoose model: values cast to the field types, an item that does not fit refused with its field named", async () => {
    const db = `${new URL(mongo.url).pathname.slice(1)}_model`;
    const url = mongo.url.replace(/\/[^/]*$/, `/${db}`);
    // `errors` and `toObject` are names of mongoose Document members: harmless, as items are never hydrated.
    const spider = validateSpider({
      name: 'm',
      items: [
        {
          type: 'book',
          key: 'upc',
          fields: {
            upc: { css: 'u' },
            price: { css: 'p', type: 'number' },
            pages: { css: 'n', type: 'integer' },
            inStock: { css: 's', type: 'boolean' },
            tags: { css: 't', all: true },
            errors: { css: 'e' },
            toObject: { css: 'o' },
          },
        },
      ],
    });
    const sink = await MongoSink.open(url, spider, { batch: { maxItems: 100, maxWaitMs: 50 } });
    const item = (upc: string, fields: Record<string, unknown> = {}) => ({
      type: 'book',
      url: `http://h/${upc}`,
      upc,
      price: '12.50',
      pages: '300',
      inStock: 'yes',
      tags: ['a', 2],
      errors: 'none',
      toObject: 'x',
      crawlId: 'c',
      fetchedAt: '2026-12-03T10:00:00.000Z',
      spider: 'm',
      ...fields,
    });
    const writes = await Promise.allSettled([
      sink.write([item('a')]),
      sink.write([item('b', { price: 'twelve' }), item('b2')]),
      sink.write([item('c', { pages: 3.5 })]),
      sink.write([item('d', { colour: 'red' })]),
      sink.write([item('e', { price: null, tags: [] })]),
    ]);
    const reasons = writes.map((w) => (w.status === 'fulfilled' ? [] : (w.reason as ItemsRejectedError).reasons));
    expect(writes.map((w) => w.status)).toEqual(['fulfilled', 'rejected', 'rejected', 'rejected', 'fulfilled']);
    expect(reasons[1]).toEqual([
      'MongoDB refused the document: the item does not fit the schema of type "book": field "price": Cast to Number failed for value "twelve" (type string) at path "price"',
    ]);
    expect(reasons[2]).toEqual([expect.stringMatching(/field "pages": .*3\.5 is not an integer/)]);
    expect(reasons[3]).toEqual([expect.stringMatching(/field "colour" is not in the schema \(strict\)/)]);
    const books = () => client.db(db).collection('book').find({}).sort({ _id: 1 }).toArray();
    const stored = await books();
    expect(stored.map((d) => d._id)).toEqual(['a', 'b2', 'e']);
    expect(stored[0]).toMatchObject({ price: 12.5, pages: 300, inStock: true, tags: ['a', '2'], errors: 'none', toObject: 'x', fetchedAt: '2026-12-03T10:00:00.000Z', changes: 0 });
    expect(stored[2]).toMatchObject({ price: null, tags: [] });
    expect(await client.db(db).collection('book').indexes()).toContainEqual(expect.objectContaining({ name: 'upc_unique', key: { upc: 1 }, unique: true }));
    // The content hash is of the cast item: the same values, typed or not, are no change; a new price is.
    await sink.write([item('a', { price: 12.5, pages: 300, inStock: true, tags: ['a', '2'], crawlId: 'c2' }), item('e', { price: '3', tags: [] })]);
    await sink.close();
    const again = await books();
    expect(again.map((d) => [d._id, d.price, d.changes, d.crawlId])).toEqual([
      ['a', 12.5, 0, 'c2'],
      ['b2', 12.5, 0, 'c'],
      ['e', 3, 1, 'c'],
    ]);
    expect(again[2]!.changedAt).toBeInstanceOf(Date);
    await client.db(db).dropDatabase();
  });

  test('150 changed items in one flush are all updated (FerretDB hangs on a bulk write of 100 updates or more)', async () => {
    const db = `${new URL(mongo.url).pathname.slice(1)}_many`;
    const url = mongo.url.replace(/\/[^/]*$/, `/${db}`);
    const spider = validateSpider({ name: 'n', items: [{ type: 'book', key: 'upc', fields: { upc: { css: 'x' }, price: { css: 'y', type: 'number' } } }] });
    // A flush that hangs fails within 20 s instead of holding its batch for 10 minutes.
    const sink = await MongoSink.open(url, spider, { batch: { maxItems: 500, maxWaitMs: 50 }, flushTimeoutMs: 20_000, maxHoldMs: 1 });
    const books = (price: number) => Array.from({ length: 150 }, (_, i) => ({ type: 'book', url: `http://h/${i}`, upc: `u${i}`, price, crawlId: 'c', fetchedAt: 't', spider: 'n' }));
    await sink.write(books(1));
    await sink.write(books(2));
    await sink.close();
    const stored = await client.db(db).collection('book').find({}).toArray();
    expect(stored).toHaveLength(150);
    expect(stored.every((d) => d.price === 2 && d.changes === 1)).toBe(true);
    await client.db(db).dropDatabase();
  });

  test('duplicates inside one batch collapse to one upsert, the last one winning', async () => {
    const db = `${new URL(mongo.url).pathname.slice(1)}_dups`;
    const url = mongo.url.replace(/\/[^/]*$/, `/${db}`);
    const spider = validateSpider({ name: 'd', items: [{ type: 'book', key: 'upc', fields: { upc: { css: 'x' }, price: { css: 'y', type: 'number' } } }] });
    const sink = await MongoSink.open(url, spider, { batch: { maxItems: 100, maxWaitMs: 50 } });
    const item = (upc: string, price: number) => ({ type: 'book', url: `http://h/${upc}`, upc, price, crawlId: 'c', fetchedAt: 't', spider: 'd' });
    await Promise.all([sink.write([item('a', 1), item('b', 1)]), sink.write([item('a', 2)]), sink.write([item('a', 3)])]);
    await sink.close();
    const stored = await client.db(db).collection('book').find({}).sort({ _id: 1 }).toArray();
    expect(stored.map((d) => [d._id, d.price, d.changes])).toEqual([
      ['a', 3, 0],
      ['b', 1, 0],
    ]);
    await client.db(db).dropDatabase();
  });

  test('an item removed between the flush reading it and updating it is written again, not counted on an update that matched nothing', async () => {
    const db = `${new URL(mongo.url).pathname.slice(1)}_gone`;
    const url = mongo.url.replace(/\/[^/]*$/, `/${db}`);
    // Fields of their own: the sink compiles a new model for them, after the hook below is in place.
    const spider = validateSpider({ name: 'g', items: [{ type: 'book', key: 'upc', fields: { upc: { css: 'x' }, gone: { css: 'y', type: 'number' } } }] });
    let removeFirst = false;
    // A real removal by another client, at the one moment that matters: after the flush's read saw
    // the item unchanged, before its lastSeenAt update. The update then matches nothing, which the
    // server acknowledges as success.
    const hook = (schema: mongoose.Schema) =>
      schema.pre('updateMany', async () => {
        if (!removeFirst) return;
        removeFirst = false;
        await client
          .db(db)
          .collection('book')
          .deleteOne({ _id: 'a' as never });
      });
    mongoose.plugin(hook);
    try {
      const sink = await MongoSink.open(url, spider, { batch: { maxItems: 10, maxWaitMs: 10 } });
      const item = { type: 'book', url: 'http://h/a', upc: 'a', gone: 1, crawlId: 'c', fetchedAt: 't', spider: 'g' };
      await sink.write([item]);
      removeFirst = true;
      await sink.write([item]);
      await sink.close();
      expect(removeFirst).toBe(false);
      const stored = await client.db(db).collection('book').find({}).toArray();
      expect(stored.map((d) => [d._id, d.gone, d.changes])).toEqual([['a', 1, 0]]);
    } finally {
      const plugins = (mongoose as unknown as { plugins: [unknown, unknown][] }).plugins;
      plugins.splice(
        plugins.findIndex(([fn]) => fn === hook),
        1,
      );
      await client.db(db).dropDatabase();
    }
  });
});
