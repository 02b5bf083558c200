import { spawn } from 'node:child_process';
import { appendFileSync, readFileSync, rmSync, statSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { Redis } from 'ioredis';
import { Keys } from '@crawlfleet/core';
import { FileSink, RedisIdentityIndex, csvColumns, csvFormat, jsonlFormat, type SinkIO } from '@crawlfleet/storage';
import { catalogueSpider, groundTruth, siteShape, startCatalogueSite } from '../fixtures/catalogue-site.mjs';
import { REDIS_URL, ROOT, comparable, dropPrefix, readJsonl, runCli, spawnCli, tempDir, testEnv, uniquePrefix, writeJson } from '../helpers/cli.js';

const keyFields = { book: 'upc' };

/** Positional reads and writes that count the bytes read. */
function countingIO(): SinkIO & { bytesRead: number; largestRead: number } {
  const io = {
    bytesRead: 0,
    largestRead: 0,
    read: async (h: Parameters<SinkIO['read']>[0], buffer: Buffer, position: number) => {
      const { bytesRead } = await h.read(buffer, 0, buffer.length, position);
      io.bytesRead += bytesRead;
      io.largestRead = Math.max(io.largestRead, bytesRead);
      return bytesRead;
    },
    write: async (h: Parameters<SinkIO['write']>[0], buffer: Buffer, position: number) => (await h.write(buffer, 0, buffer.length, position)).bytesWritten,
  };
  return io;
}

function upcs(path: string): unknown[] {
  return readJsonl(path).map((i) => i.upc);
}

describe('file sinks with their index in Redis', () => {
  let redis: Redis;
  const prefixes: string[] = [];
  const indexFor = (crawlId: string) => {
    const prefix = uniquePrefix('file-sink');
    prefixes.push(prefix);
    const keys = new Keys(prefix);
    return { prefix, keys, index: new RedisIdentityIndex(redis, keys.fileIndex(crawlId)) };
  };
  beforeAll(() => {
    redis = new Redis(REDIS_URL);
  });
  afterAll(async () => {
    for (const p of prefixes) await dropPrefix(p);
    redis.disconnect();
  });

  test('a 50 MB file reopens reading only what follows the recorded offset; a lost index is rebuilt streamed, in bounded reads', async () => {
    const path = join(tempDir('file-sink'), 'big.jsonl');
    const { index, keys } = indexFor('big');
    const filler = 'x'.repeat(10_000);
    const sink = await FileSink.open(path, jsonlFormat, keyFields, { index, batch: { maxItems: 500, maxWaitMs: 10 } });
    for (let i = 0; i < 5000; i += 500) await sink.write(Array.from({ length: 500 }, (_, j) => ({ type: 'book', upc: i + j, filler })));
    await sink.close();
    const written = statSync(path).size;
    expect(written).toBeGreaterThan(50_000_000);

    // A crash after an append and before its record in Redis (two lines), then one cut mid-line.
    const unrecorded = ['{"type":"book","upc":"late-1"}\n', '{"type":"book","upc":"late-2"}\n'].join('');
    const torn = '{"type":"book","upc":"tor';
    appendFileSync(path, unrecorded + torn);
    const io = countingIO();
    const reopened = await FileSink.open(path, jsonlFormat, keyFields, { index, io });
    // The bytes after the recorded offset, the 4 KiB before it (is it still the file indexed?) and
    // the 4 KiB tail kept for the next record: nowhere near the 50 MB a whole-file read costs.
    expect(io.bytesRead).toBeLessThanOrEqual(Buffer.byteLength(unrecorded + torn) + 2 * 4096);
    expect(statSync(path).size).toBe(written + Buffer.byteLength(unrecorded)); // the torn line is cut
    await reopened.write([
      { type: 'book', upc: 'late-1' },
      { type: 'book', upc: 4999, filler },
      { type: 'book', upc: 'new' },
      { type: 'book', upc: 'late-2' },
    ]);
    await reopened.close();
    expect(upcs(path).slice(-3)).toEqual(['late-1', 'late-2', 'new']);

    // Redis lost the index: the next open rebuilds it from the whole file, one chunk at a time.
    await redis.del(...Object.values(keys.fileIndex('big')));
    const rebuildIO = countingIO();
    const rebuilt = await FileSink.open(path, jsonlFormat, keyFields, { index, io: rebuildIO, chunkBytes: 256 * 1024 });
    expect(rebuildIO.largestRead).toBeLessThanOrEqual(256 * 1024);
    expect(rebuildIO.bytesRead).toBeGreaterThanOrEqual(statSync(path).size);
    expect(await redis.scard(keys.fileIndex('big').identities)).toBe(5003);
    await rebuilt.write([
      { type: 'book', upc: 0, filler },
      { type: 'book', upc: 'new' },
      { type: 'book', upc: 2500 },
    ]);
    await rebuilt.close();
    expect(upcs(path)).toHaveLength(5003);
    rmSync(dirname(path), { recursive: true, force: true });
  });

  test('CSV numeric keys are deduplicated after a reopen that reads them back from the file', async () => {
    const path = join(tempDir('file-sink'), 'items.csv');
    const { index, keys } = indexFor('csv');
    const format = csvFormat(csvColumns(['upc', 'price']));
    const items = [1, 2, 3].map((upc) => ({ type: 'book', url: `http://x/${upc}`, upc, price: upc * 1.5 }));
    const first = await FileSink.open(path, format, keyFields, { index });
    await first.write(items);
    await first.close();
    await redis.del(...Object.values(keys.fileIndex('csv'))); // every identity now comes from the CSV text
    const again = await FileSink.open(path, format, keyFields, { index });
    await again.write([...items, { type: 'book', url: 'http://x/4', upc: 4, price: 6 }]);
    await again.close();
    expect(readFileSync(path, 'utf8')).toBe(
      'type,url,upc,price,spider,crawlId,fetchedAt\r\nbook,http://x/1,1,1.5,,,\r\nbook,http://x/2,2,3,,,\r\nbook,http://x/3,3,4.5,,,\r\nbook,http://x/4,4,6,,,\r\n',
    );
  });

  test('an index reset under an open sink (Redis lost its data) is rebuilt from the file: nothing written twice', async () => {
    const path = join(tempDir('file-sink'), 'items.jsonl');
    const { index, keys } = indexFor('reset');
    const sink = await FileSink.open(path, jsonlFormat, keyFields, { index });
    await sink.write([
      { type: 'book', upc: 'a' },
      { type: 'book', upc: 'b' },
    ]);
    await redis.del(...Object.values(keys.fileIndex('reset')));
    await sink.write([
      { type: 'book', upc: 'b' },
      { type: 'book', upc: 'c' },
    ]);
    await sink.close();
    expect(upcs(path)).toEqual(['a', 'b', 'c']);
  });

  test('two writer processes on one file, writing the same items at once: each line once', async () => {
    const path = join(tempDir('file-sink'), 'shared.jsonl');
    const { prefix } = indexFor('two');
    const run = (order: string) =>
      new Promise<{ code: number | null; stdout: string; stderr: string }>((resolve) => {
        const child = spawn(process.execPath, [join(ROOT, 'test/fixtures/file-sink-writer.mjs'), path, REDIS_URL, prefix, 'two', '0', '400', order], { cwd: ROOT });
        let stdout = '';
        let stderr = '';
        child.stdout.on('data', (d: Buffer) => (stdout += d.toString()));
        child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
        child.on('close', (code) => resolve({ code, stdout, stderr }));
      });
    const results = await Promise.all([run('forward'), run('reverse')]);
    expect(results.map((r) => [r.code, r.stderr])).toEqual([
      [0, ''],
      [0, ''],
    ]);
    const lines = readFileSync(path, 'utf8').split('\n');
    expect(lines.pop()).toBe(''); // ends with a whole line
    const written = lines.map((l) => (JSON.parse(l) as { upc: string }).upc);
    expect(written).toHaveLength(400);
    expect(new Set(written)).toEqual(new Set(Array.from({ length: 400 }, (_, i) => `u${i}`)));
    // how the work was shared (varies from run to run): stored batches and refusals per process
    console.log(`two writers: ${results.map((r) => r.stdout.trim()).join(' ')}`);
  });
});

describe('a fleet with two writer processes on one file sink', () => {
  test('the second writer parks its jobs while the first holds the file: the exact item set, each once', async () => {
    const shape = siteShape(500);
    const site = await startCatalogueSite(shape);
    const prefix = uniquePrefix('two-writers');
    const dir = tempDir('two-writers');
    const env = testEnv(prefix);
    const workers: ReturnType<typeof spawnCli>[] = [];
    try {
      const spider = writeJson(dir, 'catalogue.json', catalogueSpider(site.url));
      const out = join(dir, 'items.jsonl');
      const seeded = await runCli(['seed', spider, '--sink', out], { env });
      expect(seeded.code).toBe(0);
      const crawlId = seeded.stdout.trim().split('\n').pop()!;
      for (const [stage, n] of [
        ['fetcher', 1],
        ['parser', 1],
        ['writer', 2],
      ] as const) {
        for (let i = 0; i < n; i++) workers.push(spawnCli(['worker', stage, '--concurrency', '8'], { env }));
      }
      const waited = await runCli(['wait', '--crawl-id', crawlId, '--timeout', '170'], { env, timeoutMs: 175_000 });
      expect(waited.code).toBe(0);

      const truth = groundTruth(site.url, shape);
      const items = readJsonl(out);
      const fields = ['type', 'url', 'link', 'title', 'price', 'sku', 'category', 'tags'];
      expect(comparable(items, fields)).toEqual(comparable([...truth.products, ...truth.listings], fields));
      const status = JSON.parse((await runCli(['status', '--crawl-id', crawlId, '--json'], { env })).stdout);
      expect(status.state).toBe('done');
      expect(status.counters.failed).toBe(1); // the site's one broken link, no write job dead-lettered
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
