import { Redis } from 'ioredis';
import { Registry } from 'prom-client';
import { Keys, URL_BUCKETS, closeQueues, createQueues, runScript } from '@crawlfleet/core';
import { frontierOf, registerQueueGauges } from '@crawlfleet/monitoring';
import { admitUrls, frontierTake } from '@crawlfleet/frontier';
import { finishJobTaking } from '@crawlfleet/crawl';
import { REDIS_URL, dropPrefix, uniquePrefix } from '../helpers/cli.js';

/** A crawl that is not registered is not running: admission takes nothing into the fetch stage. */
const TAKE = frontierTake(2000);

describe('the frontier on real Redis', () => {
  const prefix = uniquePrefix('frontier');
  const keys = new Keys(prefix);
  const clients = Array.from({ length: 8 }, () => new Redis(REDIS_URL));
  afterAll(async () => {
    for (const c of clients) c.disconnect();
    await dropPrefix(prefix);
  });

  test('a URL found by many parsers at the same moment is admitted exactly once', async () => {
    const urls = Array.from({ length: 200 }, (_, i) => `http://h.test/p-${i}.html`);
    const results = await Promise.all(
      clients.map((c, n) =>
        admitUrls(
          c,
          keys,
          'race',
          [...urls].sort(() => (n % 2 ? 1 : -1)).map((url) => ({ url, depth: 1, verdict: 'admit' as const })),
          undefined,
          TAKE,
        ),
      ),
    );
    const newOnes = results
      .flatMap((r) => r.admitted)
      .filter((a) => a.isNew)
      .map((a) => a.url);
    expect(newOnes.sort()).toEqual([...urls].sort());
    const redis = clients[0]!;
    expect(await redis.hget(keys.crawl('race').counters, 'seen')).toBe('200');
    // Admitted URLs wait in the compact frontier, not as fetch jobs.
    expect(await redis.llen(keys.crawl('race').frontier)).toBe(200);
    expect(await redis.scard(keys.crawl('race').pending.fetch)).toBe(0);
  });

  test('maxPages caps admission; depth-refused URLs can be admitted later by a shorter path', async () => {
    const redis = clients[0]!;
    const a = await admitUrls(
      redis,
      keys,
      'caps',
      [1, 2, 3, 4].map((i) => ({ url: `http://h.test/${i}`, depth: 0, verdict: 'admit' as const })),
      3,
      TAKE,
    );
    expect(a.admitted.map((x) => x.url)).toEqual(['http://h.test/1', 'http://h.test/2', 'http://h.test/3']);
    expect(a.skipped).toBe(1);
    const deep = await admitUrls(redis, keys, 'depth', [{ url: 'http://h.test/deep', depth: 9, verdict: 'too-deep' }], undefined, TAKE);
    expect(deep).toEqual({ admitted: [], taken: [], skipped: 1 });
    expect(await redis.hget(keys.crawl('depth').counters, 'skipped')).toBe('1');
    const shallow = await admitUrls(redis, keys, 'depth', [{ url: 'http://h.test/deep', depth: 1, verdict: 'admit' }], undefined, TAKE);
    expect(shallow.admitted.map((x) => x.isNew)).toEqual([true]);
    expect(shallow.skipped).toBe(-1);
    expect(await redis.hmget(keys.crawl('depth').counters, 'skipped', 'seen')).toEqual(['0', '1']);
    // Admitted and waiting in the frontier: nothing to enqueue again.
    expect((await admitUrls(redis, keys, 'depth', [{ url: 'http://h.test/deep', depth: 1, verdict: 'admit' }], undefined, TAKE)).admitted).toEqual([]);
    // Admitted and pending in the fetch stage: offered again (a lost job is re-enqueued; an existing one is a no-op).
    await redis.hset(keys.crawl('depth').meta, 'state', 'running');
    const taking = await admitUrls(redis, keys, 'depth', [{ url: 'http://h.test/deep', depth: 1, verdict: 'admit' }], undefined, TAKE);
    expect([taking.admitted, taking.taken.map((t) => t.request.url)]).toEqual([[], ['http://h.test/deep']]);
    const again = await admitUrls(redis, keys, 'depth', [{ url: 'http://h.test/deep', depth: 1, verdict: 'admit' }], undefined, TAKE);
    expect(again.admitted.map((x) => x.isNew)).toEqual([false]);
    const out = await admitUrls(
      redis,
      keys,
      'depth',
      [
        { url: 'http://x.test/', depth: 1, verdict: 'out-of-scope' },
        { url: 'http://x.test/', depth: 1, verdict: 'out-of-scope' },
      ],
      undefined,
      TAKE,
    );
    expect(out).toEqual({ admitted: [], taken: [], skipped: 1 });
    expect(await redis.hget(keys.crawl('depth').counters, 'skipped')).toBe('1');
  });

  test('a running crawl holds at most its window of fetch jobs; each finished fetch job makes room that the next take fills, in batches', async () => {
    const redis = clients[0]!;
    const k = keys.crawl('window');
    await redis.hset(k.meta, 'state', 'running');
    const take = { window: 10, minBatch: 3 };
    const urls = Array.from({ length: 25 }, (_, i) => ({ url: `http://h.test/w-${i}`, depth: 1, verdict: 'admit' as const, referer: 'http://h.test/' }));
    const first = await admitUrls(redis, keys, 'window', urls, undefined, take);
    expect(first.admitted.filter((a) => a.isNew)).toHaveLength(25);
    // The first ten, in the order found, with the request each job is made from.
    expect(first.taken.map((t) => t.request.url)).toEqual(urls.slice(0, 10).map((u) => u.url));
    expect(first.taken[0]!.request).toEqual({ url: 'http://h.test/w-0', depth: 1, referer: 'http://h.test/' });
    expect([await redis.scard(k.pending.fetch), await redis.llen(k.frontier)]).toEqual([10, 15]);
    // Two places free are fewer than a batch: nothing taken; the third finish takes three.
    const finish = (t: { jobId: string }) => finishJobTaking(redis, keys, 'window', 'fetch', t.jobId, { take, url: { fingerprint: t.jobId.slice(1), state: 'd' } });
    expect((await finish(first.taken[0]!)).taken).toEqual([]);
    expect((await finish(first.taken[1]!)).taken).toEqual([]);
    expect((await finish(first.taken[2]!)).taken.map((t) => t.request.url)).toEqual(['http://h.test/w-10', 'http://h.test/w-11', 'http://h.test/w-12']);
    expect([await redis.scard(k.pending.fetch), await redis.llen(k.frontier)]).toEqual([10, 12]);
    // A paused crawl takes nothing; the take script resumes where the list stands.
    await redis.hset(k.meta, 'state', 'paused');
    expect(await runScript<string[]>(redis, 'takeFrontier', [k.meta, k.frontier, k.pending.fetch, k.requests], [20, 1])).toEqual([]);
    await redis.hset(k.meta, 'state', 'running');
    const taken = await runScript<string[]>(redis, 'takeFrontier', [k.meta, k.frontier, k.pending.fetch, k.requests], [20, 1]);
    expect(taken.length / 2).toBe(10);
    // The crawl is not done while its frontier holds URLs, even with nothing pending in any stage.
    await redis.del(k.pending.fetch);
    expect(await runScript<number>(redis, 'checkDone', [k.meta, k.pending.fetch, k.pending.parse, k.pending.write, k.frontier], [new Date().toISOString()])).toBe(0);
    await redis.del(k.frontier);
    expect(await runScript<number>(redis, 'checkDone', [k.meta, k.pending.fetch, k.pending.parse, k.pending.write, k.frontier], [new Date().toISOString()])).toBe(1);
  });

  test("a finish puts back its handed-over job's pending mark when a failover lost it, and only then", async () => {
    const redis = clients[0]!;
    const k = keys.crawl('handover');
    await redis.hset(k.meta, 'state', 'running');
    const urls = ['a', 'b', 'c'].map((n) => ({ url: `http://h.test/${n}`, depth: 0, verdict: 'admit' as const }));
    const { taken } = await admitUrls(redis, keys, 'handover', urls, undefined, { window: 10, minBatch: 1 });
    const [a, b, c] = taken.map((t) => t.jobId.slice(1));
    const finishFetch = (fp: string) => finishJobTaking(redis, keys, 'handover', 'fetch', `f${fp}`, { url: { fingerprint: fp, state: 'd' }, handedOver: `p${fp}` });
    // a: its parse job's mark was lost (the write that added it did not reach the replica): put back.
    await finishFetch(a!);
    // b: its parse job ran and finished before the fetch job's finish (the URL is parsed): nothing.
    await redis.sadd(k.pending.parse, `p${b}`);
    await finishJobTaking(redis, keys, 'handover', 'parse', `p${b}`, { url: { fingerprint: b!, state: 'p' } });
    await finishFetch(b!);
    // c: its parse job is pending as usual: still pending, once.
    await redis.sadd(k.pending.parse, `p${c}`);
    await finishFetch(c!);
    expect((await redis.smembers(k.pending.parse)).sort()).toEqual([`p${a}`, `p${c}`].sort());
    expect(await redis.scard(k.pending.fetch)).toBe(0);
    // The crawl is not done while a handed-over job is pending.
    expect(await redis.hget(k.meta, 'state')).toBe('running');
  });

  test('the seen-URL index packs 10,000 URLs into 8-byte records in at most URL_BUCKETS fields of one hash, and keeps each state', async () => {
    const redis = clients[0]!;
    const k = keys.crawl('packed');
    const urls = Array.from({ length: 10_000 }, (_, i) => ({ url: `http://h.test/packed/${i}`, depth: 0, verdict: 'admit' as const }));
    for (let i = 0; i < urls.length; i += 1000) await admitUrls(redis, keys, 'packed', urls.slice(i, i + 1000), undefined, TAKE);
    const buckets = await redis.hgetallBuffer(k.urls);
    expect(Object.keys(buckets).length).toBeLessThanOrEqual(URL_BUCKETS);
    const records = Object.values(buckets).flatMap((b) => Array.from({ length: b.length / 8 }, (_, i) => b.subarray(i * 8, i * 8 + 8)));
    expect(records).toHaveLength(10_000);
    // Every record a distinct tag, every state 'q' (queued).
    expect(new Set(records.map((r) => r.subarray(0, 7).toString('hex'))).size).toBe(10_000);
    expect(new Set(records.map((r) => String.fromCharCode(r[7]!)))).toEqual(new Set(['q']));
    // Admitted again: every one is known (no second admission, nothing counted twice).
    const again = await admitUrls(redis, keys, 'packed', urls.slice(0, 1000), undefined, TAKE);
    expect(again.admitted).toEqual([]);
    expect(await redis.hget(k.counters, 'seen')).toBe('10000');
  });

  test("the fetch backlog that autoscaling reads counts the URLs waiting in running crawls' frontiers, not a paused crawl's", async () => {
    const redis = clients[0]!;
    const urls = (name: string, n: number) => Array.from({ length: n }, (_, i) => ({ url: `http://h.test/${name}-${i}`, depth: 0, verdict: 'admit' as const }));
    await redis.hset(keys.crawl('backlog-running').meta, 'state', 'running');
    await redis.hset(keys.crawl('backlog-paused').meta, 'state', 'paused');
    await redis.sadd(keys.crawlIndex(), 'backlog-running', 'backlog-paused');
    // A window of 0 takes nothing: every URL stays in the frontier.
    await admitUrls(redis, keys, 'backlog-running', urls('r', 30), undefined, { window: 0, minBatch: 1 });
    await admitUrls(redis, keys, 'backlog-paused', urls('p', 12), undefined, { window: 0, minBatch: 1 });
    const queues = createQueues(redis, keys);
    try {
      const registry = new Registry();
      registerQueueGauges(registry, queues, frontierOf(redis, keys));
      const text = await registry.getSingleMetricAsString('crawlfleet_queue_backlog');
      expect(text).toContain('crawlfleet_queue_backlog{queue="fetch"} 30');
      expect(text).toContain('crawlfleet_queue_backlog{queue="parse"} 0');
    } finally {
      await closeQueues(queues);
    }
  });
});
