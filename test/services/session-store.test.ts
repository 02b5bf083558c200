// The fleet's sessions in a real Redis (SessionStore, issue #30): two stores stand for two fetchers.
import { Redis } from 'ioredis';
import { Keys } from '@crawlfleet/core';
import { SessionStore, sessionsFromHash } from '@crawlfleet/politeness';
import { REDIS_URL, dropPrefix, uniquePrefix } from '../helpers/cli.js';

const limits = { maxPerHost: 3, maxAgeMs: 60_000, maxUses: 5 };

describe('sessions in Redis, shared by the fleet', () => {
  let redis: Redis;
  let other: Redis;
  let prefix: string;
  let keys: Keys;
  beforeEach(() => {
    redis = new Redis(REDIS_URL, { maxRetriesPerRequest: 1 });
    other = new Redis(REDIS_URL, { maxRetriesPerRequest: 1 });
    prefix = uniquePrefix('sessions');
    keys = new Keys(prefix);
  });
  afterEach(async () => {
    await dropPrefix(prefix);
    redis.disconnect();
    other.disconnect();
  });

  test("two fetchers on one host share a proxy's session and its cookies", async () => {
    const first = new SessionStore(redis, keys, limits);
    const second = new SessionStore(other, keys, limits);
    const a = await first.take('shop.test', 'p1', () => 'chrome-linux');
    const b = await second.take('shop.test', 'p1', () => 'firefox-linux');
    expect(b.session).toMatchObject({ id: a.session.id, proxy: 'p1', profile: 'chrome-linux', uses: 2 });

    await first.storeCookies(a.session, 'https://shop.test/cart', ['sid=abc123; Path=/; Secure; HttpOnly', 'theme=dark; Path=/cart', 'tracker=1; Domain=other.test']);
    expect(await second.cookieHeader(b.session, 'https://shop.test/cart/items')).toBe('theme=dark; sid=abc123'); // RFC 6265: the longer path first
    expect(await second.cookieHeader(b.session, 'https://shop.test/')).toBe('sid=abc123');
    // Secure: not over plain http; a cookie for another domain was refused
    expect(await second.cookieHeader(b.session, 'http://shop.test/')).toBe('');
    // a server deleting a cookie deletes it for every fetcher
    await second.storeCookies(b.session, 'https://shop.test/', ['sid=; Path=/; Max-Age=0']);
    expect(await first.cookieHeader(a.session, 'https://shop.test/cart')).toBe('theme=dark');

    // another proxy gets a session of its own, without the cookies
    const c = await second.take('shop.test', 'p2', () => 'firefox-linux');
    expect(c.session.id).not.toBe(a.session.id);
    expect(c.session.profile).toBe('firefox-linux');
    expect(await second.cookieHeader(c.session, 'https://shop.test/cart')).toBe('');
  });

  test('a block retires exactly that session and its cookies; the next request begins another', async () => {
    const store = new SessionStore(redis, keys, limits);
    const blocked = (await store.take('shop.test', 'p1', () => 'chrome-linux')).session;
    const kept = (await store.take('shop.test', 'p2', () => 'chrome-linux')).session;
    await store.storeCookies(blocked, 'https://shop.test/', ['sid=blocked; Path=/']);
    await store.storeCookies(kept, 'https://shop.test/', ['sid=kept; Path=/']);

    expect(await store.retire(blocked)).toBe(true);
    expect(await store.retire(blocked)).toBe(false);
    expect(await redis.exists(keys.polite().sessionCookies('shop.test', blocked.id))).toBe(0);
    expect(await store.cookieHeader(kept, 'https://shop.test/')).toBe('sid=kept');
    const { sessions } = sessionsFromHash(await redis.hgetall(keys.polite().sessions('shop.test')));
    expect(sessions.map((s) => s.id)).toEqual([kept.id]);

    const next = (await store.take('shop.test', 'p1', () => 'chrome-linux')).session;
    expect(next.id).not.toBe(blocked.id);
    expect(await store.cookieHeader(next, 'https://shop.test/')).toBe('');
  });

  test('many fetchers at once keep the bounds: one session per proxy, at most maxUses uses each, at most maxPerHost alive', async () => {
    const stores = [new SessionStore(redis, keys, limits), new SessionStore(other, keys, limits)];
    const proxies = ['p1', 'p2', 'p3', 'p4'];
    const takes = await Promise.all(Array.from({ length: 60 }, (_, i) => stores[i % 2]!.take('shop.test', proxies[i % 4]!, () => 'chrome-linux')));
    const { sessions } = sessionsFromHash(await redis.hgetall(keys.polite().sessions('shop.test')));
    expect(sessions.length).toBeLessThanOrEqual(limits.maxPerHost);
    expect(new Set(sessions.map((s) => s.proxy)).size).toBe(sessions.length);
    for (const session of sessions) expect(session.uses).toBeLessThanOrEqual(limits.maxUses);
    // every take was counted by the session it took: 60 uses in all, among alive and retired sessions
    const usesById = new Map<string, number>();
    for (const { session } of takes) usesById.set(session.id, Math.max(usesById.get(session.id) ?? 0, session.uses));
    expect([...usesById.values()].reduce((a, b) => a + b, 0)).toBe(60);
    for (const uses of usesById.values()) expect(uses).toBeLessThanOrEqual(limits.maxUses);
    const retired = takes.flatMap((t) => t.retired);
    expect(new Set(retired.map((r) => r.id)).size).toBe(retired.length);
    expect(usesById.size).toBe(sessions.length + retired.length);
  });
});
