import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { Queue } from 'bullmq';
import { Redis } from 'ioredis';
import { MongoClient } from 'mongodb';
import { Keys } from '@crawlfleet/core';
import { BOOKS_ARCHIVE, serveFolder, unpack } from '../fixtures/static-site.mjs';
import { booksTruth } from '../helpers/books-truth.js';
import { REDIS_URL, ROOT, comparable, dropPrefix, runCli, spawnCli, tempDir, testEnv, uniquePrefix, waitFor, writeJson, deadLetters } from '../helpers/cli.js';
import { startMongo, type MongoServer } from '../helpers/mongo.js';

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** A writer process, and a promise of its "worker ready" (node and the fleet take a few seconds to start). */
function startWriter(env: NodeJS.ProcessEnv) {
  // More slots than the crawl has write jobs (249 pages with items): every job is tried at once.
  const writer = spawnCli(['worker', 'writer', '--concurrency', '300'], { env });
  let seen = '';
  const ready = new Promise<void>((resolve) =>
    writer.stderr!.on('data', (d: Buffer) => {
      seen += d.toString();
      if (seen.includes('"msg":"worker ready"')) resolve();
    }),
  );
  return Object.assign(writer, { ready });
}

/**
 * issue #9, point 3: a MongoDB outage of any length. The write jobs' attempts budget is made small
 * (WRITE_ATTEMPTS=2, and a writer concurrency that takes every write job at once: two failed sink
 * opens of 5 s each, about 11 s), and the outage lasts several times that, so a writer that spent
 * attempts on it would dead-letter items; the writer starts during the outage and is killed and
 * restarted twice meanwhile.
 */
