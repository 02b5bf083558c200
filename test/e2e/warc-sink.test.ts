import { spawnSync } from 'node:child_process';
import { appendFileSync, existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { gzipSync } from 'node:zlib';
import { Redis } from 'ioredis';
import { Keys, validateSpider } from '@crawlfleet/core';
import { type Exchange, openCrawlSinks, RedisCaptureDigests, RedisIdentityIndex, SinkBusyError, WarcSink, exchangeRecords, payloadDigest, serializeRecord, warcIdentity } from '@crawlfleet/storage';
import { REDIS_URL, ROOT, dropPrefix, tempDir, uniquePrefix } from '../helpers/cli.js';

const WARC_TOOLS = process.env.WARC_TOOLS ?? '';

/** An exchange as the fetch stage keeps it: a gzip body with its head as received. */
function exchange(n: number, body = `<html><body><h1>page ${n}</h1>${'x'.repeat(2000)}</body></html>`): Exchange {
  const wire = gzipSync(body);
  return {
    targetUri: `http://site.test/p/${n}.html`,
    date: new Date(Date.UTC(2026, 11, 5, 8, 0, n % 60)).toISOString(),
    requestHead: `GET /p/${n}.html HTTP/1.1\r\nHost: site.test\r\nAccept-Encoding: gzip\r\n\r\n`,
    responseHead: `HTTP/1.1 200 OK\r\nContent-Type: text/html\r\nContent-Encoding: gzip\r\nContent-Length: ${wire.length}\r\n\r\n`,
    body: wire,
    outlinks: [`http://site.test/p/${n + 1}.html`],
  };
}

/** Target URIs of the response and revisit records, per python's warcio, after `warcio check` accepted each file. */
function archivedUris(dir: string): { uri: string; type: string }[] {
  const files = readdirSync(dir)
    .filter((f) => f.endsWith('.warc.gz'))
    .sort()
    .map((f) => join(dir, f));
  for (const file of files) {
    const check = spawnSync(join(WARC_TOOLS, 'warcio'), ['check', file], { encoding: 'utf8' });
    expect({ file, status: check.status, out: check.stdout + check.stderr }).toEqual({ file, status: 0, out: '' });
  }
  const run = spawnSync(join(WARC_TOOLS, 'python'), [join(ROOT, 'test', 'fixtures', 'reference', 'warc_records.py'), ...files], { encoding: 'utf8', maxBuffer: 64 * 1024 * 1024 });
  expect(run.status).toBe(0);
  return (JSON.parse(run.stdout) as { uri: string; type: string }[]).filter((r) => r.type === 'response' || r.type === 'revisit').map(({ uri, type }) => ({ uri, type }));
}

describe('the WARC sink: exactly once across crashes, reopens and lost indexes', () => {
  let redis: Redis;
  const prefixes: string[] = [];
  const open = (dir: string, crawlId: string, prefix: string, rolloverBytes = 1_000_000_000, run?: string) => {
    const keys = new Keys(prefix).warcIndex(crawlId);
    return WarcSink.open({ dir, rolloverBytes }, crawlId, {
      ...(run ? { run } : {}),
      index: new RedisIdentityIndex(redis, keys),
      digests: new RedisCaptureDigests(redis, keys.digests),
      software: 'crawlfleet test',
      batch: { maxItems: 50, maxWaitMs: 5 },
      staleLockMs: 60_000,
      busyWaitMs: 100,
    });
  };
  const newPrefix = () => {
    const prefix = uniquePrefix('warc-sink');
    prefixes.push(prefix);
    return prefix;
  };
  beforeAll(() => {
    if (!WARC_TOOLS) throw new Error('WARC_TOOLS is not set: run the suite with scripts/test.sh (ensure_warc_tools)');
    redis = new Redis(REDIS_URL);
  });
  afterAll(async () => {
    for (const p of prefixes) await dropPrefix(p);
    redis.disconnect();
  });

  test('records appended but not indexed (a crash between) are found in the file on reopen, a torn last record is cut, and nothing is archived twice', async () => {
    const dir = tempDir('warc-sink');
    const prefix = newPrefix();
    const sink = await open(dir, 'c1', prefix);
    await sink.write([exchange(1), exchange(2), exchange(3)]);
    const path = sink.currentPath!;
    await sink.close();
    expect(existsSync(`${path}.cdxj`)).toBe(true);

    // A writer died after appending page 4 and before recording it, then one died mid-record.
    appendFileSync(path, Buffer.concat(await Promise.all(exchangeRecords(exchange(4), payloadDigest(exchange(4).body), undefined).map(serializeRecord))));
    const whole = statSync(path).size;
    const torn = await serializeRecord(exchangeRecords(exchange(5), payloadDigest(exchange(5).body), undefined)[0]!);
    appendFileSync(path, torn.subarray(0, Math.floor(torn.length / 2)));

    const again = await open(dir, 'c1', prefix);
    expect(statSync(path).size).toBe(whole);
    // pages 1-4 are archived already: only 5 and 6 are written
    await again.write([exchange(1), exchange(4), exchange(5), exchange(6)]);
    await again.close();
    expect(archivedUris(dir)).toEqual([1, 2, 3, 4, 5, 6].map((n) => ({ uri: `http://site.test/p/${n}.html`, type: 'response' })));
    expect(await redis.sismember(new Keys(prefix).warcIndex('c1').identities, warcIdentity('http://site.test/p/4.html'))).toBe(1);
  });

  test("a run's records are known as its own whatever their WARC-Date: a fetcher's clock behind the seeder's, a writer killed between append and index, and no URI is archived twice", async () => {
    const dir = tempDir('warc-sink');
    const prefix = newPrefix();
    const keys = new Keys(prefix).warcIndex('c5');
    // The run began at 10:00 on the seeder's clock; the fetchers' clocks are 2 hours behind it, so
    // every exchange of the run is dated before its start (exchange(): 08:00).
    const run = '2026-12-05T10:00:00.000Z';
    const sink = await open(dir, 'c5', prefix, 1_000_000_000, run);
    await sink.write([exchange(1), exchange(2)]);
    await sink.close();
    const indexed = await redis.hgetall(keys.state);
    // A writer appends page 3 and is killed before its index records it: the file has its records,
    // the index neither its identity nor the offset after it.
    const killed = await open(dir, 'c5', prefix, 1_000_000_000, run);
    await killed.write(exchange(3));
    await killed.close();
    await redis.hset(keys.state, indexed);
    await redis.srem(keys.identities, warcIdentity('http://site.test/p/3.html', run));

    // The next writer finds page 3 in the file on open, and its job's re-run archives nothing again.
    const again = await open(dir, 'c5', prefix, 1_000_000_000, run);
    await again.write([exchange(3), exchange(4)]);
    await again.close();
    expect(archivedUris(dir)).toEqual([1, 2, 3, 4].map((n) => ({ uri: `http://site.test/p/${n}.html`, type: 'response' })));

    // A later run (a recrawl) archives each URI again, once, whatever its clock says.
    const next = await open(dir, 'c5', prefix, 1_000_000_000, '2026-12-06T10:00:00.000Z');
    await next.write([exchange(1)]);
    await next.close();
    expect(archivedUris(dir).filter((u) => u.uri === 'http://site.test/p/1.html')).toEqual([
      { uri: 'http://site.test/p/1.html', type: 'response' },
      { uri: 'http://site.test/p/1.html', type: 'revisit' },
    ]);
  });

  test('rollover: each file opens with warcinfo and gets its CDXJ; a lost index is rebuilt from every file, revisits included', async () => {
    const dir = tempDir('warc-sink');
    const prefix = newPrefix();
    const sink = await open(dir, 'c2', prefix, 50_000);
    for (let n = 0; n < 100; n += 10) await sink.write(Array.from({ length: 10 }, (_, i) => exchange(n + i)));
    await sink.close();
    const files = readdirSync(dir)
      .filter((f) => f.endsWith('.warc.gz'))
      .sort();
    expect(files.length).toBeGreaterThanOrEqual(3);
    expect(files).toEqual(files.map((_, i) => `c2-0000${i + 1}.warc.gz`));
    for (const file of files) {
      // a batch goes whole into the next file when it would take this one past the size
      expect(statSync(join(dir, file)).size).toBeLessThanOrEqual(50_000);
      const cdxj = readFileSync(join(dir, `${file}.cdxj`), 'utf8')
        .trim()
        .split('\n');
      expect(cdxj.length).toBeGreaterThan(0);
      expect(cdxj.every((line) => line.includes(`"filename":"${file}"`))).toBe(true);
    }

    // Redis lost the index (or the crawl was reset): it is rebuilt from the files.
    await redis.del(...Object.values(new Keys(prefix).warcIndex('c2')));
    const rebuilt = await open(dir, 'c2', prefix, 50_000);
    // page 7 again, and page 200 with page 3's payload: a revisit of it
    await rebuilt.write([exchange(7), { ...exchange(200), body: exchange(3).body }]);
    await rebuilt.close();
    const uris = archivedUris(dir);
    expect(uris).toHaveLength(101);
    expect(new Set(uris.map((u) => u.uri)).size).toBe(101);
    expect(uris.at(-1)).toEqual({ uri: 'http://site.test/p/200.html', type: 'revisit' });
  });

  test('one writer at a time: a second sink on the same directory waits (SinkBusyError) until the first closes', async () => {
    const dir = tempDir('warc-sink');
    const prefix = newPrefix();
    const first = await open(dir, 'c3', prefix);
    await first.write(exchange(1));
    const second = await open(dir, 'c3', prefix);
    await expect(second.write(exchange(2))).rejects.toBeInstanceOf(SinkBusyError);
    await first.close();
    await second.write(exchange(2));
    await second.close();
    expect(archivedUris(dir).map((u) => u.uri)).toEqual(['http://site.test/p/1.html', 'http://site.test/p/2.html']);
    // the directory's file is the crawl's only file
    expect(readdirSync(dir).filter((f) => f.endsWith('.warc.gz'))).toEqual(['c3-00001.warc.gz']);
  });

  test("the writer's batch metrics count item batches only: archived exchanges are not reported as items", async () => {
    const dir = tempDir('warc-sink');
    const prefix = newPrefix();
    const flushed: number[] = [];
    const spider = validateSpider({ name: 's', startUrls: ['http://site.test/'], items: [{ type: 'page', fields: { title: { css: 'h1' } } }] });
    const sinks = await openCrawlSinks({ kind: 'jsonl', path: join(dir, 'items.jsonl'), warc: { dir: join(dir, 'warc'), rolloverBytes: 1_000_000_000 } }, spider, {
      mongoUrl: 'mongodb://127.0.0.1:1/none',
      redis,
      keys: new Keys(prefix),
      crawlId: 'c4',
      batch: { maxItems: 50, maxWaitMs: 5, onFlush: (items) => flushed.push(items) },
    });
    await sinks.archive!.write([exchange(1), exchange(2)]);
    await sinks.items.write([{ type: 'page', url: 'http://site.test/p/1.html', title: 'page 1' }]);
    await sinks.close();
    expect(flushed).toEqual([1]);
  });
});
