import { Redis } from 'ioredis';
import { Keys } from '@crawlfleet/core';
import { admitUrls } from '@crawlfleet/frontier';
import { REDIS_URL, dropPrefix, uniquePrefix } from '../helpers/cli.js';

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
      clients.map((c, n) => admitUrls(c, keys, 'race', [...urls].sort(() => (n % 2 ? 1 : -1)).map((url) => ({ url, depth: 1, verdict: 'admit' as const })), undefined)),
    );
    const newOnes = results.flatMap((r) => r.admitted).filter((a) => a.isNew).map((a) => a.url);
    expect(newOnes.sort()).toEqual([...urls].sort());
    const redis = clients[0]!;
    expect(await redis.hget(keys.crawl('race').counters, 'seen')).toBe('200');
    expect(await redis.scard(keys.crawl('race').pending.fetch)).toBe(200);
  });

  test('maxPages caps admission; depth-refused URLs can be admitted later by a shorter path', async () => {
    const redis = clients[0]!;
    const a = await admitUrls(redis, keys, 'caps', [1, 2, 3, 4].map((i) => ({ url: `http://h.test/${i}`, depth: 0, verdict: 'admit' as const })), 3);
    expect(a.admitted.map((x) => x.url)).toEqual(['http://h.test/1', 'http://h.test/2', 'http://h.test/3']);
    expect(a.skipped).toBe(1);
    const deep = await admitUrls(redis, keys, 'depth', [{ url: 'http://h.test/deep', depth: 9, verdict: 'too-deep' }], undefined);
    expect(deep).toEqual({ admitted: [], skipped: 1 });
    expect(await redis.hget(keys.crawl('depth').counters, 'skipped')).toBe('1');
    const shallow = await admitUrls(redis, keys, 'depth', [{ url: 'http://h.test/deep', depth: 1, verdict: 'admit' }], undefined);
    expect(shallow.admitted.map((x) => x.isNew)).toEqual([true]);
    expect(shallow.skipped).toBe(-1);
    expect(await redis.hmget(keys.crawl('depth').counters, 'skipped', 'seen')).toEqual(['0', '1']);
    // Admitted and unfinished: offered again (a lost job is re-enqueued; an existing one is a no-op).
    const again = await admitUrls(redis, keys, 'depth', [{ url: 'http://h.test/deep', depth: 1, verdict: 'admit' }], undefined);
    expect(again.admitted.map((x) => x.isNew)).toEqual([false]);
    const out = await admitUrls(redis, keys, 'depth', [{ url: 'http://x.test/', depth: 1, verdict: 'out-of-scope' }, { url: 'http://x.test/', depth: 1, verdict: 'out-of-scope' }], undefined);
    expect(out).toEqual({ admitted: [], skipped: 1 });
    expect(await redis.hget(keys.crawl('depth').counters, 'skipped')).toBe('1');
  });
});