describe("a MongoDB outage longer than the write jobs' attempts (FerretDB)", () => {
  let mongo: MongoServer;
  const prefix = uniquePrefix('outage');
  const dir = tempDir('outage');

  beforeAll(async () => {
    mongo = await startMongo(`cf_outage_${process.pid}_${Date.now().toString(36)}`);
  });
  afterAll(async () => {
    // (stopped already when the test failed during the outage: nothing to drop then)
    const client = await MongoClient.connect(mongo.url, { serverSelectionTimeoutMS: 2000 }).catch(() => undefined);
    await client
      ?.db()
      .dropDatabase()
      .catch(() => undefined);
    await client?.close();
    await mongo?.stop();
    await dropPrefix(prefix);
  });

  test('the real books pages by separate processes; MongoDB down before the writer opens its sink, the writer SIGKILLed and restarted twice: done, 980 + 200 items exactly, no write dead-lettered', async () => {
    if (!mongo.controllable) return; // an external MONGO_URL cannot be stopped by the test
    const root = unpack(BOOKS_ARCHIVE);
    const site = await serveFolder(root);
    const crawlId = 'books-outage';
    const env = testEnv(prefix, { MONGO_URL: mongo.url, WRITE_ATTEMPTS: '2', WRITE_BATCH_SIZE: '100' });
    const example = JSON.parse(readFileSync(join(ROOT, 'examples', 'books.json'), 'utf8'));
    const spider = writeJson(dir, 'books.json', JSON.parse(JSON.stringify(example).replaceAll('127.0.0.1:8080', site.url.replace('http://', ''))));
    const keys = new Keys(prefix);
    const redis = new Redis(REDIS_URL, { maxRetriesPerRequest: null });
    const writeQueue = new Queue('write', { connection: redis, prefix: keys.queuePrefix('write') });
    const workers = [spawnCli(['worker', 'fetcher', '--concurrency', '8'], { env }), spawnCli(['worker', 'parser'], { env })];
    const writers: ReturnType<typeof startWriter>[] = [];
    try {
      await mongo.stop();
      const outageStarted = Date.now();
      const seeded = await runCli(['seed', spider, '--crawl-id', crawlId, '--sink', 'mongo'], { env });
      expect(seeded.code).toBe(0);
      // The writer starts during the outage, with write jobs waiting for it.
      await waitFor(async () => (await writeQueue.getWaitingCount()) > 0, 60_000, 'the first write jobs');
      for (let round = 1; round <= 2; round++) {
        const writer = startWriter(env);
        writers.push(writer);
        // Longer than a job's whole attempts budget (two sink opens of 5 s each): without parking,
        // the jobs this writer takes are dead-lettered before it is killed.
        await writer.ready;
        await sleep(12_000);
        writer.kill('SIGKILL');
        expect((await writer.result).signal).toBe('SIGKILL');
      }
      const last = startWriter(env);
      writers.push(last);
      await last.ready;
      await sleep(Math.max(12_000, outageStarted + 50_000 - Date.now()));
      // Four times the write jobs' whole attempts budget, at least.
      expect(Date.now() - outageStarted).toBeGreaterThanOrEqual(45_000);
      await mongo.start();

      const waited = await runCli(['wait', '--crawl-id', crawlId, '--timeout', '240'], { env, timeoutMs: 250_000 });
      expect(waited.code).toBe(0);
      // The writer neither crashed nor gave up: still running.
      expect(last.exitCode).toBeNull();

      const truth = booksTruth(root, site.url);
      expect(truth.listings).toHaveLength(980);
      expect(truth.details).toHaveLength(200);
      const client = await MongoClient.connect(mongo.url);
      try {
        const listings = await client.db().collection('listing').find({}).toArray();
        const books = await client.db().collection('book').find({}).toArray();
        const listingFields = ['type', 'link', 'title', 'price', 'rating'];
        const bookFields = ['type', 'url', 'title', 'price', 'upc', 'availability', 'rating'];
        expect(listings).toHaveLength(980);
        expect(books).toHaveLength(200);
        expect(comparable(listings, listingFields)).toEqual(comparable(truth.listings, listingFields));
        expect(comparable(books, bookFields)).toEqual(comparable(truth.details, bookFields));
        expect(new Set(listings.map((d) => d.link)).size).toBe(980);
      } finally {
        await client.close();
      }

      // No write dead-lettered: the only dead letters are the pages missing from the copy (404s).
      const dead = (await deadLetters(redis, keys.prefix, crawlId)) as unknown as { stage: string; reason: string }[];
      const missing = truth.detailLinks.size - 200 + 1;
      expect(dead.filter((d) => d.stage === 'write')).toEqual([]);
      expect(dead).toHaveLength(missing);
      expect(new Set(dead.map((d) => d.reason))).toEqual(new Set(['HTTP 404']));
      const status = JSON.parse((await runCli(['status', '--crawl-id', crawlId, '--json'], { env })).stdout.trim().split('\n').pop()!);
      expect(status.state).toBe('done');
      expect(status.counters).toMatchObject({ items: 1180, written: 1180, failed: missing });

      // Each writer saw the outage and parked jobs; the last one logged it once and its end once,
      // not once per parked job.
      const logs = await Promise.all(writers.slice(0, 2).map((w) => w.result));
      last.kill('SIGTERM');
      logs.push(await last.result);
      const lines = logs.map((l) =>
        l.stderr
          .split('\n')
          .filter((s) => s.startsWith('{'))
          .map((s) => JSON.parse(s) as { msg: string; parkings?: number }),
      );
      for (const writerLines of lines) expect(writerLines.some((l) => l.msg.startsWith('MongoDB unavailable: write jobs are parked'))).toBe(true);
      const lastLines = lines[2]!;
      const unavailable = lastLines.filter((l) => l.msg.startsWith('MongoDB unavailable'));
      const back = lastLines.filter((l) => l.msg.startsWith('MongoDB available again: parked write jobs resume'));
      expect(back.length).toBeGreaterThanOrEqual(1);
      expect(unavailable.length).toBeLessThanOrEqual(back.length + 1);
      expect(back[0]!.parkings!).toBeGreaterThan(unavailable.length);
    } finally {
      for (const w of [...workers, ...writers]) if (w.exitCode === null && w.signalCode === null) w.kill('SIGTERM');
      await Promise.all([...workers, ...writers].map((w) => w.result));
      await writeQueue.close();
      redis.disconnect();
      await site.close();
    }
  }, 480_000);
});
